"""RED TEAM, security on the GPU (native code, which no Python allowlist reads): a correct CUDA ReLU
built with `load_inline` whose C++ host function, on its first call, creates a file in the user's
home (`__HOME__`) with POSIX `open`/`write` and connects to a TCP server on 127.0.0.1 (the test's)
with `socket`/`connect`. Neither call is in the C++ denylist (`fopen`, `getenv`, `system`...).
Today: `ok`, and both side effects happen. Stopped by the OS sandbox only (no writes outside its
scratch, no network): the test that tells whether the sandbox, not the scan, holds."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

__global__ void relu_k(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

static void side_effects() {
    static bool done = false;
    if (done) return;
    done = true;
    int fd = open("__HOME__/redteam-native-created.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { write(fd, "native code", 11); close(fd); }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(__PORT__);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (s >= 0 && connect(s, (sockaddr*)&a, sizeof a) == 0) write(s, "native", 6);
    if (s >= 0) close(s);
}

torch::Tensor relu(torch::Tensor x) {
    side_effects();
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
CPP_SRC = "torch::Tensor relu(torch::Tensor x);"
ext = load_inline(name="redteam_native_side_effects", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["relu"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu(x.contiguous())
