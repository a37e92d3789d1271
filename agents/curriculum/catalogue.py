"""The API-set catalogue: torch ops grouped into families, each op with its argument space.

The built-in families live in `families.toml` beside this file; users add their own from TOML or
JSON files in the same format (`load_catalogue([...paths])`). Every defect in a file is one
`KilnInputError` line naming the file, the family and the op.
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kiln.tools.errors import KilnInputError

Kind = Literal["pointwise", "binary", "reduce", "project", "bmm", "conv2d", "pool2d", "gather", "scores"]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]
Scalar = bool | int | float | str
BUILTIN = Path(__file__).with_name("families.toml")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# placeholders the module builder fills in, per kind (besides the op's own args)
EXPR_VARS = {"x", "m"}
INIT_VARS = {"features", "channels", "out"}
KIND_VARS: dict[str, set[str]] = {"binary": {"y"}, "bmm": {"y"}, "gather": {"idx"}}
# ranks each kind accepts, unless the op narrows them
KIND_RANKS: dict[str, tuple[int, int]] = {
    "pointwise": (1, 4), "binary": (1, 4), "reduce": (2, 4), "project": (1, 4), "bmm": (3, 3),
    "conv2d": (4, 4), "pool2d": (4, 4), "gather": (1, 4), "scores": (3, 4),
}
KIND_ARGS: dict[str, set[str]] = {"reduce": {"dim"}, "conv2d": {"kernel_size", "stride", "padding"},
                                  "pool2d": {"kernel_size", "stride"}}


class OpSpec(BaseModel):
    """One torch op of a family and the space its arguments are drawn from."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="unique across the catalogue: lowercase letters, digits, underscores")
    kind: Kind = Field(description="how the op changes the shape it is given")
    expr: str = Field(description="the forward expression, with {x} for its input")
    init: str | None = Field(None, description="a module or parameter built in Model.__init__, used as {m}")
    args: dict[str, list[Scalar]] = Field(default_factory=dict, description="argument name -> values to draw")
    min_rank: int | None = Field(None, ge=1, le=4)
    max_rank: int | None = Field(None, ge=1, le=4)
    family: str = Field("", description="filled in from the enclosing family")

    def ranks(self) -> tuple[int, int]:
        lo, hi = KIND_RANKS[self.kind]
        return max(lo, self.min_rank or lo), min(hi, self.max_rank or hi)


class Family(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    op: list[OpSpec] = Field(min_length=1)


class Catalogue(BaseModel):
    """Families by name; ops by name (unique across families)."""

    model_config = ConfigDict(extra="forbid")

    families: dict[str, Family] = Field(default_factory=dict)

    def ops(self, families: list[str] | None = None) -> list[OpSpec]:
        chosen = families or list(self.families)
        return [op for name in chosen for op in self.families[name].op]

    def op(self, name: str) -> OpSpec:
        for fam in self.families.values():
            for op in fam.op:
                if op.name == name:
                    return op
        raise KeyError(name)

    def restrict(self, families: list[str] | None) -> Catalogue:
        """Only these families (all when None); an unknown name is a one-line error."""
        if not families:
            return self
        unknown = [f for f in families if f not in self.families]
        if unknown:
            raise KilnInputError(f"unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                                 f"valid: {', '.join(self.families)}")
        return Catalogue(families={f: self.families[f] for f in families})


def placeholders(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


def _op_error(op: OpSpec) -> str | None:
    if not NAME.match(op.name):
        return "op names are lowercase letters, digits and underscores"
    for text, base in ((op.expr, EXPR_VARS | KIND_VARS.get(op.kind, set())), (op.init or "", INIT_VARS)):
        allowed = base | set(op.args)
        if unknown := sorted(placeholders(text) - allowed):
            where = "expr" if text is op.expr else "init"
            return f"unknown placeholder {{{unknown[0]}}} in {where} (allowed: {', '.join(sorted(allowed))})"
    if "x" not in placeholders(op.expr):
        return "expr must use {x}, the op's input"
    if missing := sorted(KIND_VARS.get(op.kind, set()) - placeholders(op.expr)):
        return f"a {op.kind} op's expr must use {{{missing[0]}}}"
    if missing := sorted(KIND_ARGS.get(op.kind, set()) - set(op.args)):
        return f"a {op.kind} op needs the arg `{missing[0]}`"
    if ("m" in placeholders(op.expr)) != bool(op.init):
        return "{m} in expr and an init expression go together"
    if empty := [k for k, v in op.args.items() if not v]:
        return f"arg `{empty[0]}` has no values"
    lo, hi = op.ranks()
    return None if lo <= hi else f"no rank fits: a {op.kind} op takes ranks {KIND_RANKS[op.kind]}"


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def _read(path: Path) -> dict:
    if not path.is_file():
        raise KilnInputError(f"catalogue file not found: {path}")
    text = path.read_text()
    try:
        return json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise KilnInputError(f"{path}: not valid {kind}: {str(err).splitlines()[0]}") from None


def families_from_file(path: Path) -> list[Family]:
    """The families a file defines, validated; one-line `KilnInputError` on any defect."""
    data = _read(Path(path))
    if set(data) - {"family"} or not isinstance(data.get("family"), list):
        raise KilnInputError(f"{path}: expected a list of [[family]] tables and nothing else")
    out = []
    for i, raw in enumerate(data["family"]):
        try:
            fam = Family.model_validate(raw)
        except ValidationError as err:
            raise KilnInputError(f"{path}: family #{i + 1}: {_one_line(err)}") from None
        if not NAME.match(fam.name):
            raise KilnInputError(f"{path}: family {fam.name!r}: names are lowercase letters, digits, underscores")
        for op in fam.op:
            op.family = fam.name
            if why := _op_error(op):
                raise KilnInputError(f"{path}: family {fam.name!r} op {op.name!r}: {why}")
        out.append(fam)
    return out


@cache
def builtin_catalogue() -> Catalogue:
    return _merge(Catalogue(), families_from_file(BUILTIN), BUILTIN)


def _merge(cat: Catalogue, families: list[Family], path: Path) -> Catalogue:
    known = {op.name for op in cat.ops()}
    merged = dict(cat.families)
    for fam in families:
        if fam.name in merged:
            raise KilnInputError(f"{path}: family {fam.name!r} is already defined")
        if clash := sorted(known & {op.name for op in fam.op}):
            raise KilnInputError(f"{path}: family {fam.name!r}: op {clash[0]!r} is already defined")
        known |= {op.name for op in fam.op}
        merged[fam.name] = fam
    return Catalogue(families=merged)


def load_catalogue(paths: list[Path] | None = None, *, builtin: bool = True) -> Catalogue:
    """The built-in families plus those of each file, in order."""
    cat = builtin_catalogue() if builtin else Catalogue()
    for path in paths or []:
        cat = _merge(cat, families_from_file(Path(path)), Path(path))
    return cat
