"""The models the README and the docs show are priced and not retired by their provider."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PRICES = json.loads((ROOT / "agents" / "llm" / "prices.json").read_text())


def shown_models() -> set[str]:
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    return set(re.findall(r"\b(?:openai|anthropic):([A-Za-z0-9._-]+)", text)) - {"MODEL"}


def test_readme_and_docs_show_live_priced_models():
    models = shown_models()
    assert "claude-sonnet-5-5" in models
    retired = {m for m in models if m in PRICES["retired"]}
    assert retired == set(), f"retired models in the docs: {retired}"
    hosted = {m for m in models if m.startswith(("gpt-", "o3", "o4", "claude-"))}
    assert hosted <= set(PRICES["models"]), hosted - set(PRICES["models"])
