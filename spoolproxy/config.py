"""The project configuration file, ``spoolproxy.toml``.

Looked up as ``--config PATH`` or ``$SPOOLPROXY_CONFIG``, else ``spoolproxy.toml`` in the
current directory or any parent, else ``[tool.spoolproxy]`` in the nearest ``pyproject.toml``.
Each subsystem owns one table and validates it with its own pydantic model:

    [redact]    extra header names, query parameters and regexes (see cassettes.redact)
    [playback]  ignore_json_paths, normalize, match_headers (see replayer)
    [detect]    thresholds, budgets and extra error patterns (see detectors)
    [prices]    user prices per model, local hosts (see detectors.pricing)
    [[checks]]  user checks run on every judged run (see checks)
    [record]    live budgets and the circuit breaker (see guards.config)
"""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import SpoolError

CONFIG_NAME = "spoolproxy.toml"


def find_config(start: Path | None = None) -> Path | None:
    """Return the config file that applies to ``start`` (default: the cwd), or None."""
    env = os.environ.get("SPOOLPROXY_CONFIG")
    if env:
        return Path(env)
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / CONFIG_NAME).is_file():
            return d / CONFIG_NAME
        pp = d / "pyproject.toml"
        if pp.is_file() and "[tool.spoolproxy" in pp.read_text(encoding="utf-8", errors="replace"):
            return pp
    return None


@lru_cache(maxsize=16)
def _load(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpoolError(f"config file {p} does not exist; create it or drop --config") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpoolError(f"{p}: not valid TOML ({exc}); fix the file or drop --config") from None
    if p.name == "pyproject.toml":
        data = data.get("tool", {}).get("spoolproxy", {})
    return data


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """Return the whole configuration as a dict ({} when there is no config file).

    Raises SpoolError when an explicitly named file is missing or is not valid TOML.
    """
    p = Path(path) if path else find_config()
    if p is None:
        return {}
    return _load(str(p.resolve()))


def section(name: str, path: str | Path | None = None) -> dict[str, Any]:
    """Return one table of the configuration (``{}`` when absent)."""
    value = load_config(path).get(name, {})
    if not isinstance(value, dict):
        raise SpoolError(f"config: [{name}] must be a table")
    return value
