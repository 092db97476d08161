"""Named sets of size and training knobs, overlaid onto `params.yaml` in one step."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from ruamel.yaml import YAML

from gpt1.atomic import atomic_file
from gpt1.config import ParamsError, parse_params


def available() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".yaml"))


def load_preset(name: str) -> dict:
    if name not in available():
        raise ParamsError(f"unknown preset {name!r}; available: {available()}")
    return yaml.safe_load(resources.files(__name__).joinpath(f"{name}.yaml").read_text())


def _overlay(target: dict, overlay: dict, where: str) -> None:
    for key, value in overlay.items():
        if key not in target:
            raise ParamsError(f"preset key {where}{key} does not exist in params")
        if isinstance(value, dict):
            _overlay(target[key], value, f"{where}{key}.")
        else:
            target[key] = value


def apply_preset(name: str, params_path: Path) -> None:
    """Overlay preset `name` onto `params_path` in place, keeping its comments and order."""
    yaml_rt = YAML()
    yaml_rt.preserve_quotes = True
    data = yaml_rt.load(params_path.read_text(encoding="utf-8"))
    _overlay(data, load_preset(name), "")
    parse_params(data, params_path)  # validate before anything is written
    with atomic_file(params_path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        yaml_rt.dump(data, fh)
