"""The whole-graph tests' fixtures; their helpers live in graph_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from graph_helpers import DATA


@pytest.fixture
def data() -> Path:
    return DATA
