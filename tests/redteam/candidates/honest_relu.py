"""Control: an honest Triton ReLU for problems/relu_tiny.py. Every red-team test that asks "does kiln
still work afterwards" checks this one, and must get `ok`."""

# <include relu_kernel>
