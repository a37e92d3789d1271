"""Record the op calls of one forward: which function, with which arguments, inside which module.

A `TorchFunctionMode` sees every torch function, Tensor method and tensor operator a forward calls
(nested calls inside a handled call are not seen again). Module forward hooks keep the stack of
module paths. Composite modules with a known meaning but no single torch function (RMSNorm classes
of transformers / diffusers) are recorded as one *module site*; calls inside them are not recorded
separately. Calls whose output is a view of an input cost nothing and are never extracted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kiln.evals.model import sigs
from kiln.evals.model.records import CallSig, ValueStats

N_QUANTILES = 129
STATS_SAMPLE = 1 << 20
SAVE_MAX_BYTES = 512 << 20


def module_site(mod: torch.nn.Module) -> str | None:
    """The canonical op of a composite module recorded as one site, or None."""
    w = getattr(mod, "weight", None)
    eps = getattr(mod, "eps", getattr(mod, "variance_epsilon", None))
    if type(mod).__name__.endswith("RMSNorm") and isinstance(w, torch.Tensor) and w.dim() == 1 and eps is not None:
        return "rms_norm"
    return None


@dataclass
class Call:
    """One recorded call."""

    index: int
    sig: CallSig
    path: str = ""  # innermost module path ('' = the model itself)
    module_class: str = ""
    out_id: int = 0
    in_ids: list[int] = field(default_factory=list)
    view: bool = False
    unwritable: str | None = None
    inplace: bool = False
    uses: int = 0  # later calls that read this call's output

    @property
    def free(self) -> bool:
        """A view of an input: no work (an in-place op returns its input too, but works)."""
        return self.view and not self.inplace

    @property
    def key(self) -> str:
        return self.sig.key()


def stats_of(t: torch.Tensor) -> ValueStats | None:
    """Quantiles, range and sparsity of a floating activation (on a sample of at most 1 Mi values)."""
    if not t.is_floating_point() and t.dtype not in (torch.int64, torch.int32):
        return None
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return None
    if flat.numel() > STATS_SAMPLE:
        g = torch.Generator(device=flat.device).manual_seed(0)
        flat = flat[torch.randint(flat.numel(), (STATS_SAMPLE,), device=flat.device, generator=g)]
    x = flat.double()
    q = torch.quantile(x.float() if x.numel() > 1 << 24 else x, torch.linspace(0, 1, N_QUANTILES, dtype=x.dtype,
                                                                                 device=x.device))
    return ValueStats(min=float(x.min()), max=float(x.max()), mean=float(x.mean()),
                      std=float(x.std()) if x.numel() > 1 else 0.0, zero_frac=float((x == 0).double().mean()),
                      quantiles=[float(v) for v in q.cpu()])


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - tensors without storage (meta, fake): never a view
        return -1


class Recorder(TorchFunctionMode):
    """Records each call of a forward; optionally times it (record_function ranges for the profiler),
    and for the signatures in `keep` saves the first call's stats and tensors."""

    def __init__(self, params: dict[int, str], *, ranges: bool = False, keep: set[str] | None = None,
                 save_dir: Path | None = None) -> None:
        super().__init__()
        self.params, self.ranges, self.keep, self.save_dir = params, ranges, keep or set(), save_dir
        self.calls: list[Call] = []
        self.stack: list[tuple[str, torch.nn.Module]] = []
        self.busy = False
        self.site_depth = 0
        self.kept: dict[str, dict[str, Any]] = {}
        self._producer: dict[int, tuple[int, torch.Tensor]] = {}

    @property
    def path(self) -> str:
        return self.stack[-1][0] if self.stack else ""

    # -------------------------------------------------------------- function calls

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.busy or self.site_depth:
            return func(*args, **kwargs)
        name = sigs.func_name(func)
        with self._range(len(self.calls)):
            out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and any(isinstance(a, torch.Tensor) for a in (*args, *kwargs.values())):
            args, kwargs = sigs.normalize(func, args, kwargs)
            self._record(name, args, kwargs, out)
        return out

    @contextlib.contextmanager
    def _range(self, index: int) -> Iterator[None]:
        if not self.ranges:
            yield
            return
        with torch.profiler.record_function(f"kiln.call.{index}"):
            yield

    def _record(self, name: str, args: tuple, kwargs: dict, out: torch.Tensor, module_class: str = "") -> None:
        self.busy = True
        try:
            call = Call(index=len(self.calls), sig=CallSig(op=name), path=self.path, module_class=module_class)
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            call.view = any(_storage(t) == _storage(out) for t in tensors)
            call.inplace = sigs.inplace(name, args, kwargs)
            try:
                call.sig.args = sigs.call_args(args, kwargs, self.params)
                sigs.resolve(name) if not name.startswith("module:") else None
            except sigs.NotWritable as err:
                call.unwritable = str(err)
            call.sig.out = sigs.tensor_sig(out)
            call.in_ids = [id(t) for t in tensors]
            for t in tensors:
                prod = self._producer.get(id(t))
                if prod is not None and prod[1] is t:
                    self.calls[prod[0]].uses += 1
            self._producer[id(out)] = (call.index, out)
            call.out_id = id(out)
            self.calls.append(call)
            if call.unwritable is None and call.key in self.keep and call.key not in self.kept:
                self._keep(call, args, kwargs, out)
        finally:
            self.busy = False

    def _keep(self, call: Call, args: tuple, kwargs: dict, out: torch.Tensor) -> None:
        """Stats of the activations, and (when small enough) the real tensors to verify against."""
        values = [*args, *[kwargs[k] for k in sorted(kwargs)]]
        for spec, v in zip(call.sig.args, values, strict=True):
            if spec.kind == "tensor":
                spec.stats = stats_of(v)
        item: dict[str, Any] = {"sig": call.sig.model_copy(deep=True), "path": call.path, "file": None}
        size = sum(t.numel() * t.element_size() for t in (*[v for v in values if isinstance(v, torch.Tensor)], out))
        if self.save_dir is not None and size <= SAVE_MAX_BYTES:
            path = self.save_dir / f"call_{len(self.kept)}.pt"
            tensors = [v.detach().cpu() if isinstance(v, torch.Tensor) else None for v in values]
            torch.save({"values": tensors, "out": out.detach().cpu()}, path)
            item["file"] = str(path)
        self.kept[call.key] = item

    # -------------------------------------------------------------- modules

    def pre_hook(self, path: str) -> Callable:
        def hook(mod: torch.nn.Module, args: tuple) -> None:
            self.stack.append((path, mod))
            if self.site_depth == 0 and module_site(mod) and not self.busy:
                self._site_range = self._range(len(self.calls))
                self._site_range.__enter__()
            if module_site(mod):
                self.site_depth += 1
        return hook

    def post_hook(self, path: str) -> Callable:
        def hook(mod: torch.nn.Module, args: tuple, out: Any) -> None:
            if module_site(mod):
                self.site_depth -= 1
                if self.site_depth == 0 and not self.busy:
                    self._site_range.__exit__(None, None, None)
                    if isinstance(out, torch.Tensor) and len(args) == 1 and isinstance(args[0], torch.Tensor):
                        eps = float(getattr(mod, "eps", getattr(mod, "variance_epsilon", 0.0)))
                        self._record(f"module:{type(mod).__name__}", (args[0], mod.weight), {"eps": eps}, out,
                                     module_class=type(mod).__name__)
            if self.stack and self.stack[-1][0] == path:
                self.stack.pop()
        return hook


def param_names(model: torch.nn.Module) -> dict[int, str]:
    names: dict[int, str] = {}
    for name, t in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(t), name)
    for name, buf in model.named_buffers(remove_duplicate=False):
        names.setdefault(id(buf), name)
    return names


@contextlib.contextmanager
def recording(model: torch.nn.Module, rec: Recorder) -> Iterator[Recorder]:
    handles = []
    for path, mod in model.named_modules():
        handles.append(mod.register_forward_pre_hook(rec.pre_hook(path)))
        handles.append(mod.register_forward_hook(rec.post_hook(path)))
    try:
        with rec:
            yield rec
    finally:
        for h in handles:
            h.remove()
        rec._producer.clear()


def record(model: torch.nn.Module, call: Callable[[], Any], **kw: Any) -> tuple[Recorder, Any]:
    """Run `call()` (one forward) under a Recorder; returns the recorder and the forward's output."""
    rec = Recorder(param_names(model), **kw)
    with torch.no_grad(), recording(model, rec):
        out = call()
    return rec, out
