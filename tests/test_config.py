"""gpt1.config: params.yaml validated once, with errors that name the file and the dotted key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gpt1.config import Params, ParamsError, load_params, parse_params

REPO_PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


@pytest.fixture()
def raw() -> dict:
    return yaml.safe_load(REPO_PARAMS.read_text(encoding="utf-8"))


def _error(raw: dict, tmp_path: Path) -> str:
    path = tmp_path / "my-params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError) as info:
        load_params(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_repo_params_load() -> None:
    params = load_params(REPO_PARAMS)
    assert isinstance(params, Params)
    assert params.model.n_embd % params.model.n_head == 0
    assert params.finetune.tasks == ["sst2"]
    assert params.ingest.max_train_examples is None
    assert params.pretrain.schedule in ("cosine", "linear")
    assert params.finetune.for_task("sst2") == params.finetune.train  # no overrides


def test_params_are_frozen() -> None:
    params = load_params(REPO_PARAMS)
    with pytest.raises(ValueError):
        params.model.n_embd = 1  # type: ignore[misc]


@pytest.mark.parametrize(("section", "key", "value"), [
    ("model", "n_embd", "wide"),
    ("pretrain", "lr", "fast"),
    ("clean", "dedupe", "maybe"),
    ("pretrain", "schedule", "step"),
    ("tokenize", "val_every", 1),  # out of range
    ("bpe", "vocab_size", 10),
])
def test_wrong_value_names_dotted_key_and_file(raw: dict, tmp_path: Path, section: str,
                                               key: str, value: object) -> None:
    raw[section][key] = value
    message = _error(raw, tmp_path)
    assert f"{section}.{key}:" in message
    assert repr(value) in message


def test_unknown_key_names_dotted_key(raw: dict, tmp_path: Path) -> None:
    raw["model"]["n_embed"] = 256  # a typo of n_embd
    message = _error(raw, tmp_path)
    assert "model.n_embed:" in message and "Extra inputs" in message


def test_nested_wrong_type_names_full_path(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["train"]["epochs"] = "three"
    assert "finetune.train.epochs:" in _error(raw, tmp_path)


def test_missing_section_and_key(raw: dict, tmp_path: Path) -> None:
    del raw["bpe"]
    del raw["model"]["n_ctx"]
    message = _error(raw, tmp_path)
    assert "2 invalid value(s)" in message
    assert "bpe: Field required" in message and "model.n_ctx: Field required" in message


def test_heads_must_divide_width(raw: dict, tmp_path: Path) -> None:
    raw["model"]["n_embd"], raw["model"]["n_head"] = 30, 4
    assert "must be divisible by n_head" in _error(raw, tmp_path)


def test_missing_overrides_for_a_task_is_an_error(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["overrides"] = {}
    assert "overrides.sst2 is missing" in _error(raw, tmp_path)


def test_task_listed_twice(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["tasks"] = ["sst2", "sst2"]
    assert "tasks lists a task twice" in _error(raw, tmp_path)


def test_unknown_override_key(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["overrides"]["sst2"] = {"learning_rate": 0.1}
    message = _error(raw, tmp_path)
    assert "overrides.sst2" in message and "learning_rate" in message


def test_for_task_applies_overrides(raw: dict) -> None:
    raw["finetune"]["overrides"]["sst2"] = {"lr": 0.5, "epochs": 7}
    params = parse_params(raw)
    cfg = params.finetune.for_task("sst2")
    assert cfg.lr == 0.5 and cfg.epochs == 7
    shared = params.finetune.train
    assert cfg.model_dump() == {**shared.model_dump(), "lr": 0.5, "epochs": 7}
    assert shared.lr == raw["finetune"]["train"]["lr"]  # the shared knobs are untouched


def test_wrong_override_value_is_a_params_error(raw: dict, tmp_path: Path) -> None:
    """BUG (gpt1/config.py, FinetuneParams._overrides_cover_tasks): override values are never
    type-checked at load time. `overrides: {sst2: {lr: fast}}` loads fine, and only
    `for_task("sst2")` fails later, with a raw pydantic ValidationError that names neither the
    file nor `finetune.overrides.sst2.lr`."""
    bad = copy.deepcopy(raw)
    bad["finetune"]["overrides"]["sst2"] = {"lr": "fast"}
    path = tmp_path / "my-params.yaml"
    path.write_text(yaml.safe_dump(bad))
    try:
        params = load_params(path)
    except ParamsError as err:
        assert "finetune.overrides.sst2.lr" in str(err) and str(path) in str(err)
        return
    try:
        params.finetune.for_task("sst2")
    except Exception as err:
        raised = f"{type(err).__name__}: {err}"
    else:
        raised = "nothing"
    raise AssertionError(
        f"{path} with finetune.overrides.sst2.lr = 'fast' loaded without a ParamsError; "
        f"for_task('sst2') then raised {raised}")


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ParamsError, match=r"bad\.yaml: not valid YAML"):
        load_params(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ParamsError, match=r"empty\.yaml"):
        load_params(empty)


def test_params_error_is_a_value_error() -> None:
    assert issubclass(ParamsError, ValueError)
