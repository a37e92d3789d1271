"""Reference side of the numerics tolerance (`kiln.tools.tolerance`, docs/tolerance.md).

Per trial, the reference worker runs the problem's `Model` twice more and keeps, for every floating
output, two numbers per compared element (every element, or the positions of a huge output's
secret-seeded sketch, `kiln.tools.sketch`, so the parent can line them up with the packed values):

- `err`: the native-dtype reference's own error, native minus high precision (float64 for fp32
  problems, float32 for bf16/fp16 ones): what rounding in the problem's own dtype does here;
- `mag`: the magnitude of the data contributing to the element, max(|F(|x|; |theta|)|, |high|),
  with F(|x|; |theta|) the model run in float32 on the absolute values of its floating inputs,
  parameters and buffers. For sums, means, dot products, matmuls and convolutions that is exactly
  the sum of |terms| of the standard rounding-error bound (|fl(s) - s| <= gamma_n sum |x_i|);
  through nonlinear layers it is a magnitude of the same order (and where that run overflows,
  |high| stands in).

- `sens`: how far the high-precision output moves when every floating input moves by one unit
  roundoff of the problem's dtype, and every floating parameter and computed op result inside the
  model by float32's, with random signs (x (1 + u s), s = +-1 drawn from the trial's seed). That is
  the output's conditioning with respect to its inputs and to its intermediate values at this
  data, which `mag` does not see when the result cancels against the data's size (LayerNorm of
  inputs far from zero: the mean's rounding, ~u |x|, moves every output by u |x| rstd |w|) or
  reads differences of large intermediate values (a softmax over logits of ~1e3; docs/tolerance.md).

All three are stored in bfloat16 (fp32's range, 3 significant digits: enough for a tolerance), so a
trial's numerics cost its outputs' size once more in the reference's output file. Anything that
goes wrong here (an op without float64 support, running out of memory) leaves the trial without
numerics, and the parent judges it by the fixed atol/rtol rule, saying why.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from kiln.tools import chunked, sketch
from kiln.tools.correctness import leaves, pack
from kiln.tools.inputs import derive_seed
from kiln.tools.tolerance import U_ACC, UNIT_ROUNDOFF

HIGH = {"fp32": torch.float64, "bf16": torch.float32, "fp16": torch.float32}
MAG_DTYPE = torch.float32
STORE = torch.bfloat16
REFINE_DRAWS = 7  # more sensitivity draws before a close rejection stands (`refine_sensitivity`)


class Numerics:
    """The two extra copies of one case's reference model: in high precision, and in float32 with
    every floating parameter and buffer replaced by its absolute value. Built once per case."""

    def __init__(self, model: torch.nn.Module, dtype: str) -> None:
        self.dtype = dtype
        self.high = copy.deepcopy(model).to(HIGH[dtype])
        self.mag = copy.deepcopy(model).to(MAG_DTYPE)
        with torch.no_grad():
            for t in [*self.mag.parameters(), *self.mag.buffers()]:
                if t.is_floating_point():
                    t.abs_()


def build(model: torch.nn.Module, dtype: str) -> Numerics | str:
    """The case's `Numerics`, or why there are none (a model that can't be copied)."""
    try:
        return Numerics(model, dtype)
    except Exception as exc:  # noqa: BLE001 - the parent then judges by atol/rtol and says why
        return _why(exc)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Factory calls inside forward() (`torch.zeros(n)`) follow the run's precision."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _forward(model: torch.nn.Module, inputs: tuple, dtype: torch.dtype, *, absolute: bool,
             perturb: tuple[float, int] | None = None) -> dict[str, Any]:
    """The model on `inputs` converted to `dtype` (their absolute values with `absolute`); with
    `perturb` = (u, seed), every floating input x becomes x (1 + u s), s = +-1 at random, and every
    floating parameter and computed op result moves the same way by float32's unit roundoff (the
    rounding of a dot product's terms and of intermediate values in an fp32 accumulator; buffers
    stay: masks and tables of exact values)."""
    args = [(x.abs() if absolute else x).to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in inputs]
    if perturb is None:
        with torch.no_grad(), _default_dtype(dtype):
            return dict(leaves(model(*args)))
    u, seed = perturb
    args = [_perturbed(x, u, derive_seed(seed, f"numerics.perturb.{i}")) if
            isinstance(x, torch.Tensor) and x.is_floating_point() else x for i, x in enumerate(args)]
    state = {name: _perturbed(t.detach(), U_ACC, derive_seed(seed, f"numerics.perturb.param.{name}"))
             for name, t in model.named_parameters() if t.is_floating_point()}
    with torch.no_grad(), _default_dtype(dtype), _Rounding(U_ACC, seed):
        return dict(leaves(torch.func.functional_call(model, state, tuple(args), strict=False)))


# Ops whose floating results are exact in any kernel (selections, copies, moves, sign and rounding
# functions): their results are not moved, so a mask of ones or a floored index stays exact.
# Integer values any op computes stay too (`_Rounding._round`).
_EXACT = frozenset([
    "relu", "threshold", "hardtanh", "clamp", "clamp_min", "clamp_max", "abs", "neg", "sign", "sgn", "floor", "ceil",
    "round", "trunc", "frac", "max", "min", "amax", "amin", "maximum", "minimum", "fmax", "fmin", "max_pool1d",
    "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "sort", "topk", "kthvalue", "median",
    "nanmedian", "mode", "cummax", "cummin", "where", "masked_fill", "masked_select", "masked_scatter", "index_put",
    "index_select", "index", "gather", "scatter", "take", "take_along_dim", "embedding", "cat", "stack", "clone",
    "_to_copy", "copy", "_unsafe_view", "flip", "roll", "repeat", "tril", "triu", "constant_pad_nd",
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "im2col", "narrow_copy",
    "slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter", "zeros_like", "ones_like",
    "full_like", "empty_like", "fill", "new_zeros", "new_ones", "new_full", "new_empty", "expand_copy",
    "permute_copy", "t_copy", "transpose_copy", "view_copy", "squeeze_copy", "unsqueeze_copy", "lift_fresh_copy",
    "detach_copy", "slice_copy", "select_copy", "split_with_sizes_copy", "unbind_copy", "alias_copy",
])


class _Rounding(TorchDispatchMode):
    """Every floating result of an op that computes (not a view, not an in-place update, not an
    exact op of `_EXACT`, not a factory) moves by one unit roundoff `u` with random signs: the
    standard model of rounding, fl(x op y) = (x op y)(1 + e), |e| <= u, applied to the model's
    intermediate values, so their magnitudes reach the sensitivity (a softmax over logits of ~1e3
    differs by ~u 1e3 per logit in any honest kernel). `u` is float32's for every dtype: kernels keep
    intermediate values in fp32 (a bf16 problem's bf16 intermediates are the native reference's own
    error, `d`), and bf16's unit roundoff on the output would allow 8 bf16 ulps, 3x its rtol."""

    def __init__(self, u: float, seed: int) -> None:
        super().__init__()
        self.u, self.seed, self.n = u, seed, 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        tensors = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if func.is_view or func._schema.is_mutable or func.overloadpacket.__name__ in _EXACT \
                or not any(a.is_floating_point() for a in tensors):
            return out
        storages = {a.untyped_storage().data_ptr() for a in tensors if a.numel()}
        return tree_map(lambda t: self._round(t, storages), out)

    def _round(self, t: Any, storages: set[int]) -> Any:
        """`t` moved in place, a slice at a time (a multi-GB result gets no full-size temporaries);
        integer values (indices, counts, masks: exact in fp32 kernels) stay. A result that shares
        an input's storage is left alone."""
        if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()) \
                or t.untyped_storage().data_ptr() in storages:
            return t
        self.n += 1
        gen = torch.Generator(device=t.device).manual_seed(derive_seed(self.seed, f"numerics.perturb.op.{self.n}"))
        t = t if t.is_contiguous() else t.contiguous()
        flat = t.view(-1)
        for off in range(0, flat.numel(), chunked.CHUNK):
            c = flat[off:off + chunked.CHUNK]
            e = torch.randint(0, 2, c.shape, generator=gen, device=c.device, dtype=torch.int8).to(c.dtype)
            e.mul_(2 * self.u).sub_(self.u).masked_fill_(c == c.round(), 0.0)
            c.addcmul_(c, e)  # c (1 + e), e = +-u
        return t


def _perturbed(x: torch.Tensor, u: float, seed: int) -> torch.Tensor:
    gen = torch.Generator(device=x.device).manual_seed(seed)
    signs = torch.randint(0, 2, x.shape, generator=gen, device=x.device, dtype=torch.int8)
    return x + x * signs.to(x.dtype).mul_(2 * u).sub_(u)  # x (1 + u s): u s is +-u


def _compared(t: torch.Tensor, name: str, seed: int) -> torch.Tensor:
    """The elements the judge compares, where the model computed them: all of them, or the
    sketch's sample."""
    if t.numel() >= sketch.SKETCH_MIN_NUMEL:
        pos = sketch.positions_on(str(t.device), tuple(t.shape), derive_seed(seed, name))
        return t.detach().reshape(-1)[pos]
    return t.detach()  # a fresh output of our own model copy: no defensive copy needed


def _native_values(packed: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The packed floating outputs' compared values (what the parent will compare against)."""
    out = {}
    for m in packed["meta"]:
        t: Any = packed["tensors"].get(m["name"]) if m["kind"] == "tensor" else None
        values = t["values"] if sketch.is_sketch(t) else t
        if isinstance(values, torch.Tensor) and values.is_floating_point():
            out[m["name"]] = values
    return out


def _shape_ok(t: Any, m: dict) -> bool:
    return isinstance(t, torch.Tensor) and list(t.shape) == m["shape"]


def numerics_pack(num: Numerics, inputs: tuple, packed: dict[str, Any], *, seed: int) -> dict[str, Any]:
    """The trial's numerics for the parent: {'status': 'ok', 'outputs': {name: {'err', 'mag'}}},
    or {'status': 'unavailable: why'}. `inputs` are the trial's inputs as the native reference got
    them, `packed` its packed output (`correctness.pack(out, seed)`), `seed` the run's secret."""
    native = _native_values(packed)
    shapes = {m["name"]: m for m in packed["meta"] if m["name"] in native}
    try:
        high = _runs(num.high, inputs, HIGH[num.dtype], shapes, seed)
        mag = _runs(num.mag, inputs, MAG_DTYPE, shapes, seed, absolute=True)
        moved = _runs(num.high, inputs, HIGH[num.dtype], shapes, seed, perturb=(UNIT_ROUNDOFF[num.dtype], seed))
    except Exception as exc:  # noqa: BLE001 - e.g. an op without float64 kernels, or out of memory
        return {"status": f"unavailable: {_why(exc)}"}
    outputs = {k: _element_data(native[k], high[k], mag.get(k), moved.get(k)) for k in high}
    return {"status": "ok", "outputs": outputs}


def _runs(model: torch.nn.Module, inputs: tuple, dtype: torch.dtype, shapes: dict[str, dict], seed: int, *,
          absolute: bool = False, perturb: tuple[float, int] | None = None) -> dict[str, torch.Tensor]:
    """`_forward`'s outputs that match the packed ones in shape, at the compared elements."""
    return {k: _compared(v, k, seed) for k, v in _forward(model, inputs, dtype, absolute=absolute, perturb=perturb).items()
            if k in shapes and _shape_ok(v, shapes[k])}


def _move(moved: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """|moved - high|, 0 where either is not finite (no allowance from an overflow)."""
    return torch.nan_to_num(torch.sub(moved, high).abs_(), nan=0.0, posinf=0.0, neginf=0.0)


def refine_sensitivity(num: Numerics | str | None, inputs: tuple, packed: dict[str, Any], *, seed: int,
                       draws: int = REFINE_DRAWS) -> bool:
    """Replace every output's one-draw sensitivity in `packed` (a `reference_trial` result on these
    very inputs, with key `seed`) by the RMS over that draw and `draws` more: the judge asks before a
    close numerics rejection stands (`kiln.tools.tolerance.REFINE_BELOW`). One draw is a random
    projection, small by chance at some elements (a tenth of its RMS at ~8% of them); the RMS of
    eight is below a third of it at ~0.1%. False when there is nothing to refine (no numerics, done
    already) or a run fails; `packed` is then unchanged."""
    data = packed.get("numerics") or {}
    outs = data.get("outputs") or {}
    if not isinstance(num, Numerics) or data.get("status") != "ok" or data.get("sens_draws", 1) > 1 \
            or not all("sens" in o for o in outs.values()):
        return False
    shapes = {m["name"]: m for m in packed["meta"] if m["name"] in outs}
    try:
        high = _runs(num.high, inputs, HIGH[num.dtype], shapes, seed)
        sq = {k: outs[k]["sens"].to(device=v.device, dtype=torch.float64).square() for k, v in high.items()}
        for d in range(draws):
            moved = _runs(num.high, inputs, HIGH[num.dtype], shapes, seed,
                          perturb=(UNIT_ROUNDOFF[num.dtype], derive_seed(seed, f"numerics.refine.{d}")))
            if set(moved) != set(outs) or set(high) != set(outs):
                return False
            for k, acc in sq.items():
                acc.add_(_move(moved[k], high[k]).double().square_())
    except Exception:  # noqa: BLE001 - e.g. out of memory: the one-draw verdict stands
        return False
    for k, acc in sq.items():
        outs[k]["sens"] = acc.div_(draws + 1).sqrt_().to(device=outs[k]["sens"].device, dtype=STORE)
    data["sens_draws"] = draws + 1
    return True


def _element_data(native: torch.Tensor, high: torch.Tensor, mag: torch.Tensor | None,
                  moved: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """err = native - high (in high precision: the two agree to the native dtype's last bits),
    mag = max(|abs run|, |high|), the abs run's non-finite values replaced by |high|, and
    sens = |moved - high| (0 where either is not finite: no allowance from an overflow)."""
    if native.device != high.device:  # `correctness.pack` keeps CPU copies; the high run stays on the GPU
        native = native.to(high.device)
    err = torch.sub(native, high.to(torch.float64) if high.dtype != torch.float64 else high)
    m = high.to(MAG_DTYPE).abs_()
    if mag is not None:
        m = torch.maximum(m, torch.nan_to_num(mag.to(MAG_DTYPE), nan=0.0, posinf=0.0, neginf=0.0).abs_())
    out = {"err": err.to(STORE), "mag": m.to(STORE)}
    if moved is not None:
        out["sens"] = _move(moved, high).to(STORE)
    return out


def reference_trial(model: torch.nn.Module, num: Numerics | str | None, inputs: tuple, pristine: tuple, *,
                    seed: int, drop_nonfinite: bool = False, packer: Any = pack
                    ) -> tuple[dict[str, Any] | None, str | None]:
    """One trial on the reference side: run the native reference on `inputs`, pack its output
    (`packer`: `correctness.pack` (CPU copies), or the judge's `pack_on_device`) and add the numerics
    computed from `pristine` (an untouched copy of the inputs; `num` is the case's `build(...)`
    result, None: --atol/--rtol given). Returns (packed, None), or (None, why) when
    `drop_nonfinite` (a wide distribution's first trial) and the reference's output is not finite
    there: the distribution is dropped for the problem."""
    with torch.no_grad():
        out = model(*inputs)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    packed = packer(out, seed)
    del out  # multi-GB outputs: the float64 run needs the room
    why = nonfinite(packed) if drop_nonfinite else None
    if why is not None:
        return None, why
    if isinstance(num, Numerics):
        packed["numerics"] = numerics_pack(num, pristine, packed, seed=seed)
        if packer is pack:  # CPU copies, as the packed output's
            for data in (packed["numerics"].get("outputs") or {}).values():
                data.update({k: v.cpu() for k, v in data.items()})
    elif num is not None:
        packed["numerics"] = {"status": f"unavailable: {num}"}
    return packed, None


def nonfinite(packed: dict[str, Any]) -> str | None:
    """Which output of a packed reference result holds NaN or inf, in words; None if all finite."""
    for m in packed["meta"]:
        t: Any = packed["tensors"].get(m["name"]) if m["kind"] == "tensor" else None
        if sketch.is_sketch(t):
            n = t["nan"] + t["posinf"] + t["neginf"]
        elif isinstance(t, torch.Tensor) and t.is_floating_point():
            n = int((~torch.isfinite(t)).sum())
        elif m["kind"] == "number" and isinstance(m["value"], float):
            n = int(not torch.isfinite(torch.tensor(m["value"])))
        else:
            n = 0
        if n:
            return f"the reference's {m['name']} holds {n} NaN/inf value(s)"
    return None
