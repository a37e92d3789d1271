"""RED TEAM, class 1 with a forged `self` (issue 22, part 5): a method may reach the attributes its own
class defines on `self`, so a class defining `get_capture_scope` passes its name. Called unbound
with `tl.sum` (a Triton JITFunction) as `self`, the method returns triton.language.standard's
globals, whose builtins hold `__import__`, found by value. Before: passed the scan. Stopped by the
allowlist: a plain method taken unbound (`_Reach.scope`) is refused (`static.dynamic-access`), as are
classes handed around as values and decorators the file defines."""
# ruff: noqa: F821 - relu_kernel and make_judge_lenient come from parts/ (# <include>)

# <include relu_kernel>

# <include lenient_judge>


class _Reach:
    def get_capture_scope(self):
        return {}

    def scope(self):
        return self.get_capture_scope()


_g = _Reach.scope(tl.sum)
_b = next(v for v in _g.values() if isinstance(v, dict) and "len" in v)
_imp = next(v for v in _b.values() if getattr(v, "__name__", "") == "__import__")
make_judge_lenient(_imp("kiln.tools.integrity.runtime", fromlist=["judge"]))
