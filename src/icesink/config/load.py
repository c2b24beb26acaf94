"""Loading the config: a YAML file, overridden by ICESINK__SECTION__KEY variables, validated into
`Config`; every error names the key at fault."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from icesink.config.model import Config
from icesink.errors import ConfigError

ENV_PREFIX = "ICESINK__"


def apply_env_overrides(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Return `raw` with every ICESINK__A__B=value applied as raw["a"]["b"] = yaml(value)."""
    out: dict[str, Any] = {k: v for k, v in raw.items()}
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not path:
            continue
        node = out
        for part in path[:-1]:
            child = node.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            node[part] = child
            node = child
        try:
            node[path[-1]] = yaml.safe_load(value) if value != "" else ""
        except yaml.YAMLError:
            node[path[-1]] = value
    return out


def _describe(e: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for err in e.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        lines.append(f"  {key}: {err['msg']}")
    return "\n".join(lines)


def parse_config(raw: Any, source: str = "<dict>", environ: Mapping[str, str] | None = None) -> Config:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid configuration ({source}): the top level must be a mapping")
    merged = apply_env_overrides(raw, os.environ if environ is None else environ)
    try:
        return Config.model_validate(merged)
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
    return parse_config(raw, str(p), environ)
