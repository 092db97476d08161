"""Where a command may write: the one check of every path a user names as an output (`gpt1
predict`, `export-hf`, `import-hf`, `import-openai`, and the predict flow's file).

Never, even with `--force`: inside `.git` or `.dvc`; a repository's root or a folder above one;
DVC's cache; in a DVC project, a stage's output, a folder holding one, or anything inside a
folder where stages write (`artifacts/` holds checkpoints DVC cannot restore); anything inside a
pipeline's data root (`ingest.root`); an input of the same command. An existing file is replaced
only with `--force`; an existing folder only where it holds nothing but what the command writes,
or with `--force` (`gpt1.atomic.check_replaceable`, which the folder's writer calls).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Sequence
from pathlib import Path

from gpt1.errors import InputError

# git's and DVC's own state, and what marks a folder as a repository's root
STATE_FOLDERS = {".git": "git's own state", ".dvc": "DVC's own state and cache"}
ROOT_MARKS = (".git", ".dvc", "dvc.yaml")
REFUSED = "refusing to write there, even with --force: write elsewhere"


def check_destination(out: Path, *, option: str = "--out", inputs: Sequence[Path] = (),
                      force: bool = False, folder: bool = False) -> None:
    """Refuse `out` (named `option` in the one-line InputError) where a command must not write
    (the module's rules); `inputs` are the command's own inputs, files or folders. A file `out`
    that exists needs `force`, and a folder there is refused; with `folder`, `out` is a folder
    its writer replaces, and whether an existing one may go is the writer's check."""
    target = Path(os.path.abspath(out))
    resolved = _real(out)
    name = f"{option} {out}"
    _not_git_or_dvc_state(name, resolved)
    projects = sorted({r for r in (_repository_root(_real(Path.cwd())),
                                   _repository_root(resolved)) if r is not None})
    for checkout in projects:
        _not_a_repository_or_its_cache(name, resolved, checkout)
        if (checkout / "dvc.yaml").is_file():
            _not_the_pipelines(name, resolved, checkout)
        _not_in_the_data_root(name, resolved, checkout)
    _not_an_input(name, target, resolved, inputs)
    if folder:
        return
    if out.is_dir():
        raise InputError(f"{name}: is a folder; name a file to write")
    elif os.path.lexists(out) and not force:
        raise InputError(f"{name}: exists; refusing to replace it (--force replaces it)")


def _real(path: Path) -> Path:
    """`path` absolute, its symlinks followed as far as they lead (`Path.resolve` raises on a
    loop; an input that loops is its reader's to report)."""
    return Path(os.path.realpath(path))


def _not_git_or_dvc_state(name: str, resolved: Path) -> None:
    for depth, part in enumerate(resolved.parts):
        if part in STATE_FOLDERS:
            raise InputError(f"{name}: inside {Path(*resolved.parts[:depth + 1])}, "
                             f"{STATE_FOLDERS[part]}; {REFUSED}")


def _not_an_input(name: str, target: Path, resolved: Path, inputs: Sequence[Path]) -> None:
    """Not an input, nor inside one (a folder read), nor a folder holding one."""
    for source in inputs:
        read = _real(source)
        if read == resolved or (target.exists() and source.exists()
                                and os.path.samefile(target, source)):
            raise InputError(f"{name}: is the input {source}; {REFUSED}")
        if read in resolved.parents:
            raise InputError(f"{name}: inside the input {source}; {REFUSED}")
        if resolved in read.parents:
            raise InputError(f"{name}: holds the input {source}; {REFUSED}")


def _repository_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds `.git`, `.dvc` or dvc.yaml."""
    return next((d for d in (start, *start.parents)
                 if any(os.path.lexists(d / mark) for mark in ROOT_MARKS)), None)


def _not_a_repository_or_its_cache(name: str, resolved: Path, checkout: Path) -> None:
    if checkout == resolved:
        raise InputError(f"{name}: the root of the repository at {checkout}; {REFUSED}")
    if resolved in checkout.parents:
        raise InputError(f"{name}: holds the repository at {checkout}; {REFUSED}")
    if not (checkout / ".dvc").is_dir():
        return
    cache = _dvc_cache(checkout)
    if cache == resolved:
        raise InputError(f"{name}: the DVC cache of {checkout}; {REFUSED}")
    if cache in resolved.parents:
        raise InputError(f"{name}: inside {cache}, DVC's cache; {REFUSED}")
    if resolved in cache.parents:
        raise InputError(f"{name}: holds {cache}, DVC's cache; {REFUSED}")


def _dvc_cache(root: Path) -> Path:
    """The cache of the DVC project at `root`: `.dvc/cache`, or the `cache.dir` that its
    `.dvc/config` (or `config.local`, which wins) names, relative to `.dvc/`."""
    cache = root / ".dvc" / "cache"
    for config in ("config", "config.local"):
        path = root / ".dvc" / config
        if not path.is_file():
            continue
        # DVC's config is INI with indented keys, which configparser reads once dedented
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        text = "\n".join(line.strip() for line in lines)
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:  # DVC itself says what is wrong with it
            continue
        folder = parser.get("cache", "dir", fallback="").strip().strip("'\"")
        if folder:
            cache = (path.parent / os.path.expanduser(folder)).resolve()
    return cache


def _declared_outputs(dvc_yaml: Path) -> dict[str, str]:
    """Each output path dvc.yaml declares -> its stage; a path with `${...}` in it (a foreach or
    matrix stage's) is cut before the first `${`, standing for every path under that prefix."""
    from gpt1.config import read_yaml

    declared: dict[str, str] = {}
    for stage_name, stage in (read_yaml(dvc_yaml.read_text(encoding="utf-8")) or {}).get(
            "stages", {}).items():
        body = stage.get("do", stage)
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind, []) or []:
                path = entry if isinstance(entry, str) else next(iter(entry))
                declared[path.partition("${")[0]] = stage_name
    return declared


def _listing(names: list[str]) -> str:
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"{', '.join(names[:3])}{more}"


def _not_the_pipelines(name: str, resolved: Path, root: Path) -> None:
    """In the DVC project at `root`: not at or inside a stage's output (a file written there
    leaves the stage modified in `dvc status`), not a folder holding one (replacing it loses
    them), and not inside a top folder where stages write (`artifacts/`: beside the outputs
    lie the checkpoints, which DVC cannot restore)."""
    if root not in resolved.parents:
        return
    where = resolved.relative_to(root).as_posix()
    held: dict[str, str] = {}
    folders: dict[str, set[str]] = {}  # top folder -> the stages writing inside it
    for path, stage in _declared_outputs(root / "dvc.yaml").items():
        prefix = path.rstrip("/")
        if prefix and (where == prefix or where.startswith(f"{prefix}/")):
            raise InputError(f"{name}: inside {path}, an output of stage {stage} in "
                             f"{root / 'dvc.yaml'}; DVC owns what is there: write elsewhere")
        if prefix.startswith(f"{where}/"):
            held[prefix] = stage
        if "/" in prefix:
            folders.setdefault(prefix.split("/")[0], set()).add(stage)
    if held:
        entries = sorted(e.name for e in resolved.iterdir()) if resolved.is_dir() else []
        holds = f"holds {_listing(entries)}; " if entries else ""
        stages = sorted(set(held.values()))
        outputs = (f"the output {next(iter(held))} of stage {stages[0]}" if len(held) == 1 else
                   f"outputs of stage{'s' if len(stages) > 1 else ''} {_listing(stages)}")
        raise InputError(f"{name}: {holds}{outputs} in {root / 'dvc.yaml'} "
                         f"{'lies' if len(held) == 1 else 'lie'} inside it; refusing to replace "
                         "it, even with --force: write elsewhere")
    top = where.split("/")[0]
    if top in folders:
        raise InputError(f"{name}: inside {root / top}, where stages of {root / 'dvc.yaml'} "
                         f"write ({_listing(sorted(folders[top]))}); {REFUSED}")


def _not_in_the_data_root(name: str, resolved: Path, checkout: Path) -> None:
    """Not inside the data root that the params.yaml at `checkout` names (`ingest.root`,
    relative to the checkout): the pipeline's inputs."""
    params = checkout / "params.yaml"
    if not params.is_file():
        return
    from gpt1.config import load_params  # checked in full, as every command that reads it

    data_root = _real(checkout / os.path.expanduser(load_params(params).ingest.root))
    if data_root == resolved or data_root in resolved.parents:
        raise InputError(f"{name}: inside {data_root}, the data root (ingest.root in {params}); "
                         f"{REFUSED}")
    if resolved in data_root.parents:
        raise InputError(f"{name}: holds {data_root}, the data root (ingest.root in {params}); "
                         f"{REFUSED}")
