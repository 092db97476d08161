"""Edit `params.yaml` in place: named presets of size and training knobs, or single keys."""

from __future__ import annotations

import fcntl
import io
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


def _yaml() -> YAML:
    yaml_rt = YAML()
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 4096  # never re-flow a long line of params.yaml
    yaml_rt.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return yaml_rt


def _target(params_path: Path) -> Path:
    """The file an edit of `params_path` rewrites: itself, or, for a symbolic link (or a chain of
    them), the file it points to, so that the link stays a link and the file it shares is
    edited where it lies."""
    if not params_path.is_file():  # a dangling link is no file either
        if params_path.is_symlink():
            raise ParamsError(f"{params_path}: a link to {os.readlink(params_path)}, which is "
                              "not found")
        raise ParamsError(f"{params_path}: not found")
    return params_path.resolve() if params_path.is_symlink() else params_path


def _check_writable(params_path: Path, target: Path) -> None:
    """Refuse, naming `params_path`, an edit that could not write `target`: a read-only file
    (no write permission for anyone, or none for this user), or a folder in which the new
    version cannot be written beside it before it is renamed into place."""
    link = f" (a link to {target})" if target != params_path else ""
    mode = target.stat().st_mode & 0o7777
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise ParamsError(f"{params_path}{link}: read-only (mode {mode:04o}): make it writable "
                          "(chmod u+w) to edit it")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise ParamsError(f"{params_path}{link}: its folder {target.parent} is read-only, and an "
                          "edit writes the new version beside it before renaming it into place: "
                          "make the folder writable")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on file `path` itself for the block, so that edits made at once
    (`gpt1 set` in two shells) are made one after the other, none lost. An edit replaces the
    file by a rename: a lock won on the file it replaced is let go and taken on the new one."""
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        current = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held, now = os.fstat(fd), os.stat(path)
            current = (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)
        finally:
            if not current:
                os.close(fd)
        if current:
            break
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


def _edit(params_path: Path, change: Callable[[dict], None]) -> None:
    """Apply `change` to `params_path`'s mapping, keeping its comments and order; the result
    is validated before anything is written. The file is read, changed and written under an
    exclusive lock on it (`_locked`), which every writer of params.yaml takes; a link is edited
    where it points (`_target`)."""
    yaml_rt = _yaml()
    target = _target(params_path)
    _check_writable(params_path, target)
    with _locked(target):
        try:
            data = yaml_rt.load(target.read_text(encoding="utf-8"))
        except YAMLError as err:
            raise yaml_error(params_path, err) from None
        except UnicodeDecodeError as err:
            raise ParamsError(f"{params_path}: not UTF-8 text (byte {err.start})") from None
        if not isinstance(data, dict):
            raise ParamsError(f"{params_path}: expected a mapping of sections, found "
                              f"{type(data).__name__}")
        change(data)
        parse_params(data, params_path)
        try:
            with atomic_file(target) as tmp, tmp.open("w", encoding="utf-8") as fh:
                yaml_rt.dump(data, fh)
        except PermissionError as err:  # a temporary's name would say nothing to the user
            raise PermissionError(err.errno, err.strerror, str(params_path)) from None


def _mapping(node: object, where: str, dotted: str) -> dict:
    """`node`, the value at `where`, if it is a mapping that `dotted` can reach into."""
    if not isinstance(node, dict):
        raise ParamsError(f"params key {dotted}: {where.rstrip('.')} is {node!r}, not a "
                          "mapping of keys")
    return node


def _known(node: dict, key: str, where: str) -> None:
    """Refuse a key that `node` (at `where`) lacks, unless its keys are the user's to choose."""
    if key not in node and not _OPEN_MAPPINGS.fullmatch(where):
        raise ParamsError(f"params key {where}{key} does not exist")


def update_params(params_path: Path, overlay: dict, replace: re.Pattern[str] | None = None) -> None:
    """Overlay the (nested) keys of `overlay` onto `params_path`, merging mappings (the mappings
    `replace` matches are replaced whole), as a preset does."""
    _edit(params_path, lambda data: _overlay(data, overlay, "", replace))


def set_keys(params_path: Path, values: dict[str, object]) -> None:
    """Set each dotted key of `values` in `params_path` to its value, whole: a mapping given
    replaces the key's mapping (`tasks.sst2.overrides={}` empties it). Every key on the way must
    be a mapping; a key params.yaml lacks is refused, except inside the mappings whose keys are
    the user's (tasks, a task's overrides, an analysis's tasks)."""

    def change(data: dict) -> None:
        for dotted, value in values.items():
            *parents, leaf = dotted.split(".")
            node, where, new = data, "", False
            for part in parents:
                if part not in _mapping(node, where, dotted):
                    if not new:
                        _known(node, part, where)
                    node[part], new = CommentedMap(), True  # the params model checks its keys
                node, where = node[part], f"{where}{part}."
            if not new:
                _known(_mapping(node, where, dotted), leaf, where)
            node[leaf] = _inline(value)

    _edit(params_path, change)


def _task_layout(entry: dict) -> CommentedMap:
    """A registry entry as params.yaml writes its tasks: a block of keys whose values are
    inline, but for the `table` section, itself such a block."""
    return CommentedMap({key: _task_layout(value) if key == "table" else _inline(value)
                         for key, value in entry.items()})


def task_yaml(name: str, entry: dict) -> str:
    """Registry entry `name` as YAML, laid out as `set_task` writes it."""
    out = io.StringIO()
    _yaml().dump(CommentedMap({name: _task_layout(entry)}), out)
    return out.getvalue()


def set_task(params_path: Path, name: str, entry: dict, request: bool = True,
             replace: bool = True) -> None:
    """Write registry task `name` as `entry` (in place of one of that name, unless not
    `replace`) into `params_path`, and, with `request`, add it to the `finetune.tasks` list
    (under `all` it runs already); validated before anything is written, comments kept."""

    def change(data: dict) -> None:
        tasks = _mapping(data.get("tasks"), "tasks.", f"tasks.{name}")
        if not replace and name in tasks:  # added since the caller looked: under the lock now
            raise ParamsError(f"tasks.{name} is already in {params_path}: choose another name, "
                              "or --force to replace it")
        tasks[name] = _task_layout(entry)
        finetune = _mapping(data.get("finetune"), "finetune.", "finetune.tasks")
        requested = finetune.get("tasks")
        if request and isinstance(requested, list) and name not in requested:
            requested.append(name)

    _edit(params_path, change)


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


def parse_assignments(assignments: list[str]) -> dict[str, object]:
    """`["a.b=1", "c=[x, y]"]` -> `{"a.b": 1, "c": ["x", "y"]}`, values read as YAML."""
    dotted: dict[str, object] = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamsError(f"expected KEY=VALUE (e.g. ingest.root=../shared/data), got {item!r}")
        try:
            dotted[key] = read_yaml(value)
        except YAMLError as err:
            raise ParamsError(f"{key}: {value!r} is not valid YAML: {yaml_problem(err)}") from None
    return dotted
