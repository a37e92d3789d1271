"""Control (GPU): an honest Triton GEMM for problems/matmul_gpu.py. The GPU tests time it (and
eager) themselves, to know what kiln's timing should have said."""

# <include matmul_kernel>
