"""RED TEAM, class 1 through a `match` class pattern (issue 22, part 5): `case object(__globals__=g)`
reads an attribute by the name in the pattern, which the scan never saw as an attribute. A function
the file defines has its module's globals there, and their builtins hold `__import__`, found by
value. Before: passed the scan. Stopped by the allowlist: class-pattern attributes are attributes
(`static.dynamic-access`)."""
# ruff: noqa: F821 - relu and make_judge_lenient come from parts/ (# <include>)

# <include relu_kernel>

# <include lenient_judge>

match relu:
    case object(__globals__=_g):
        _b = next(v for v in _g.values() if isinstance(v, dict) and "len" in v)
        _imp = next(v for v in _b.values() if getattr(v, "__name__", "") == "__import__")
        make_judge_lenient(_imp("kiln.tools.integrity.runtime", fromlist=["judge"]))
