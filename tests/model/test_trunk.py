"""The trunk interface: a trunk that is not GPT-1, added with one module (here, this file) and one
registry line, goes through pretraining, saving and loading by `model_type`, fine-tuning with a
task head, and generation, with no change to any of them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from torch import nn

from gpt1.config import FinetuneTrainParams, PretrainParams
from gpt1.downstream.families import FAMILIES
from gpt1.model.generate import sample
from gpt1.model.heads import TaskModel
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.model.registry import TRUNKS, build_trunk, load_config, load_model, save_model
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.model.trunk import Trunk, TrunkConfig
from gpt1.training.finetune_loop import finetune, predict
from gpt1.training.pretrain_loop import pretrain

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V, CTX, START, CLASSIFY, PAD = 12, 16, 9, 10, 11


@dataclass(frozen=True)
class GRUConfig(TrunkConfig):
    """A one-layer recurrent LM with its own (untied) output matrix: like the paper's LSTM
    baseline (Table 5), nothing of the Transformer."""

    model_type: ClassVar[str] = "toy-gru"
    vocab_size: int
    n_ctx: int
    n_embd: int
    initializer_range: float = 0.02

    def parameter_count(self) -> int:
        d = self.n_embd
        return 2 * self.vocab_size * d + 3 * (2 * d * d + 2 * d)

    def training_flops_per_token(self) -> float:
        return 6.0 * (3 * 2 * self.n_embd**2 + self.vocab_size * self.n_embd)


class GRUTrunk(Trunk):
    config_class = GRUConfig

    def __init__(self, cfg: GRUConfig) -> None:
        super().__init__(cfg)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.rnn = nn.GRU(cfg.n_embd, cfg.n_embd, batch_first=True)
        self.out = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.rnn(self.embed(input_ids))[0]

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.out.weight


@pytest.fixture
def gru_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TRUNKS, GRUConfig.model_type, GRUTrunk)


def _gru() -> Trunk:
    torch.manual_seed(0)
    return build_trunk(GRUConfig(vocab_size=V, n_ctx=CTX, n_embd=24))


def test_the_toy_config_counts_its_parameters() -> None:
    cfg = GRUConfig(vocab_size=V, n_ctx=CTX, n_embd=24)
    assert cfg.parameter_count() == GRUTrunk(cfg).num_parameters()


# (trunk, its config, steps, lr): the LSTM's tied N(0, 0.02) table makes small logits, so it
# starts slower (40 steps at 1e-2 leave it at a loss of 2.0)
PRETRAINED = {
    "toy-gru": (GRUTrunk, GRUConfig(vocab_size=V, n_ctx=CTX, n_embd=24), 40, 1e-2),
    "lstm": (LSTM, LSTMConfig(vocab_size=V, n_ctx=CTX, n_embd=24, embd_pdrop=0.0,
                              resid_pdrop=0.0), 100, 3e-2),
}


@pytest.mark.usefixtures("gru_registered")
@pytest.mark.parametrize("name", PRETRAINED)
def test_a_trunk_pretrains_saves_loads_and_generates(tmp_path: Path, name: str) -> None:
    kind, config, steps, lr = PRETRAINED[name]
    torch.manual_seed(0)
    model = build_trunk(config)
    assert isinstance(model, kind)
    pattern = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], dtype=np.uint16)
    cfg = PretrainParams(seed=0, device="cpu", precision="fp32", batch_size=8, max_steps=steps,
                         lr=lr, warmup_steps=3, schedule="cosine", weight_decay=0.01,
                         grad_clip=1.0, eval_every=20, eval_batches=2, log_every=20,
                         checkpoint_every=20, keep_checkpoints=1, peak_tflops=1.0)
    result = pretrain(model, [np.tile(pattern, 40)], [np.tile(pattern, 5)], cfg)
    assert result.val_loss < 0.5 * math.log(V)  # from chance (2.48) to well below it

    save_model(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == name
    loaded = load_model(tmp_path)
    assert isinstance(loaded, kind) and loaded.config == model.config
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(),
                                                 model.state_dict().values(), strict=True))
    # the pattern learnt: 3 1 4 -> 1 5 9 ...
    assert sample(loaded, [3, 1, 4], max_new_tokens=3, temperature=0) == [1, 5, 9]


@pytest.mark.usefixtures("gru_registered")
def test_a_new_trunk_fine_tunes_with_a_task_head() -> None:
    """The label is whether the text's words are from {0, 1, 2} or {3, 4, 5}."""
    rng = np.random.default_rng(0)

    def examples(n: int) -> tuple[list[list[list[int]]], np.ndarray]:
        labels = rng.integers(0, 2, size=n)
        texts = [(rng.integers(0, 3, size=rng.integers(2, 8)) + 3 * y).tolist() for y in labels]
        return [[[START, *t, CLASSIFY]] for t in texts], labels

    train, train_labels = examples(192)
    dev, dev_labels = examples(100)
    model = TaskModel(_gru(), FAMILIES["classification"], 2, dropout=0.1, seed=0)
    cfg = FinetuneTrainParams(seed=0, device="cpu", precision="fp32", lr=1e-2, batch_size=16,
                              epochs=3, warmup_fraction=0.1, weight_decay=0.01, grad_clip=1.0,
                              lm_coef=0.5, clf_dropout=0.1)
    finetune(model, train, train_labels, PAD, cfg)
    accuracy = (predict(model, dev, PAD, batch_size=32).argmax(axis=1) == dev_labels).mean()
    assert accuracy > 0.9  # chance: about 0.5


def test_config_json_names_its_trunk_and_an_untyped_one_is_gpt1(tmp_path: Path) -> None:
    cfg = GPT1Config(vocab_size=V, n_ctx=CTX, n_embd=16, n_layer=1, n_head=2)
    save_model(GPT1(cfg), tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["model_type"] == "gpt1"
    assert load_config(tmp_path / "config.json") == cfg
    # config.json files written before trunks had a type are GPT-1's
    del written["model_type"]
    (tmp_path / "config.json").write_text(json.dumps(written))
    assert load_config(tmp_path / "config.json") == cfg


def test_an_unknown_model_type_names_the_file_and_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba", "vocab_size": V}))
    with pytest.raises(ValueError, match=r"config\.json: model_type 'mamba' is no trunk of ours "
                                         r"\(known: \['gpt1', 'lstm'\]\)"):
        load_config(path)


def test_a_dropout_of_one_or_more_is_refused_for_every_trunk(tmp_path: Path) -> None:
    """Dropout with p >= 1 zeroes every activation (or is no probability): a config.json saying
    so is no model any command can use."""
    for config in (GPT1Config(vocab_size=V, n_ctx=CTX, n_embd=16, n_layer=1, n_head=2,
                              resid_pdrop=1.0),
                   LSTMConfig(vocab_size=V, n_ctx=CTX, n_embd=16, embd_pdrop=1.5)):
        save_model(build_trunk(replace(config, resid_pdrop=0.1, embd_pdrop=0.1)), tmp_path)
        config.save(tmp_path / "config.json")
        key, value = ("resid_pdrop", 1.0) if isinstance(config, GPT1Config) else ("embd_pdrop",
                                                                                  1.5)
        with pytest.raises(ValueError, match=rf"config\.json: {key}={value}, expected a "
                                             "probability below 1"):
            load_config(tmp_path / "config.json")


def test_a_config_from_elsewhere_takes_the_defaults_of_what_it_leaves_out() -> None:
    """An HF or released config says less than ours: what it leaves out is the field's default,
    what it says goes through the same checks."""
    config = GPT1Config.from_json({"vocab_size": V, "n_ctx": CTX, "n_embd": 16, "n_layer": 1,
                                   "n_head": 2}, "theirs.json", defaults=True)
    assert config == GPT1Config(vocab_size=V, n_ctx=CTX, n_embd=16, n_layer=1, n_head=2)
    assert (config.embd_pdrop, config.layer_norm_epsilon) == (0.1, 1e-5)  # GPT-1's
    with pytest.raises(ValueError, match=r"theirs\.json: missing keys \['vocab_size'\]"):
        GPT1Config.from_json({"n_ctx": CTX}, "theirs.json", defaults=True)  # no default
    with pytest.raises(ValueError, match=r"mine\.json: missing keys"):
        GPT1Config.from_json({"vocab_size": V, "n_ctx": CTX, "n_embd": 16, "n_layer": 1,
                              "n_head": 2}, "mine.json")
