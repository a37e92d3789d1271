"""What `kiln model TARGET` optimises: a model and its example inputs, built without touching its source.

    path/to/file.py:factory          factory() -> (model, inputs); inputs: a tuple of args, a dict of
                                     kwargs, (args, kwargs), or one tensor
    timm:resnet50?batch=32           timm.create_model(name, pretrained=False) (random init)
    transformers:qwen3?layers=4&hidden=2048&batch=1&seq=2048&attn=sdpa
                                     a causal LM from a config (qwen3, llama, gemma3); no weights downloaded
    diffusers:resnet-block?ch=320&size=64&batch=2   diffusers' ResnetBlock2D
    diffusers:sd3-block?dim=1536&tokens=4096        diffusers' JointTransformerBlock (SD3.5-like)

Each failure is one `TargetError` line: a missing file or package, a factory that raises, a factory
that returns something else.
"""

from __future__ import annotations

import importlib
import importlib.util
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class TargetError(Exception):
    """The target cannot be built or run; the message is one line for the user and the report."""


@dataclass
class Target:
    name: str
    model: torch.nn.Module
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def call(self, args: tuple | None = None, kwargs: dict | None = None) -> Any:
        return self.model(*(self.args if args is None else args), **(self.kwargs if kwargs is None else kwargs))


def _options(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, query = spec.partition("?")
    opts: dict[str, Any] = {}
    for k, v in parse_qsl(query):
        opts[k] = int(v) if v.lstrip("-").isdigit() else float(v) if _is_float(v) else v
    return name, opts


def _is_float(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def _need(package: str, extra: str = "models") -> Any:
    try:
        return importlib.import_module(package)
    except ImportError as err:
        raise TargetError(f"{package} is not installed ({err}); pip install 'kernelkiln[{extra}]'") from None


def from_file(path: str, factory: str) -> tuple[torch.nn.Module, Any]:
    file = Path(path)
    if not file.is_file():
        raise TargetError(f"target file not found: {file}")
    from kiln.tools.check.worker import load_module

    try:
        mod = load_module(str(file.resolve()), "model_target")
    except Exception as err:  # noqa: BLE001 - the user's file: one line, never a traceback
        raise TargetError(f"{file} does not import: {type(err).__name__}: {err}{_where(err, file)}") from None
    fn = getattr(mod, factory, None)
    if not callable(fn):
        raise TargetError(f"{file} has no function `{factory}`")
    try:
        return fn()
    except Exception as err:  # noqa: BLE001
        raise TargetError(f"the factory {file.name}:{factory} raised {type(err).__name__}: {err}"
                          f"{_where(err, file)}") from None


def _where(err: BaseException, file: Path) -> str:
    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == file.resolve()]
    return f" (line {frames[-1].lineno})" if frames else ""


def _timm(name: str, o: dict[str, Any]) -> tuple[torch.nn.Module, Any]:
    timm = _need("timm")
    try:
        model = timm.create_model(name, pretrained=False)
    except Exception as err:  # noqa: BLE001 - unknown model names and the like
        raise TargetError(f"timm cannot build {name!r}: {err}") from None
    c, h, w = model.pretrained_cfg.get("input_size", (3, 224, 224))
    size = int(o.get("size", h))
    return model, (torch.randn(int(o.get("batch", 8)), c, size, size),)


def _transformers(family: str, o: dict[str, Any]) -> tuple[torch.nn.Module, Any]:
    tf = _need("transformers")
    hidden = int(o.get("hidden", 512))
    heads = int(o.get("heads", max(1, hidden // 128)))
    common = {"hidden_size": hidden, "intermediate_size": int(o.get("intermediate", hidden * 3)),
              "num_hidden_layers": int(o.get("layers", 2)), "num_attention_heads": heads,
              "num_key_value_heads": int(o.get("kv_heads", max(1, heads // 4))), "head_dim": hidden // heads,
              "vocab_size": int(o.get("vocab", 32000)), "max_position_embeddings": max(4096, int(o.get("seq", 128)))}
    configs = {"qwen3": "Qwen3Config", "llama": "LlamaConfig", "gemma3": "Gemma3TextConfig"}
    if family not in configs:
        raise TargetError(f"unknown transformers family {family!r}: use one of {', '.join(configs)}")
    config = getattr(tf, configs[family])(**common)
    config._attn_implementation = str(o.get("attn", "sdpa"))
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config)
    ids = torch.randint(0, common["vocab_size"], (int(o.get("batch", 1)), int(o.get("seq", 128))))
    return model, ((), {"input_ids": ids, "use_cache": False})


def _diffusers(block: str, o: dict[str, Any]) -> tuple[torch.nn.Module, Any]:
    _need("diffusers")
    batch = int(o.get("batch", 2))
    if block == "resnet-block":
        from diffusers.models.resnet import ResnetBlock2D

        ch, size = int(o.get("ch", 320)), int(o.get("size", 64))
        model: torch.nn.Module = ResnetBlock2D(in_channels=ch, out_channels=ch, temb_channels=1280, groups=32)
        return model, (torch.randn(batch, ch, size, size), torch.randn(batch, 1280))
    if block == "sd3-block":
        from diffusers.models.attention import JointTransformerBlock

        dim, heads = int(o.get("dim", 1536)), int(o.get("heads", 24))
        joint: torch.nn.Module = JointTransformerBlock(dim=dim, num_attention_heads=heads, attention_head_dim=dim // heads,
                                      context_pre_only=False)
        return joint, ((), {"hidden_states": torch.randn(batch, int(o.get("tokens", 4096)), dim),
                            "encoder_hidden_states": torch.randn(batch, int(o.get("context", 333)), dim),
                            "temb": torch.randn(batch, dim)})
    raise TargetError(f"unknown diffusers block {block!r}: use resnet-block or sd3-block")


BUILDERS: dict[str, Callable[[str, dict[str, Any]], tuple[torch.nn.Module, Any]]] = {
    "timm": _timm, "transformers": _transformers, "diffusers": _diffusers,
}


def split_inputs(inputs: Any) -> tuple[tuple, dict[str, Any]]:
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, tuple | list) and len(inputs) == 2 and isinstance(inputs[0], tuple | list) \
            and isinstance(inputs[1], dict):
        return tuple(inputs[0]), dict(inputs[1])
    if isinstance(inputs, tuple | list):
        return tuple(inputs), {}
    raise TargetError(f"the example inputs are a {type(inputs).__name__}: return a tuple of args, a dict of "
                      "kwargs or (args, kwargs)")


def build(spec: str) -> Target:
    """Build the model and example inputs a target names (on the CPU, fp32 as the library makes them)."""
    head, sep, rest = spec.partition(":")
    if head in BUILDERS and sep:
        name, opts = _options(rest)
        made = BUILDERS[head](name, opts)
    elif sep and head.endswith(".py"):
        made = from_file(head, rest or "make")
    else:
        raise TargetError(f"bad target {spec!r}: use path/to/file.py:factory, timm:NAME, transformers:FAMILY "
                          "or diffusers:BLOCK")
    if not (isinstance(made, tuple | list) and len(made) == 2):
        raise TargetError(f"{spec}: the factory must return (model, inputs), not a {type(made).__name__}")
    model, inputs = made
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{spec}: the factory's model is a {type(model).__name__}, not a torch.nn.Module")
    args, kwargs = split_inputs(inputs)
    name = f"{Path(head).stem}:{rest}" if head.endswith(".py") else spec.split("?")[0]
    return Target(name=name, model=model.eval(), args=args, kwargs=kwargs)


def _move(v: Any, device: str, dtype: torch.dtype) -> Any:
    if isinstance(v, torch.Tensor):
        return v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
    if isinstance(v, tuple | list):
        return type(v)(_move(x, device, dtype) for x in v)
    if isinstance(v, dict):
        return {k: _move(x, device, dtype) for k, x in v.items()}
    return v


def place(t: Target, device: str, dtype: str) -> Target:
    """The model and its inputs on the run's device and dtype; a model that cannot be moved or run
    there is a TargetError."""
    try:
        t.model = t.model.to(device=device, dtype=DTYPES[dtype])
    except Exception as err:  # noqa: BLE001
        raise TargetError(f"the model cannot be moved to {device}/{dtype}: {type(err).__name__}: {err}") from None
    t.args, t.kwargs = _move(t.args, device, DTYPES[dtype]), _move(t.kwargs, device, DTYPES[dtype])
    try:
        with torch.no_grad():
            t.call()
    except Exception as err:  # noqa: BLE001
        raise TargetError(f"the model does not run on {device}/{dtype}: {type(err).__name__}: {err}") from None
    return t
