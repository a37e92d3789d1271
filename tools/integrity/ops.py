"""Which PyTorch (ATen) operators count as *compute*.

The strict policy allows allocation, views, copies and reshapes and nothing else; everything not
listed here is compute. The same table judges C++ `torch::` / `at::` calls in candidate sources.
"""

from __future__ import annotations

ALLOCATION = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "scalar_tensor",
    "arange", "fill", "zero", "resize", "set", "record_stream", "empty_permuted", "lift_fresh",
    "lift_fresh_copy", "lift", "tensor", "from_blob", "TensorOptions", "device", "dtype",
})
VIEW = frozenset({
    "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "as_strided", "expand",
    "expand_as", "permute", "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten",
    "select", "slice", "narrow", "split", "split_with_sizes", "chunk", "unbind", "movedim",
    "alias", "detach", "view_as_real", "view_as_complex", "swapaxes", "swapdims", "diagonal",
    "unfold", "_unsafe_split", "tensor_split", "contiguous_format",
})
COPY = frozenset({
    "copy", "_copy_from", "_copy_from_and_resize", "_to_copy", "to", "clone", "contiguous",
    "cat", "stack", "constant_pad_nd", "pad", "_to_dense", "cpu", "cuda",
})
METADATA = frozenset({
    "size", "sym_size", "stride", "sym_stride", "numel", "sym_numel", "dim", "is_contiguous",
    "is_same_size", "_local_scalar_dense", "item", "_has_compatible_shallow_copy_type",
    "storage_offset", "sym_storage_offset", "is_nonzero", "data_ptr", "options", "scalar_type",
    "is_cuda", "_nested_tensor_size", "equal", "_make_dep_token", "get_device", "element_size",
    "is_floating_point", "is_complex", "is_signed", "is_pinned", "pin_memory", "requires_grad",
    "is_leaf", "retain_grad", "output_nr", "_version", "is_set_to", "_is_any_true", "is_inference",
})
NON_COMPUTE = ALLOCATION | VIEW | COPY | METADATA


def base_name(op: str) -> str:
    """'aten::add_.Tensor' / 'aten.add_.Tensor' / 'add_' -> 'add' (in-place and overload dropped)."""
    name = op.split("::")[-1]
    if name.startswith("aten."):
        name = name[len("aten."):]
    name = name.split(".")[0]
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name


def is_compute(op: str) -> bool:
    """True for an operator that computes values (matmul, softmax, add, ...)."""
    return base_name(op) not in NON_COMPUTE
