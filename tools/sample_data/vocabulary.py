"""The generator's word lists and templates, read from the JSON files in `data/`.

Each file holds one kind of vocabulary (``world.json``: the books' things, places and verbs;
``dialogue.json``: lines of speech; ...), each key one list. Non-ASCII characters (dashes,
ellipses) are written as JSON escapes so that the files stay ASCII.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data")


@cache
def load(kind: str) -> dict[str, Any]:
    """The parsed `data/<kind>.json` (read once)."""
    data = json.loads((DATA / f"{kind}.json").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"data/{kind}.json: expected an object of lists")
    return data


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{where}: expected a list of strings")
    return tuple(value)


def words(kind: str, name: str) -> tuple[str, ...]:
    """The list `name` of `data/<kind>.json`: strings, in file order."""
    return _strings(load(kind)[name], f"data/{kind}.json: {name}")


def word_pairs(kind: str, name: str) -> tuple[tuple[str, str], ...]:
    """The list `name` of `data/<kind>.json`: pairs of strings, in file order."""
    where = f"data/{kind}.json: {name}"
    pairs = tuple(_strings(pair, where) for pair in load(kind)[name])
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"{where}: expected pairs of strings")
    return tuple((first, second) for first, second in pairs)


def word_groups(kind: str, name: str) -> dict[str, tuple[str, ...]]:
    """The object `name` of `data/<kind>.json`: key -> its list of strings."""
    where = f"data/{kind}.json: {name}"
    groups = load(kind)[name]
    if not isinstance(groups, dict):
        raise ValueError(f"{where}: expected an object of lists")
    return {key: _strings(value, f"{where}.{key}") for key, value in groups.items()}
