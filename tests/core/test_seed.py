"""kiln seeds torch's generators itself (`kiln.tools.inputs.seed_torch`): every draw of a trial or a
timing-ring slot starts from a seed, and torch.manual_seed cost 1-2.5 ms a call in a worker."""

from __future__ import annotations


def test_seed_torch_leaves_the_generators_as_torch_manual_seed_does() -> None:
    """kiln's cheap seeding (`inputs.seed_torch`) leaves the generators as torch.manual_seed does, so
    every draw is the same as before it, and costs far less (torch's queues a stack trace per call
    for devices a CUDA or CPU machine never starts)."""
    import torch

    from kiln.tools.inputs import seed_torch

    for seed in (0, 7, -5, 2**63 + 11, 2**64 - 1):
        seed_torch(seed)
        ours = (torch.rand(9), torch.randn(3, 4), torch.randint(0, 1000, (5,)))
        torch.manual_seed(seed)
        theirs = (torch.rand(9), torch.randn(3, 4), torch.randint(0, 1000, (5,)))
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True)), seed
