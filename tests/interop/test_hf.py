"""gpt1.interop.hf and `gpt1 export-hf` / `import-hf`: logits match transformers' openai-gpt both
ways.

Run with `pytest -s` to see the max absolute differences.

`gpt1 export-hf` of a fine-tuned model folder: a classification or entailment model loads as
transformers' `OpenAIGPTForSequenceClassification` and a multiple-choice model as
`OpenAIGPTDoubleHeadsModel`, and each gives our logits; `pipeline("text-classification")` on
cleaned text gives our label and probability; a head whose bias does not fold into the bias-free
`score`, and the similarity family, are refused in one line; the exported tokenizer loads with
`AutoTokenizer` and gives our ids.

Run with `pytest -s` to see the max absolute differences.

A folder our own `gpt1 export-hf` wrote is a `pretrain.source: hf` the pipeline accepts: its
tokenizer.json lists GPT-1's special tokens after the BPE's, and its model has their rows, which
the import keeps (a released openai-gpt directory has neither: rows are drawn for them). Through
`gpt1 set` and the pretrain stage, the pretrained model is the exported one, weight for weight."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import (
    AutoTokenizer,
    OpenAIGPTConfig,
    OpenAIGPTDoubleHeadsModel,
    OpenAIGPTForSequenceClassification,
    OpenAIGPTLMHeadModel,
    OpenAIGPTModel,
    pipeline,
)
from transformers.models.openai.modeling_openai import ACT_FNS
from transformers.utils import logging as hf_logging
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import Family, ModelParams, TaskParams, load_params
from gpt1.corpus.tokenizer import SPECIAL_TOKENS, GPT1Tokenizer, train_bpe
from gpt1.downstream.families import FAMILIES, family_of
from gpt1.downstream.standalone import save_finetuned, task_card
from gpt1.interop.hf import HF_AFN, export_hf
from gpt1.interop.openai import gpt1_bpe
from gpt1.interop.source import import_hf, import_pretrained
from gpt1.model.heads import TaskModel
from gpt1.model.registry import load_config, load_model, save_model
from gpt1.model.transformer import GPT1, GPT1Config
from tests.conftest import REPO, run

pytestmark = pytest.mark.usefixtures("one_torch_thread")
hf_logging.disable_progress_bar()  # keep `pytest -s` output to the printed differences

TOL = 1e-5
# (vocab_size, n_ctx, n_embd, n_layer, n_head)
SHAPES = [(60, 16, 32, 2, 4), (101, 9, 24, 3, 3), (37, 32, 48, 1, 6), (250, 5, 16, 2, 1)]


def perturb_(model: torch.nn.Module, seed: int) -> None:
    """Non-trivial LayerNorm gains and biases, weights scaled so activations are of order 1."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.mul_(10.0)


def ours_model(shape: tuple[int, ...], seed: int) -> GPT1:
    vocab, ctx, embd, layers, heads = shape
    torch.manual_seed(seed)
    model = GPT1(GPT1Config(vocab_size=vocab, n_ctx=ctx, n_embd=embd, n_layer=layers,
                            n_head=heads, embd_pdrop=0.1, attn_pdrop=0.2, resid_pdrop=0.3))
    perturb_(model, seed)
    return model.eval()


def saved(model: GPT1, out: Path) -> Path:
    out.mkdir()
    save_model(model, out)
    return out


def words(n_tokens: int) -> dict[str, int]:
    """A BPE encoder of `n_tokens` tokens: `<unk>`, then made-up words."""
    return {"<unk>": 0, **{f"w{i}</w>": i for i in range(1, n_tokens)}}


def with_tokenizer(folder: Path, n_rows: int) -> Path:
    """`folder` (ours) given a tokenizer.json of one token per row of its `n_rows`: a BPE of
    made-up words, GPT-1's special tokens after it."""
    gpt1_bpe(words(n_rows - len(SPECIAL_TOKENS)), []).save(str(folder / "tokenizer.json"))
    return folder


def with_hf_vocabulary(hf_dir: Path, n_tokens: int) -> None:
    """An HF openai-gpt directory's tokenizer as the hub's has it: vocab.json and merges.txt
    (here of made-up words, no merges), no special tokens."""
    (hf_dir / "vocab.json").write_text(json.dumps(words(n_tokens)))
    (hf_dir / "merges.txt").write_text("#version: 0.2\n")


def hf_config(shape: tuple[int, ...]) -> OpenAIGPTConfig:
    vocab, ctx, embd, layers, heads = shape
    return OpenAIGPTConfig(vocab_size=vocab, n_positions=ctx, n_embd=embd, n_layer=layers,
                           n_head=heads, afn=HF_AFN)


def token_ids(shape: tuple[int, ...], *lead: int) -> torch.Tensor:
    vocab, ctx = shape[:2]
    return torch.randint(0, vocab, (*lead, ctx), generator=torch.Generator().manual_seed(1))


def max_diff(mine: torch.Tensor, theirs: torch.Tensor, label: str) -> float:
    assert mine.shape == theirs.shape
    assert theirs.abs().max() > 0.5  # not trivially equal
    diff = (mine - theirs).abs().max().item()
    print(f"\n{label}: max |diff| = {diff:.2e} (max |value| {theirs.abs().max():.2f})")
    return diff


def test_hf_gelu_is_our_tanh_gelu() -> None:
    x = torch.linspace(-8, 8, 10_001, dtype=torch.float64)
    ours = F.gelu(x, approximate="tanh")
    assert (ACT_FNS[HF_AFN](x) - ours).abs().max() < 1e-12
    assert (F.gelu(x) - ours).abs().max() > 1e-4  # the exact erf GELU is another function


@pytest.mark.parametrize("shape", SHAPES)
def test_export_matches_openai_gpt_lm_head_model(tmp_path: Path, shape: tuple[int, ...]) -> None:
    ours = ours_model(shape, seed=sum(shape))
    export_hf(saved(ours, tmp_path / "ours"), tmp_path / "hf")

    hf, info = OpenAIGPTLMHeadModel.from_pretrained(tmp_path / "hf", output_loading_info=True)
    hf.eval()
    assert not any(info.values()), info  # no missing, unexpected or mismatched weights
    assert hf.lm_head.weight.data_ptr() == hf.transformer.tokens_embed.weight.data_ptr()
    cfg = ours.config
    assert (hf.config.embd_pdrop, hf.config.attn_pdrop, hf.config.resid_pdrop) == (
        cfg.embd_pdrop, cfg.attn_pdrop, cfg.resid_pdrop)

    x = token_ids(shape, 3)
    with torch.no_grad():
        mine, theirs = ours.lm_logits(ours(x)), hf(input_ids=x).logits
    assert max_diff(mine, theirs, f"export ours->HF {shape}") <= TOL


def save_hf(model: torch.nn.Module, out: Path, fmt: str) -> None:
    model.save_pretrained(out)
    if fmt == "bin":  # an older checkpoint: the whole state dict, tied head included
        (out / "model.safetensors").unlink()
        torch.save(model.state_dict(), out / "pytorch_model.bin")


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("shape", SHAPES)
def test_import_matches_openai_gpt_lm_head_model(tmp_path: Path, shape: tuple[int, ...],
                                                 fmt: str) -> None:
    torch.manual_seed(sum(shape))
    hf = OpenAIGPTLMHeadModel(hf_config(shape))
    perturb_(hf, sum(shape))
    save_hf(hf.eval(), tmp_path / "hf", fmt)
    with_hf_vocabulary(tmp_path / "hf", shape[0])
    assert import_hf(tmp_path / "hf", tmp_path / "ours") == []
    ours = load_model(tmp_path / "ours").eval()
    # GPT-1's special tokens follow the BPE's, with a new token row each
    assert GPT1Tokenizer.load(tmp_path / "ours" / "tokenizer.json").vocab_size == shape[0] + 4
    assert ours.config.vocab_size == shape[0] + 4

    x = token_ids(shape, 3)
    with torch.no_grad():
        mine, theirs = ours.lm_logits(ours(x))[..., :shape[0]], hf(input_ids=x).logits
    assert max_diff(mine, theirs, f"import HF->ours {shape} {fmt}") <= TOL


def test_import_bare_openai_gpt_model(tmp_path: Path) -> None:
    shape = SHAPES[0]
    torch.manual_seed(0)
    hf = OpenAIGPTModel(hf_config(shape))
    perturb_(hf, 0)
    hf.eval().save_pretrained(tmp_path / "hf")
    with_hf_vocabulary(tmp_path / "hf", shape[0])
    assert not any(k.startswith("transformer.") for k in load_file(tmp_path / "hf" /
                                                                    "model.safetensors"))
    import_hf(tmp_path / "hf", tmp_path / "ours")
    ours = load_model(tmp_path / "ours").eval()

    x = token_ids(shape, 3)
    with torch.no_grad():
        mine, theirs = ours(x), hf(input_ids=x).last_hidden_state
    assert max_diff(mine, theirs, f"import bare OpenAIGPTModel {shape} (hidden)") <= TOL


def test_import_double_heads_model(tmp_path: Path) -> None:
    """LM logits match; mc_logits are our multiple-choice TaskModel with the summary layer as its
    head."""
    shape, choices = SHAPES[1], 2
    torch.manual_seed(5)
    hf = OpenAIGPTDoubleHeadsModel(hf_config(shape))
    perturb_(hf, 5)
    hf.eval().save_pretrained(tmp_path / "hf")
    with_hf_vocabulary(tmp_path / "hf", shape[0])
    ignored = import_hf(tmp_path / "hf", tmp_path / "ours")
    assert ignored == ["multiple_choice_head.summary.bias", "multiple_choice_head.summary.weight"]
    ours = load_model(tmp_path / "ours").eval()

    x = token_ids(shape, 3, choices)
    mc_token_ids = torch.randint(0, shape[1], (3, choices),
                                 generator=torch.Generator().manual_seed(2))
    clf = TaskModel(ours, FAMILIES["multiple_choice"], n_outputs=1, dropout=0.0, seed=0).eval()
    clf.head.load_state_dict(hf.multiple_choice_head.summary.state_dict())
    with torch.no_grad():
        out = hf(input_ids=x, mc_token_ids=mc_token_ids)
        mc_logits, hidden = clf(x.flatten(0, 1), mc_token_ids.flatten() + 1, choices)
        lm_logits = ours.lm_logits(hidden)[..., :shape[0]]
    assert max_diff(lm_logits, out.logits.flatten(0, 1), f"double heads LM {shape}") <= TOL
    assert max_diff(mc_logits, out.mc_logits, f"double heads mc {shape}") <= TOL


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_cli_round_trip_is_bit_identical(tmp_path: Path) -> None:
    ours = ours_model(SHAPES[0], seed=3)
    with_tokenizer(saved(ours, tmp_path / "ours"), SHAPES[0][0])
    tokenizer = (tmp_path / "ours" / "tokenizer.json").read_text()
    code, output = invoke("export-hf", "--model", tmp_path / "ours", "--out", tmp_path / "hf")
    assert code == 0, output
    assert (tmp_path / "hf" / "tokenizer.json").read_text() == tokenizer
    code, output = invoke("import-hf", "--hf", tmp_path / "hf", "--out", tmp_path / "back")
    assert code == 0, output
    code, output = invoke("generate", "--model", tmp_path / "back", "--prompt", "w1")
    assert code == 0, output  # a folder the commands load: its tokenizer came along

    before, after = ours.state_dict(), load_model(tmp_path / "back").state_dict()
    assert set(before) == set(after)
    for key, tensor in before.items():
        assert torch.equal(tensor, after[key]), key
    assert load_config(tmp_path / "back" / "config.json") == ours.config


@pytest.fixture()
def hf_dir(tmp_path: Path) -> Path:
    ours = with_tokenizer(saved(ours_model(SHAPES[3], seed=4), tmp_path / "ours"), SHAPES[3][0])
    return export_hf(ours, tmp_path / "hf")


def edit_config(hf_dir: Path, **changes: object) -> None:
    path = hf_dir / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def edit_weights(hf_dir: Path, key: str, tensor: torch.Tensor | None) -> None:
    path = hf_dir / "model.safetensors"
    sd = load_file(path)
    if tensor is None:
        del sd[key]
    else:
        sd[key] = tensor
    save_file(sd, path)


def drop_config_key(hf_dir: Path, key: str) -> None:
    path = hf_dir / "config.json"
    config = json.loads(path.read_text())
    del config[key]
    path.write_text(json.dumps(config))


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def as_bin(hf_dir: Path, content: object) -> Path:
    """Replace the checkpoint's safetensors by a `pytorch_model.bin` holding `content`."""
    (hf_dir / "model.safetensors").unlink()
    torch.save(content, hf_dir / "pytorch_model.bin")
    return hf_dir / "pytorch_model.bin"


BAD_CHECKPOINTS = {
    "wrong model_type": (lambda d: edit_config(d, model_type="gpt2"),
                         ["config.json", "model_type", "'gpt2'"]),
    "missing key": (lambda d: drop_config_key(d, "n_layer"), ["config.json", "'n_layer'"]),
    "other afn": (lambda d: edit_config(d, afn="relu"), ["config.json", "afn='relu'"]),
    "n_ctx": (lambda d: edit_config(d, n_ctx=7), ["config.json", "n_ctx=7"]),
    "n_special": (lambda d: edit_config(d, n_special=3), ["config.json", "n_special=3"]),
    "untied": (lambda d: edit_config(d, tie_word_embeddings=False),
               ["config.json", "tie_word_embeddings"]),
    # what an import writes, every command loads: our own config.json's checks, at import
    "a dropout of 1.5": (lambda d: edit_config(d, attn_pdrop=1.5),
                         ["config.json: attn_pdrop=1.5, expected a probability below 1"]),
    "a width as text": (lambda d: edit_config(d, n_embd="16"),
                        ["config.json: n_embd='16', expected an integer >= 1"]),
    "no layers": (lambda d: edit_config(d, n_layer=0),
                  ["config.json: n_layer=0, expected an integer >= 1"]),
    "heads not dividing": (lambda d: edit_config(d, n_head=3),
                           ["config.json: n_head=3 does not divide n_embd=16"]),
    "a negative init": (lambda d: edit_config(d, initializer_range=-1.0),
                        ["config.json: initializer_range=-1.0, expected a number >= 0"]),
    "no tokenizer": (lambda d: (d / "tokenizer.json").unlink(),
                     ["no tokenizer: expected vocab.json and merges.txt, or tokenizer.json"]),
    "a tokenizer of another model": (lambda d: with_tokenizer(d, 200),
                                     ["tokenizer.json: 196 tokens, but config.json (vocab_size) "
                                      "has 250 token rows"]),
    "missing weight": (lambda d: edit_weights(d, "transformer.h.1.mlp.c_fc.bias", None),
                       ["model.safetensors", "missing weight 'h.1.mlp.c_fc.bias'"]),
    "mis-shaped": (lambda d: edit_weights(d, "transformer.h.0.attn.c_proj.weight",
                                          torch.zeros(16, 17)),
                   ["model.safetensors", "h.0.attn.c_proj.weight has shape (16, 17)",
                    "expected (16, 16)"]),
    "unexpected": (lambda d: edit_weights(d, "transformer.ln_f.weight", torch.ones(16)),
                   ["model.safetensors", "ln_f.weight"]),
    "untied head": (lambda d: edit_weights(d, "lm_head.weight", torch.zeros(250, 16)),
                    ["model.safetensors", "lm_head.weight differs"]),
    "no weights": (lambda d: (d / "model.safetensors").unlink(),
                   ["model.safetensors: not found", "pytorch_model.bin"]),
    "cut short": (lambda d: cut_short(d / "model.safetensors"),
                  ["model.safetensors: not a readable safetensors file ("]),
    "pickled model": (lambda d: as_bin(d, ours_model(SHAPES[3], seed=4)),
                      ["pytorch_model.bin: torch.load(weights_only=True) refuses it (",
                       "); convert it to model.safetensors"]),
    "bin cut short": (lambda d: cut_short(as_bin(d, load_file(d / "model.safetensors"))),
                      ["pytorch_model.bin: not a readable PyTorch file (RuntimeError: "]),
    "a NaN": (lambda d: edit_weights(d, "transformer.h.0.mlp.c_fc.weight",
                                     torch.full((16, 64), float("nan"))),
              ["model.safetensors: transformer.h.0.mlp.c_fc.weight holds 1,024 numbers that "
               "are not finite (NaN or infinity): the checkpoint is damaged"]),
}


@pytest.mark.parametrize("case", BAD_CHECKPOINTS)
def test_cli_import_rejects_bad_checkpoints(hf_dir: Path, tmp_path: Path, case: str) -> None:
    corrupt, expected = BAD_CHECKPOINTS[case]
    corrupt(hf_dir)
    code, output = invoke("import-hf", "--hf", hf_dir, "--out", tmp_path / "out")
    assert code == 2 and output.startswith("error: "), output
    for fragment in expected:
        assert fragment in output, (fragment, output)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no temporaries


def test_cli_missing_directories(tmp_path: Path) -> None:
    code, output = invoke("export-hf", "--model", tmp_path / "nope", "--out", tmp_path / "hf")
    assert code == 2 and "nope/config.json: not found" in output, output
    code, output = invoke("import-hf", "--hf", tmp_path / "nope", "--out", tmp_path / "ours")
    assert code == 2 and "nope/config.json: not found" in output, output
    assert not (tmp_path / "hf").exists() and not (tmp_path / "ours").exists()


def test_import_leaves_out_classifier_heads_and_causal_masks(hf_dir: Path,
                                                             tmp_path: Path) -> None:
    edit_weights(hf_dir, "score.weight", torch.ones(2, 16))  # OpenAIGPTForSequenceClassification
    edit_weights(hf_dir, "transformer.h.0.attn.bias", torch.ones(5, 5).tril().view(1, 1, 5, 5))
    assert import_hf(hf_dir, tmp_path / "ok") == ["h.0.attn.bias", "score.weight"]
    edit_weights(hf_dir, "transformer.h.0.attn.bias", torch.ones(1, 1, 5, 5))
    with pytest.raises(ValueError, match=r"h\.0\.attn\.bias is not the causal mask"):
        import_hf(hf_dir, tmp_path / "bad")


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in folder.rglob("*")}


@pytest.mark.parametrize("case", ["cut short", "pickled model"])
def test_cli_unreadable_weights_are_one_line_and_keep_the_old_out(hf_dir: Path, tmp_path: Path,
                                                                  case: str) -> None:
    corrupt, expected = BAD_CHECKPOINTS[case]
    corrupt(hf_dir)
    out = saved(ours_model(SHAPES[0], seed=5), tmp_path / "out")  # an earlier import's output
    before = snapshot(tmp_path)
    proc = run([sys.executable, "-m", "gpt1.cli", "import-hf", "--hf", str(hf_dir),
                "--out", str(out)], tmp_path, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: {hf_dir}/"), proc.stderr
    for fragment in expected:
        assert fragment in proc.stderr, (fragment, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "weights_only=False" not in proc.stderr  # never advise running a checkpoint's code
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["export-hf", "import-hf"])
def test_cli_replaces_only_what_it_writes(hf_dir: Path, tmp_path: Path, command: str) -> None:
    source = ("--model", tmp_path / "ours") if command == "export-hf" else ("--hf", hf_dir)
    out = tmp_path / "artifacts"
    (out / "pretrain").mkdir(parents=True)
    (out / "pretrain" / "model.safetensors").write_text("weights")
    (out / "notes.txt").write_text("mine")
    (out / "config.json").write_text("{}")  # a name it writes: not enough to make `out` its own
    (tmp_path / "file").write_text("mine")
    before = snapshot(tmp_path)
    code, output = invoke(command, *source, "--out", out)
    assert (code, output) == (2, f"error: {out}: holds notes.txt, pretrain, which this command "
                                 "does not write; refusing to replace it (--force replaces it)\n")
    for force in ((), ("--force",)):
        code, output = invoke(command, *source, "--out", tmp_path / "file", *force)
        assert (code, output) == (2, f"error: {tmp_path / 'file'}: exists and is not a "
                                     "directory\n")
    assert snapshot(tmp_path) == before

    code, output = invoke(command, *source, "--out", out, "--force")
    assert code == 0, output
    written = sorted(p.name for p in out.iterdir())
    assert "notes.txt" not in written
    code, output = invoke(command, *source, "--out", out)  # its own output: replaced as asked
    assert code == 0, output
    assert sorted(p.name for p in out.iterdir()) == written


def test_cli_never_writes_inside_a_pipeline_output(hf_dir: Path, tmp_path: Path) -> None:
    """An --out within a folder dvc.yaml declares as a stage's output (a foreach stage's
    included) is refused, naming the stage: DVC would find that stage modified."""
    project = tmp_path / "repo"
    project.mkdir()
    shutil.copy(REPO / "dvc.yaml", project / "dvc.yaml")
    model = saved(ours_model(SHAPES[0], seed=5), tmp_path / "to_export")
    before = snapshot(project)
    for inside, stage in (("artifacts/pretrain/hf", "pretrain"), ("artifacts/pretrain", "pretrain"),
                          ("artifacts/finetune/sst2/hf", "finetune")):
        for command, source in (("export-hf", ("--model", model)),
                                ("import-hf", ("--hf", hf_dir))):
            code, output = invoke(command, *source, "--out", project / inside)
            assert code == 2, output
            assert output.startswith(f"error: --out {project / inside}: inside artifacts/"), output
            assert f", an output of stage {stage} in {project / 'dvc.yaml'}" in output, output
    assert snapshot(project) == before
    code, output = invoke("export-hf", "--model", model, "--out", project / "exports" / "hf")
    assert code == 0, output  # elsewhere in the project is fine


hf_logging.disable_progress_bar()

EXPORT_TOL = 1e-4
N_CTX = 40
# texts as `TextCleaner` leaves them (spaCy's tokens joined by spaces), accents kept: the BERT
# normaliser of transformers' own OpenAIGPTTokenizer would strip them
CLEANED = ["The café 's film - was n't it GOOD ? Naïve , \" quoted \" .",
           "a good film , a bad plot .", "the story ends well ; i liked it !"]
SHORT = ["a bad plot .", "i liked it !", "the film was good", "it ends ; a bad story"]


def spec(family: Family) -> TaskParams:
    labels = {"classification": ["neg", "mixed", "pos"], "entailment": ["yes", "no"]}
    return TaskParams(title="T", family=family, reader="any", files={"train": "a", "dev": "b"},
                      labels=labels.get(family), metrics=["accuracy" if family != "similarity"
                                                          else "pearson"])


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    train_bpe(CLEANED * 3, vocab_size=60, min_frequency=2).save(str(path))
    return path


def finetuned(folder: Path, tokenizer: Path, family: Family,
              edit: Callable[[TaskModel], None] | None = None) -> TaskModel:
    """A fine-tuned model folder of `family` in `folder`: a tiny trunk, a head whose bias
    matters, then `edit`; returns the model, in eval mode."""
    task = spec(family)
    torch.manual_seed(0)
    trunk = GPT1(GPT1Config(vocab_size=GPT1Tokenizer.load(tokenizer).vocab_size, n_ctx=N_CTX,
                            n_embd=32, n_layer=2, n_head=4))
    model = TaskModel(trunk, family_of(task), family_of(task).n_outputs(task), dropout=0.1, seed=1)
    perturb_(model, seed=2)
    with torch.no_grad():
        model.head.bias.add_(1.0 + torch.linspace(-0.3, 0.3, model.head.out_features))
        if edit is not None:
            edit(model)
    folder.mkdir()
    save_finetuned(folder, model, task_card("tiny_" + family, task, N_CTX, seed=1), tokenizer)
    return model.eval()


def choice_batch(tok: GPT1Tokenizer, examples: int,
                 choices: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random examples in the multiple-choice layout, `<start> context <delim> choice
    <classify>`, of different lengths, right-padded: ids (B, m, T) and lengths (B, m)."""
    gen = torch.Generator().manual_seed(3)
    words = tok.vocab_size - len(SPECIAL_TOKENS)  # they come last
    context = [torch.randint(1, words, (int(n),), generator=gen).tolist()
               for n in torch.randint(1, 6, (examples,), generator=gen)]
    rows = [[tok.start_id, *context[i // choices], tok.delim_id,
             *torch.randint(1, words, (int(n),), generator=gen).tolist(), tok.classify_id]
            for i, n in enumerate(torch.randint(1, 8, (examples * choices,), generator=gen))]
    lengths = torch.tensor([len(row) for row in rows])
    ids = torch.full((len(rows), int(lengths.max())), tok.pad_id)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
    assert ids.shape[1] <= N_CTX and len(set(lengths.tolist())) > 1
    return ids.view(examples, choices, -1), lengths.view(examples, choices)


def padded(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows` right-padded with `pad_id`: ids (B, T) and lengths (B,)."""
    lengths = torch.tensor([len(row) for row in rows])
    ids = torch.full((len(rows), int(lengths.max())), pad_id)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
    return ids, lengths


def labels_batch(tok: GPT1Tokenizer, family: Family) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences in `family`'s layout, `<start> text <classify>` or `<start> premise <delim>
    hypothesis <classify>`, of our cleaned texts and of random words, of different lengths,
    right-padded: ids (B, T) and lengths (B,)."""
    gen = torch.Generator().manual_seed(4)
    words = tok.vocab_size - len(SPECIAL_TOKENS)  # they come last

    def text() -> list[int]:
        return torch.randint(0, words, (int(torch.randint(1, 12, (1,), generator=gen)),),
                             generator=gen).tolist()

    texts = [tok.encode(t) for t in CLEANED[1:]] + [text() for _ in range(10)]
    if family == "classification":
        rows = [[tok.start_id, *t, tok.classify_id] for t in texts]
    else:
        rows = [[tok.start_id, *a, tok.delim_id, *b, tok.classify_id]
                for a, b in zip(texts, texts[1:] + texts[:1], strict=True)]
    ids, lengths = padded(rows, tok.pad_id)
    assert ids.shape[1] <= N_CTX and len(set(lengths.tolist())) > 1
    return ids, lengths


@pytest.mark.parametrize("family", ["classification", "entailment"])
def test_labels_families_export_as_sequence_classification(tmp_path: Path, tokenizer: Path,
                                                           family: Family) -> None:
    ours = finetuned(tmp_path / "ft", tokenizer, family)
    export_hf(tmp_path / "ft", tmp_path / "hf")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json", "model.safetensors", "task.json", "tokenizer.json", "tokenizer_config.json"]

    hf, info = OpenAIGPTForSequenceClassification.from_pretrained(tmp_path / "hf",
                                                                  output_loading_info=True)
    hf.eval()
    assert not any(info.values()), info  # no missing, unexpected or mismatched weights
    labels = spec(family).labels
    assert hf.config.architectures == ["OpenAIGPTForSequenceClassification"]
    assert hf.config.id2label == dict(enumerate(labels))
    assert hf.config.label2id == {label: i for i, label in enumerate(labels)}
    assert hf.score.bias is None and hf.score.out_features == len(labels)
    tok = GPT1Tokenizer.load(tokenizer)
    assert hf.config.pad_token_id == tok.pad_id

    ids, lengths = labels_batch(tok, family)
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=(ids != tok.pad_id).long()).logits
        mine, _ = ours(ids, lengths, 1)
    assert theirs.shape == (len(ids), len(labels))
    # our head's bias moves the logits: a bias-free head on the same states would not match
    assert (ours.head.bias.abs().max() > 1.0).item()
    assert max_diff(mine, theirs, f"{family} ours->HF score") <= EXPORT_TOL
    with torch.no_grad():  # and without a mask: the causal mask hides the padding
        unmasked = hf(input_ids=ids).logits
    assert max_diff(mine, unmasked, f"{family} ours->HF score, no mask") <= EXPORT_TOL


def our_probabilities(model: TaskModel, rows: list[list[int]], pad_id: int) -> torch.Tensor:
    ids, lengths = padded(rows, pad_id)
    with torch.no_grad():
        return model(ids, lengths, 1)[0].softmax(-1)


def exported_pipeline(tmp_path: Path, tokenizer: Path, family: Family
                      ) -> tuple[TaskModel, GPT1Tokenizer, list[str], Any]:
    """Our fine-tuned model of `family`, its tokenizer and labels, and transformers'
    text-classification pipeline over its export."""
    ours = finetuned(tmp_path / "ft", tokenizer, family)
    export_hf(tmp_path / "ft", tmp_path / "hf")
    labels = spec(family).labels
    assert labels is not None
    classify = pipeline("text-classification", model=str(tmp_path / "hf"),
                        tokenizer=str(tmp_path / "hf"))
    return ours, GPT1Tokenizer.load(tokenizer), labels, classify


def test_pipeline_gives_our_label_and_probability(tmp_path: Path, tokenizer: Path) -> None:
    ours, tok, labels, classify = exported_pipeline(tmp_path, tokenizer, "classification")
    texts = CLEANED + SHORT
    probs = our_probabilities(ours, [[tok.start_id, *tok.encode(t), tok.classify_id]
                                     for t in texts], tok.pad_id)
    for text, p in zip(texts, probs, strict=True):
        [best] = classify(text)
        assert best["label"] == labels[int(p.argmax())], text
        assert abs(best["score"] - float(p.max())) <= EXPORT_TOL, (best, p)
    # every label's probability, texts batched (padded on the right)
    for text, p, got in zip(texts, probs, classify(texts, top_k=None, batch_size=len(texts)),
                            strict=True):
        scores = {d["label"]: d["score"] for d in got}
        assert max(abs(scores[label] - float(q)) for label, q in zip(labels, p, strict=True)
                   ) <= EXPORT_TOL, text
    # a text longer than the context: cut as our fine-tuning cuts it, <classify> kept
    long = " ".join(CLEANED * 3)
    assert len(tok.encode(long)) > N_CTX
    [p] = our_probabilities(ours, [[tok.start_id, *tok.encode(long)[:N_CTX - 2],
                                    tok.classify_id]], tok.pad_id)
    [best] = classify(long, truncation=True)
    assert best["label"] == labels[int(p.argmax())]
    assert abs(best["score"] - float(p.max())) <= EXPORT_TOL


def test_pipeline_reads_an_entailment_pair(tmp_path: Path, tokenizer: Path) -> None:
    ours, tok, labels, classify = exported_pipeline(tmp_path, tokenizer, "entailment")
    pairs = [(CLEANED[1], CLEANED[2]), (CLEANED[2], CLEANED[1]), *pairwise(SHORT)]
    probs = our_probabilities(ours, [[tok.start_id, *tok.encode(a), tok.delim_id,
                                      *tok.encode(b), tok.classify_id] for a, b in pairs],
                              tok.pad_id)
    assert len(set(probs.argmax(-1).tolist())) > 1  # not one label for everything
    for (premise, hypothesis), p in zip(pairs, probs, strict=True):
        got = classify({"text": premise, "text_pair": hypothesis}, top_k=None)
        scores = {d["label"]: d["score"] for d in got}
        assert got[0]["label"] == labels[int(p.argmax())]
        assert max(abs(scores[label] - float(q)) for label, q in zip(labels, p, strict=True)
                   ) <= EXPORT_TOL, (premise, hypothesis)


def zero_beta(model: TaskModel) -> None:
    model.trunk.h[-1].ln_2.bias.zero_()


def near_zero_sum(model: TaskModel) -> None:
    """Shift the last LayerNorm's bias so that sum(beta/gamma) is 0 but for float32 rounding."""
    norm = model.trunk.h[-1].ln_2
    norm.bias.sub_(norm.weight * (norm.bias / norm.weight).sum() / norm.weight.numel())


@pytest.mark.parametrize(("edit", "expected"), [
    (zero_beta, "the last LayerNorm's sum(beta/gamma) is 0, which the fold divides by"),
    (near_zero_sum, "the folded head's logits differ from ours by up to "),
])
def test_cli_refuses_a_bias_that_does_not_fold(tmp_path: Path, tokenizer: Path,
                                               edit: Callable[[TaskModel], None],
                                               expected: str) -> None:
    finetuned(tmp_path / "ft", tokenizer, "classification", edit)
    before = snapshot(tmp_path)
    code, output = invoke("export-hf", "--model", tmp_path / "ft", "--out", tmp_path / "hf")
    assert code == 2 and output.startswith(
        f"error: {tmp_path / 'ft'}: task 'tiny_classification' is a classification model whose "
        "head's bias does not fold into OpenAIGPTForSequenceClassification's bias-free score: "
        + expected), output
    assert output.count("\n") == 1 and "sum(beta/gamma)" in output, output
    print(f"\n{edit.__name__}: {output.strip()}")
    assert snapshot(tmp_path) == before  # nothing written, no temporaries


def test_multiple_choice_exports_as_double_heads_model(tmp_path: Path, tokenizer: Path) -> None:
    ours = finetuned(tmp_path / "ft", tokenizer, "multiple_choice")
    export_hf(tmp_path / "ft", tmp_path / "hf")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json", "model.safetensors", "task.json", "tokenizer.json", "tokenizer_config.json"]
    assert (tmp_path / "hf" / "task.json").read_bytes() == (tmp_path / "ft" / "task.json"
                                                             ).read_bytes()

    hf, info = OpenAIGPTDoubleHeadsModel.from_pretrained(tmp_path / "hf",
                                                         output_loading_info=True)
    hf.eval()
    assert not any(info.values()), info  # no missing, unexpected or mismatched weights
    assert hf.lm_head.weight.data_ptr() == hf.transformer.tokens_embed.weight.data_ptr()
    summary = hf.multiple_choice_head
    assert (summary.summary_type, summary.summary.out_features) == ("cls_index", 1)
    assert summary.summary.bias is not None and isinstance(summary.activation, torch.nn.Identity)
    assert summary.first_dropout.p == 0.1
    assert hf.config.pad_token_id == GPT1Tokenizer.load(tokenizer).pad_id

    tok = GPT1Tokenizer.load(tokenizer)
    examples, choices = 3, 4
    ids, lengths = choice_batch(tok, examples, choices)
    with torch.no_grad():
        real = (ids != tok.pad_id).flatten(0, 1)
        # OpenAIGPTModel flattens (B, m, T) ids to rows, but not the attention mask
        out = hf(input_ids=ids, attention_mask=real.long(),
                 mc_token_ids=lengths - 1)  # the <classify> positions
        mine, hidden = ours(ids.flatten(0, 1), lengths.flatten(), choices)
        lm_logits = ours.trunk.lm_logits(hidden)
    assert out.mc_logits.shape == (examples, choices)
    assert max_diff(mine, out.mc_logits, "multiple choice ours->HF") <= EXPORT_TOL
    # at the real tokens: the mask makes padding attend differently
    assert max_diff(lm_logits[real], out.logits.flatten(0, 1)[real],
                    "double heads LM") <= EXPORT_TOL


@pytest.mark.parametrize("source", ["pretrained", "multiple_choice", "classification"])
def test_exported_tokenizer_gives_our_ids(tmp_path: Path, tokenizer: Path, source: str) -> None:
    before = tokenizer.read_bytes()
    if source == "pretrained":
        (tmp_path / "model").mkdir()
        save_model(GPT1(GPT1Config(vocab_size=64, n_ctx=N_CTX, n_embd=8, n_layer=1,
                                   n_head=1)), tmp_path / "model")
        (tmp_path / "model" / "tokenizer.json").write_bytes(before)
    else:
        finetuned(tmp_path / "model", tokenizer, source)
    export_hf(tmp_path / "model", tmp_path / "hf")
    assert tokenizer.read_bytes() == before

    ours, theirs = GPT1Tokenizer.load(tokenizer), AutoTokenizer.from_pretrained(tmp_path / "hf")
    # a classification export lays texts out as the family does where special tokens are added
    # (transformers' default); the others add none
    templated = source == "classification"
    for text in CLEANED:
        assert theirs(text, add_special_tokens=False)["input_ids"] == ours.encode(text), text
        assert theirs(text)["input_ids"] == ([ours.start_id, *ours.encode(text),
                                              ours.classify_id] if templated
                                             else ours.encode(text)), text
    assert (GPT1Tokenizer.load(tmp_path / "hf" / "tokenizer.json").encode(CLEANED[0])
            == ours.encode(CLEANED[0]))
    specials = (theirs.unk_token_id, theirs.bos_token_id, theirs.sep_token_id,
                theirs.cls_token_id, theirs.pad_token_id)
    assert specials == (ours.unk_id, ours.start_id, ours.delim_id, ours.classify_id, ours.pad_id)
    layout = [ours.start_id, *ours.encode("a good film"), ours.delim_id,
              *ours.encode("i liked it"), ours.classify_id]
    assert theirs("<start> a good film <delim> i liked it <classify>",
                  add_special_tokens=False)["input_ids"] == layout
    if templated:
        assert theirs("a good film", "i liked it")["input_ids"] == layout
    else:
        assert (json.loads((tmp_path / "hf" / "tokenizer.json").read_bytes())
                == json.loads(before))
    assert theirs.model_max_length == N_CTX


def test_cli_refuses_similarity(tmp_path: Path, tokenizer: Path) -> None:
    finetuned(tmp_path / "ft", tokenizer, "similarity")
    before = snapshot(tmp_path)
    code, output = invoke("export-hf", "--model", tmp_path / "ft", "--out", tmp_path / "hf")
    assert code == 2 and output.startswith(f"error: {tmp_path / 'ft'}: task 'tiny_similarity' "
                                           "is a similarity model, which no transformers class "
                                           "computes: its head adds the <classify> states of "
                                           "both orders"), output
    assert output.count("\n") == 1, output
    assert snapshot(tmp_path) == before  # nothing written, no temporaries



# the tiny preset's model section
TINY = ModelParams(n_ctx=32, n_embd=32, n_layer=2, n_head=2, dropout=0.1)
TEXTS = ["the lantern at greywater burned low , and the keeper climbed the stair .",
         "a quick brown fox jumps over the lazy dog near the water 's edge ."] * 8
TEXT = "the keeper saw the fox at the water ."


@pytest.fixture()
def ours(tmp_path: Path) -> Path:
    """A model pretrained here (the tiny preset's shape, weights far from a fresh init, special
    rows included) with its tokenizer."""
    tokenizer = train_bpe(TEXTS, 80, 1)
    torch.manual_seed(3)
    model = GPT1(GPT1Config(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
                            n_ctx=TINY.n_ctx, n_embd=TINY.n_embd, n_layer=TINY.n_layer,
                            n_head=TINY.n_head))
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param))
    folder = tmp_path / "ours"
    folder.mkdir()
    save_model(model, folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def _same_weights(a: GPT1, b: GPT1) -> None:
    before, after = a.state_dict(), b.state_dict()
    assert set(before) == set(after)
    for key, tensor in before.items():
        assert torch.equal(tensor, after[key]), key


def _logits(model: GPT1, ids: list[int]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        x = torch.tensor([ids])
        return model.lm_logits(model(x))


def test_our_export_imports_as_it_was(ours: Path, tmp_path: Path) -> None:
    original = load_model(ours)
    tokenizer = GPT1Tokenizer.load(ours / "tokenizer.json")
    hf = export_hf(ours, tmp_path / "hf")
    got = import_pretrained("hf", hf, TINY, seed=5)
    assert got.model.config.vocab_size == original.config.vocab_size  # no rows added
    _same_weights(original, got.model)
    imported = GPT1Tokenizer(got.tokenizer)
    assert imported.vocab_size == tokenizer.vocab_size
    assert [imported.start_id, imported.delim_id, imported.classify_id, imported.pad_id] == \
        [tokenizer.start_id, tokenizer.delim_id, tokenizer.classify_id, tokenizer.pad_id]
    ids = imported.encode(TEXT)
    assert ids == tokenizer.encode(TEXT) and tokenizer.unk_id not in ids
    ids = [tokenizer.start_id, *ids, tokenizer.classify_id]
    assert torch.equal(_logits(original, ids), _logits(got.model, ids))

    # fewer positions than it has: cut, the rest as it was
    short = import_pretrained("hf", hf, TINY.model_copy(update={"n_ctx": 16}), seed=5).model
    assert torch.equal(short.positions_embed.weight, original.positions_embed.weight[:16])
    assert torch.equal(short.tokens_embed.weight, original.tokens_embed.weight)


def test_special_tokens_elsewhere_are_not_taken_for_ours(ours: Path, tmp_path: Path) -> None:
    """Token rows for the special tokens are kept only where tokenizer.json puts them, in
    GPT-1's order, right after the BPE's tokens; otherwise the count is refused as before."""
    hf = export_hf(ours, tmp_path / "hf")
    path = hf / "tokenizer.json"
    spec = json.loads(path.read_text())
    added = [entry for entry in spec["added_tokens"] if entry["content"] in SPECIAL_TOKENS]
    added[0]["content"], added[1]["content"] = added[1]["content"], added[0]["content"]
    path.write_text(json.dumps(spec))
    n_tokens = added[0]["id"]
    with pytest.raises(ValueError, match=rf"{path}: {n_tokens} tokens, but config.json "
                                         rf"\(vocab_size\) has {n_tokens + 4} token rows"):
        import_pretrained("hf", hf, TINY, seed=5)


def test_the_pipeline_pretrains_nothing_and_takes_our_export(ours: Path, tmp_path: Path) -> None:
    """`gpt1 export-hf`, `gpt1 set pretrain.source=hf pretrain.source_dir=...` and the pretrain
    stage, as a user runs them: artifacts/pretrain is the exported model, weight for weight, its
    tokenizer giving the same ids."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copyfile(REPO / "params.yaml", checkout / "params.yaml")
    gpt1 = [sys.executable, "-m", "gpt1.cli"]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                      os.environ.get("PYTHONPATH")]))}
    run([*gpt1, "preset", "tiny"], checkout)
    run([*gpt1, "export-hf", "--model", str(ours), "--out", str(tmp_path / "hf")], checkout)
    run([*gpt1, "set", "pretrain.source=hf", f"pretrain.source_dir={tmp_path / 'hf'}"],
        checkout)
    assert load_params(checkout / "params.yaml").pretrain.source == "hf"
    run([sys.executable, "-m", "tasks.pretrain"], checkout, env=env)

    pretrained = checkout / "artifacts" / "pretrain"
    _same_weights(load_model(ours), load_model(pretrained))
    tokenizer = GPT1Tokenizer.load(pretrained / "tokenizer.json")
    assert tokenizer.encode(TEXT) == GPT1Tokenizer.load(ours / "tokenizer.json").encode(TEXT)
    metrics = json.loads((checkout / "metrics" / "pretrain.json").read_text())
    assert (metrics["source"], metrics["vocab_size"]) == ("hf", tokenizer.vocab_size)
