"""The runtime accounting's rules: an `OpAccounting` record (gathered in the candidate's worker by
`kiln.tools.integrity.runtime.inspect_forward`) turned into findings under a policy. kiln's own process
applies them, never the worker; no torch here, so a fresh `kiln check` reaches its verdict without
importing it."""

from __future__ import annotations

from kiln.tools.records import Finding, OpAccounting


def judge(acc: OpAccounting, policy: str) -> list[Finding]:
    """Findings from an accounting record under a policy."""
    out: list[Finding] = []
    if not acc.own_kernels:
        ops = ", ".join(acc.compute_ops[:6]) or "no compute at all"
        out.append(Finding(rule="runtime.no-own-kernel", severity="reject",
                           evidence=f"no kernel of the candidate's own ran during forward ({acc.method}); "
                                    f"PyTorch ops: {ops}"))
    if acc.compute_ops:
        sev = "reject" if policy == "strict" else "info"
        out.append(Finding(rule="runtime.torch-compute", severity=sev,
                           evidence=f"PyTorch compute ops in forward: {', '.join(acc.compute_ops[:10])}"
                                    + (" (forbidden under the strict policy)" if policy == "strict" else "")))
    poisoned = [d for d in acc.decoy_kernels if "returns the output of" not in d]
    untouched = [d for d in acc.decoy_kernels if "returns the output of" in d]
    if poisoned:
        out.append(Finding(rule="runtime.decoy", severity="reject",
                           evidence=f"kernel(s) {', '.join(poisoned)} ran, but overwriting their output right "
                                    "after each launch (with -2x+1, then with 7.0) left the result within tolerance: "
                                    "their work does not reach the output"))
    if untouched:
        out.append(Finding(rule="runtime.decoy", severity="reject",
                           evidence=f"extension function(s) {', '.join(untouched)}: the result is PyTorch's, "
                                    "no kernel of the candidate's own touched it"))
    if acc.copy_kernels:
        ops = ", ".join(acc.compute_ops[:6]) or "none: the data came from outside PyTorch and the kernels"
        out.append(Finding(rule="runtime.launder", severity="reject",
                           evidence=f"kernel(s) {', '.join(acc.copy_kernels)} only moved data: on the inputs and on "
                                    "their negation, every output they wrote was a copy (bit for bit, permuted, cast "
                                    "or within tolerance) of their own inputs or of a result computed elsewhere; "
                                    f"PyTorch compute ops: {ops}. The work is not the candidate's"))
    return out
