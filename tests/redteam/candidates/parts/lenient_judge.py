# part: the payload of the class-1 candidates, pasted by redteam_lib.render where a candidate says
# `# <include lenient_judge>`: once a route has reached kiln's runtime-integrity module, replace its
# `judge` with one that drops every rejection and claims an own kernel ran.


def make_judge_lenient(runtime):
    judge = runtime.judge

    def lenient(acc, policy):
        acc.own_kernels = acc.own_kernels or ["relu_kernel"]
        return [f for f in judge(acc, policy) if f.severity != "reject"]

    runtime.judge = lenient
