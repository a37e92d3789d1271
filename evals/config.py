"""One configuration precedence for every command: built-in defaults, then a config file, then the
environment, then explicit flags.

- Config file: `--config FILE` before the command, else `$KILN_CONFIG`, else `./kiln.toml`, else
  `~/.config/kiln/config.toml`. One TOML table per command, keys named like the flags:

      [run]
      llm = "openai:gpt-4.1"
      max_iters = 12
      [check]
      trials = 3

- Environment: `KILN_<COMMAND>_<FLAG>`, e.g. `KILN_RUN_MAX_ITERS=12`, `KILN_CHECK_DTYPE=bf16`.
- Flags win over both. API keys never go in the file: they come from the provider's usual
  environment variable only.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from kiln.tools.errors import KilnConfigError

ENV_PREFIX = "KILN"
_SECRET_WORDS = ("key", "token", "secret", "password")


def config_path(explicit: str | None, env: dict[str, str] | None = None) -> Path | None:
    env = dict(os.environ) if env is None else env
    if explicit:
        return Path(explicit)
    if env.get("KILN_CONFIG"):
        return Path(env["KILN_CONFIG"])
    for candidate in (Path("kiln.toml"), Path.home() / ".config" / "kiln" / "config.toml"):
        if candidate.is_file():
            return candidate
    return None


def load_default_map(path: Path | None) -> dict[str, dict[str, Any]]:
    """The file as click's `default_map`: {command: {option_name: value}}."""
    if path is None:
        return {}
    if not path.is_file():
        raise KilnConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise KilnConfigError(f"{path}: not valid TOML: {err}") from None
    out: dict[str, dict[str, Any]] = {}
    for command, table in data.items():
        if not isinstance(table, dict):
            raise KilnConfigError(f"{path}: `{command}` must be a table like [run], not a plain value")
        for key in table:
            if any(word in key.lower() for word in _SECRET_WORDS):
                raise KilnConfigError(f"{path}: [{command}] {key}: secrets don't go in the config file; "
                                      "use the provider's environment variable")
        out[command] = {k.replace("-", "_"): v for k, v in table.items()}
    return out
