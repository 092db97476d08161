"""gpt1.interop.hf and `gpt1 export-hf` / `import-hf`: logits match transformers' openai-gpt both
ways.

Run with `pytest -s` to see the max absolute differences.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import (
    OpenAIGPTConfig,
    OpenAIGPTDoubleHeadsModel,
    OpenAIGPTLMHeadModel,
    OpenAIGPTModel,
)
from transformers.models.openai.modeling_openai import ACT_FNS
from transformers.utils import logging as hf_logging
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.interop.hf import HF_AFN, export_hf, import_hf
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
    assert import_hf(tmp_path / "hf", tmp_path / "ours") == []
    ours = load_model(tmp_path / "ours").eval()

    x = token_ids(shape, 3)
    with torch.no_grad():
        mine, theirs = ours.lm_logits(ours(x)), hf(input_ids=x).logits
    assert max_diff(mine, theirs, f"import HF->ours {shape} {fmt}") <= TOL


def test_import_bare_openai_gpt_model(tmp_path: Path) -> None:
    shape = SHAPES[0]
    torch.manual_seed(0)
    hf = OpenAIGPTModel(hf_config(shape))
    perturb_(hf, 0)
    hf.eval().save_pretrained(tmp_path / "hf")
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
    ignored = import_hf(tmp_path / "hf", tmp_path / "ours")
    assert ignored == ["multiple_choice_head.summary.bias", "multiple_choice_head.summary.weight"]
    ours = load_model(tmp_path / "ours").eval()

    x = token_ids(shape, 3, choices)
    mc_token_ids = torch.randint(0, shape[1], (3, choices),
                                 generator=torch.Generator().manual_seed(2))
    clf = TaskModel(ours, "multiple_choice", n_outputs=1, dropout=0.0, seed=0).eval()
    clf.head.load_state_dict(hf.multiple_choice_head.summary.state_dict())
    with torch.no_grad():
        out = hf(input_ids=x, mc_token_ids=mc_token_ids)
        mc_logits, hidden = clf(x.flatten(0, 1), mc_token_ids.flatten() + 1, choices)
        lm_logits = ours.lm_logits(hidden)
    assert max_diff(lm_logits, out.logits.flatten(0, 1), f"double heads LM {shape}") <= TOL
    assert max_diff(mc_logits, out.mc_logits, f"double heads mc {shape}") <= TOL


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_cli_round_trip_is_bit_identical(tmp_path: Path) -> None:
    ours = ours_model(SHAPES[0], seed=3)
    saved(ours, tmp_path / "ours")
    (tmp_path / "ours" / "tokenizer.json").write_text('{"model": "bpe"}')
    code, output = invoke("export-hf", "--model", tmp_path / "ours", "--out", tmp_path / "hf")
    assert code == 0, output
    assert (tmp_path / "hf" / "tokenizer.json").read_text() == '{"model": "bpe"}'
    code, output = invoke("import-hf", "--hf", tmp_path / "hf", "--out", tmp_path / "back")
    assert code == 0, output

    before, after = ours.state_dict(), load_model(tmp_path / "back").state_dict()
    assert set(before) == set(after)
    for key, tensor in before.items():
        assert torch.equal(tensor, after[key]), key
    assert load_config(tmp_path / "back" / "config.json") == ours.config


@pytest.fixture()
def hf_dir(tmp_path: Path) -> Path:
    return export_hf(saved(ours_model(SHAPES[3], seed=4), tmp_path / "ours"), tmp_path / "hf")


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
