"""Where the spatial families' test problems live, and which of them go through kiln's real check
(test_builtin_spatial_check); test_builtin_spatial runs the others through the quicker selfcheck."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SHRUNK = HERE.parent / "fixtures" / "kernelbench_shrunk"  # KernelBench files, sizes shrunk
LEVEL1 = SHRUNK / "level1"
LEVEL2 = SHRUNK / "level2"
EXTRA = HERE / "spatial"  # modes KernelBench leaves at their defaults
CHECKED = [
    LEVEL1 / "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__.py",
    LEVEL1 / "82_conv_depthwise_2D_square_input_square_kernel.py",
    LEVEL1 / "43_Max_Pooling_3D.py",
    LEVEL1 / "33_BatchNorm.py",
    LEVEL1 / "97_ScaledDotProductAttention.py",
    LEVEL2 / "92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py",
]
