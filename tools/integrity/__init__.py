"""Result integrity: static, runtime, output-hygiene, timing, physics and degenerate-problem checks.

Every check returns `Finding`s (rule id, severity, evidence, line) or an integrity record from
`kiln.tools.records`; `verdict.apply` turns them into the final status. See docs/integrity.md.
Nothing here touches CUDA or the disk at import time.
"""
