"""kiln.tools.profile: Nsight Compute, fallback profilers, SASS, roofline and findings for the Judge.

collect (`ncu.run_ncu`, `toolchain.run_tool`, `collect`) -> parse (`parse_ncu`, `parse_torch`, `sass`)
-> analyze (`from_ncu`, `enrich`, `analyze`, `findings`) -> render (`render`). Imports are lazy:
nothing here touches CUDA or the disk at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kiln.tools.profile.records import ProfileReport, RungInfo

__all__ = ["detect_rung", "import_report", "profile_candidate", "render_digest"]


def detect_rung(*args: Any, **kwargs: Any) -> RungInfo:
    from kiln.tools.profile.rung import detect_rung as _detect

    return _detect(*args, **kwargs)


def profile_candidate(*args: Any, **kwargs: Any) -> ProfileReport:
    from kiln.tools.profile.api import profile_candidate as _profile

    return _profile(*args, **kwargs)


def import_report(*args: Any, **kwargs: Any) -> ProfileReport:
    from kiln.tools.profile.api import import_report as _import

    return _import(*args, **kwargs)


def render_digest(report: ProfileReport) -> str:
    from kiln.tools.profile.render import render_digest as _render

    return _render(report)
