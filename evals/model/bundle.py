"""A bundle: a folder of verified kernels plus `manifest.json` (signatures, scopes, guards, measured
speedups, environment), and the one line that uses it:

    import kiln
    kiln.load("runs/model-resnet50/bundle").apply(model)     # or: with kiln.load(...).applied(model): ...

A bundle refuses to apply where its guards do not hold (another GPU, dtype or torch version), with a
message that names each mismatch. A bundle holds code: load only bundles you trust.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch

from kiln.evals.model import launch
from kiln.evals.model.apply import Applied, apply_entries
from kiln.evals.model.patch import Kernel, Site, load_kernel_module
from kiln.evals.model.records import BundleEntry, BundleManifest, EnvGuard
from kiln.evals.model.sigs import dtype_name

MANIFEST = "manifest.json"


class BundleError(Exception):
    """A bundle that cannot be read, or whose guards do not hold here; one line for the user."""


def _base(version: str) -> str:
    return version.split("+")[0]


def current_guard(model: torch.nn.Module) -> EnvGuard:
    """The environment a model runs in: device, GPU name, dtype of its floating parameters, versions."""
    p = next((t for t in model.parameters() if t.is_floating_point()), None)
    device = p.device if p is not None else torch.device("cpu")
    try:  # the version without importing Triton (whose interpreter switch is read at import)
        tv: str | None = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        tv = None
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return EnvGuard(device=device.type, gpu_name=gpu, dtype=dtype_name(p.dtype) if p is not None else "float32",
                    torch=torch.__version__, triton=tv)


def mismatches(want: EnvGuard, have: EnvGuard) -> list[str]:
    out = []
    if want.device != have.device or want.gpu_name != have.gpu_name:
        out.append(f"built for {want.gpu_name or want.device}, this model is on {have.gpu_name or have.device}")
    if want.dtype != have.dtype:
        out.append(f"built for {want.dtype} weights, this model's are {have.dtype}")
    if _base(want.torch) != _base(have.torch):
        out.append(f"built with torch {want.torch}, this is torch {have.torch}")
    if want.triton and have.triton and want.triton.split(".")[:2] != have.triton.split(".")[:2]:
        out.append(f"built with Triton {want.triton}, this is Triton {have.triton}")
    return out


class Bundle:
    def __init__(self, folder: Path, manifest: BundleManifest) -> None:
        self.folder, self.manifest = folder, manifest

    def sites(self, only: set[str] | None = None, lean: bool = True) -> list[Site]:
        if self.manifest.guard.device == "cpu":  # CPU bundles (tests, dry runs): Triton's interpreter
            os.environ.setdefault("TRITON_INTERPRET", "1")
        out = []
        for e in self.manifest.entries:
            if only is not None and e.group not in only:
                continue
            mod = load_kernel_module(self.folder / e.kernel)
            if lean:
                launch.lean(mod)
            out_sig = (e.tail or e.sig).out
            out.append(Site(e, Kernel(mod, out_sig, f"{_tag(self.folder)}_{e.group}")))
        return out

    def check(self, model: torch.nn.Module) -> None:
        bad = mismatches(self.manifest.guard, current_guard(model))
        if bad:
            raise BundleError(f"bundle {self.folder} does not apply here: " + "; ".join(bad))

    def apply(self, model: torch.nn.Module, *, only: set[str] | None = None, lean: bool = True) -> Applied:
        """Patch `model` in place (guards first); returns the handle whose `remove()` undoes it.
        `lean`: launch the kernels' Triton functions through `launch.py`'s cached path (GPU)."""
        self.check(model)
        return apply_entries(model, self.sites(only, lean), self.manifest.compile_policy == "kernels")

    @contextlib.contextmanager
    def applied(self, model: torch.nn.Module, *, only: set[str] | None = None, lean: bool = True
                ) -> Iterator[Applied]:
        handle = self.apply(model, only=only, lean=lean)
        try:
            yield handle
        finally:
            handle.remove()


def _tag(folder: Path) -> str:
    import hashlib

    return "b" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:8]


def load(folder: str | Path) -> Bundle:
    """Read a bundle folder (nothing is applied or imported until `apply`)."""
    path = Path(folder)
    if not (path / MANIFEST).is_file():
        raise BundleError(f"not a kiln bundle (no {MANIFEST}): {path}")
    try:
        manifest = BundleManifest.model_validate_json((path / MANIFEST).read_text())
    except ValueError as err:
        raise BundleError(f"{path / MANIFEST} is not a valid manifest: {str(err).splitlines()[0]}") from None
    return Bundle(path, manifest)


def write(folder: Path, manifest: BundleManifest, kernels: dict[str, Path]) -> Bundle:
    """A bundle folder from a manifest and each entry's kernel file (copied in as kernels/<group>.py)."""
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    entries: list[BundleEntry] = []
    for e in manifest.entries:
        dest = folder / "kernels" / f"{e.group}.py"
        shutil.copyfile(kernels[e.group], dest)
        entries.append(e.model_copy(update={"kernel": f"kernels/{e.group}.py"}))
    manifest = manifest.model_copy(update={"entries": entries})
    (folder / MANIFEST).write_text(manifest.model_dump_json(indent=2))
    return Bundle(folder, manifest)
