"""Edit `params.yaml` in place: named presets of size and training knobs, or single keys."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gpt1.atomic import atomic_file
from gpt1.config import ParamsError, parse_params, read_yaml, yaml_error, yaml_problem


def available() -> list[str]:
    """The names of the bundled presets (`gpt1/presets/<name>.yaml`)."""
    return sorted(p.name.removesuffix(".yaml") for p in resources.files("gpt1.presets").iterdir()
                  if p.name.endswith(".yaml"))


def load_preset(name: str) -> dict:
    """Preset `name`: the nested params keys it sets, with their values."""
    if name not in available():
        raise ParamsError(f"unknown preset {name!r}; available: {available()}")
    preset = resources.files("gpt1.presets").joinpath(f"{name}.yaml")
    return read_yaml(preset.read_text(encoding="utf-8"))


# Mappings whose keys are the user's to choose (a new task, a task's override, the tasks an
# analysis runs); elsewhere a key that params.yaml lacks is a typo.
_OPEN_MAPPINGS = re.compile(r"tasks\.|tasks\.[^.]+\.(overrides|paper|files)\."
                            r"|analysis\.(ablation|transfer|zero_shot)\.tasks\.")


def _inline(value: object) -> object:
    """`value` as params.yaml writes lists and the task mappings: inline."""
    if isinstance(value, dict):
        node: CommentedMap | CommentedSeq = CommentedMap({k: _inline(v) for k, v in value.items()})
    elif isinstance(value, list):
        node = CommentedSeq([_inline(v) for v in value])
    else:
        return value
    node.fa.set_flow_style()
    return node


# The mappings a preset replaces whole, so that its analyses run exactly its own tasks.
ANALYSIS_TASKS = re.compile(r"analysis\.(ablation|transfer|zero_shot)\.tasks\.")


def _overlay(target: dict, overlay: dict, where: str = "",
             replace: re.Pattern[str] | None = None) -> None:
    """Set `overlay`'s keys in `target`, merging mappings, except those `replace` matches."""
    for key, value in overlay.items():
        if key not in target and not _OPEN_MAPPINGS.fullmatch(where):
            raise ParamsError(f"params key {where}{key} does not exist")
        inner = f"{where}{key}."
        if (isinstance(value, dict) and key in target
                and not (replace and replace.fullmatch(inner))):
            _overlay(target[key], value, inner, replace)
        else:
            target[key] = _inline(value)


def update_params(params_path: Path, overlay: dict, replace: re.Pattern[str] | None = None) -> None:
    """Set the (nested) keys of `overlay` in `params_path`, keeping its comments and order (the
    mappings `replace` matches are replaced whole); the result is validated before anything is
    written."""
    yaml_rt = YAML()
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 4096  # never re-flow a long line of params.yaml
    yaml_rt.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    if not params_path.is_file():
        raise ParamsError(f"{params_path}: not found")
    try:
        data = yaml_rt.load(params_path.read_text(encoding="utf-8"))
    except YAMLError as err:
        raise yaml_error(params_path, err) from None
    except UnicodeDecodeError as err:
        raise ParamsError(f"{params_path}: not UTF-8 text (byte {err.start})") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{params_path}: expected a mapping of sections, found "
                          f"{type(data).__name__}")
    _overlay(data, overlay, "", replace)
    parse_params(data, params_path)
    with atomic_file(params_path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        yaml_rt.dump(data, fh)


def apply_preset(name: str, params_path: Path) -> None:
    """Overlay preset `name` onto `params_path` in place."""
    update_params(params_path, load_preset(name), ANALYSIS_TASKS)


def nest(dotted: dict[str, object]) -> dict:
    """`{"a.b": 1, "c": 2}` -> `{"a": {"b": 1}, "c": 2}`."""
    overlay: dict = {}
    for key, value in dotted.items():
        *parents, leaf = key.split(".")
        node = overlay
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return overlay


def parse_assignments(assignments: list[str]) -> dict:
    """`["a.b=1", "c=[x, y]"]` -> `{"a": {"b": 1}, "c": ["x", "y"]}`, values read as YAML."""
    dotted: dict[str, object] = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamsError(f"expected KEY=VALUE (e.g. ingest.root=../shared/data), got {item!r}")
        try:
            dotted[key] = read_yaml(value)
        except YAMLError as err:
            raise ParamsError(f"{key}: {value!r} is not valid YAML: {yaml_problem(err)}") from None
    return nest(dotted)
