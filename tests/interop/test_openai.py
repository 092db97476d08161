"""gpt1.interop.openai: OpenAI's released GPT-1 shards and BPE, imported as a model directory.

The weights (params_0.npy..params_9.npy) are not stored here, so the model tests write a small
synthetic release in exactly their layout; the tokenizer tests use the real released BPE.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
from transformers.activations import gelu_new
from transformers.models.openai.modeling_openai import ACT_FNS
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.corpus.text import TextCleaner
from gpt1.errors import InputError
from gpt1.interop.openai import (
    import_release,
    load_release_params,
    read_shapes,
    release_config,
    split_params,
)
from gpt1.interop.openai_text import OpenAITextEncoder, load_release_tokenizer
from gpt1.model.registry import load_config, load_model
from gpt1.model.transformer import GPT1, GPT1Config
from reference.original_gpt1 import TextEncoder as OriginalTextEncoder
from tests.releases import layout, write_release_weights

pytestmark = pytest.mark.usefixtures("one_torch_thread")

D, POSITIONS, LAYERS, HEADS, N_CTX = 32, 16, 2, 4, 12
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
MERGES = [("t", "h"), ("th", "e</w>"), ("a", "t</w>"), ("c", "at</w>"), ("s", "at</w>"),
          ("o", "n</w>")]
# The released encoder's order: <unk>, characters, characters + </w>, merges, then "\n</w>".
TOKENS = ["<unk>", *ALPHABET, *(c + "</w>" for c in ALPHABET), *(a + b for a, b in MERGES),
          "\n</w>"]
V = len(TOKENS)  # 60
# HF openai-gpt names of a layer's arrays, in the order of the release's params_shapes.json
HF_LAYER = ("attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
            "ln_1.weight", "ln_1.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
            "mlp.c_proj.weight", "mlp.c_proj.bias", "ln_2.weight", "ln_2.bias")


def write_release(folder: Path, seed: int = 0) -> list[np.ndarray]:
    """A small release in the original's files, over the toy vocabulary above."""
    arrays = write_release_weights(folder, layout(POSITIONS, V, D, LAYERS), seed)
    (folder / "encoder_bpe_40000.json").write_text(json.dumps({t: i for i, t in
                                                               enumerate(TOKENS)}))
    merges = "".join(f"{a} {b}\n" for a, b in MERGES)
    (folder / "vocab_40000.bpe").write_text(f"#version: 0.2\n{merges}", encoding="utf-8")
    return arrays


def original_init_params(release: Path, n_ctx: int) -> list[np.ndarray]:
    """openai/finetune-transformer-lm, train.py: the shards back into arrays."""
    shapes = json.loads((release / "params_shapes.json").read_text())
    offsets = np.cumsum([np.prod(shape) for shape in shapes])
    init_params = [np.load(release / f"params_{n}.npy") for n in range(10)]
    init_params = np.split(np.concatenate(init_params, 0), offsets)[:-1]
    init_params = [param.reshape(shape) for param, shape in zip(init_params, shapes, strict=True)]
    init_params[0] = init_params[0][:n_ctx]
    return init_params


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    folder = tmp_path_factory.mktemp("release") / "model"
    return folder, write_release(folder)


@pytest.fixture(scope="module")
def imported(release: tuple[Path, list[np.ndarray]],
             tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imported") / "gpt1"
    import_release(release[0], out, n_ctx=N_CTX, n_head=HEADS, seed=0)
    return out


def test_import_writes_a_model_directory(imported: Path) -> None:
    assert sorted(p.name for p in imported.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json"]
    assert load_config(imported / "config.json") == GPT1Config(
        vocab_size=V + 4, n_ctx=N_CTX, n_embd=D, n_layer=LAYERS, n_head=HEADS)


def test_rows_land_where_they_should(release: tuple[Path, list[np.ndarray]],
                                     imported: Path) -> None:
    arrays = release[1]
    state = load_model(imported).state_dict()
    assert torch.equal(state["positions_embed.weight"], torch.from_numpy(arrays[0][:N_CTX]))
    assert torch.equal(state["tokens_embed.weight"][:V], torch.from_numpy(arrays[1]))
    assert torch.equal(state["h.1.attn.c_attn.weight"], torch.from_numpy(arrays[14][0].T))
    assert torch.equal(state["h.1.ln_2.bias"], torch.from_numpy(arrays[25]))
    special = state["tokens_embed.weight"][V:]
    assert special.shape == (4, D)
    assert 0.01 < special.std().item() < 0.03 and abs(special.mean().item()) < 0.01


def test_special_rows_are_seeded(release: tuple[Path, list[np.ndarray]], imported: Path,
                                 tmp_path: Path) -> None:
    rows = load_model(imported).tokens_embed.weight[V:]
    import_release(release[0], tmp_path / "same", n_ctx=N_CTX, n_head=HEADS, seed=0)
    import_release(release[0], tmp_path / "other", n_ctx=N_CTX, n_head=HEADS, seed=1)
    assert torch.equal(load_model(tmp_path / "same").tokens_embed.weight[V:], rows)
    assert not torch.equal(load_model(tmp_path / "other").tokens_embed.weight[V:], rows)


def test_logits_match_huggingface_loaded_from_the_shards(
        release: tuple[Path, list[np.ndarray]], imported: Path) -> None:
    assert ACT_FNS["gelu"] is gelu_new
    params = original_init_params(release[0], N_CTX)
    hf = OpenAIGPTLMHeadModel(OpenAIGPTConfig(
        vocab_size=V, n_positions=N_CTX, n_embd=D, n_layer=LAYERS, n_head=HEADS,
        afn="gelu",  # openai-gpt's "gelu" is the tanh approximation, as the original's
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5)).eval()
    state = {"positions_embed.weight": params[0], "tokens_embed.weight": params[1]}
    for i, array in enumerate(params[2:]):
        layer, name = divmod(i, len(HF_LAYER))
        state[f"h.{layer}.{HF_LAYER[name]}"] = np.squeeze(array, 0) if array.ndim == 3 else array
    hf.transformer.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()},
                                   strict=True)
    assert torch.equal(hf.lm_head.weight, hf.transformer.tokens_embed.weight)  # tied

    ours = load_model(imported).eval()
    x = torch.randint(0, V, (3, N_CTX), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = hf(input_ids=x).logits
        mine = ours.lm_logits(ours(x))
    diff = (mine[..., :V] - theirs).abs().max().item()
    print(f"OpenAI release -> ours vs OpenAIGPTLMHeadModel: max |diff| = {diff:.2e}")
    assert diff <= 1e-5, f"max abs difference from OpenAIGPTLMHeadModel: {diff:.2e}"
    assert theirs.abs().max() > 1.0  # not trivially equal


def test_real_shapes_give_the_paper_model(shared_data: Path) -> None:
    shapes = read_shapes(shared_data / "openai-gpt1")
    assert shapes == [tuple(s) for s in layout(512, 40478, 768, 12)]
    cfg = release_config(shapes, n_ctx=512, n_head=12)
    assert cfg == GPT1Config(vocab_size=40478 + 4, n_ctx=512, n_embd=768, n_layer=12, n_head=12)
    with torch.device("meta"):
        n_ours = GPT1(cfg).num_parameters()
    total = sum(math.prod(s) for s in shapes)
    assert total == n_ours - 4 * 768 == 116_534_784

    flat = np.zeros(total, dtype=np.uint8)  # calloc'd: pages never touched, no real memory
    pieces = split_params(flat, shapes)
    starts = [p.ctypes.data - flat.ctypes.data for p in pieces]
    assert [p.shape for p in pieces] == shapes
    assert starts[:3] == [0, 512 * 768, (512 + 40478) * 768]
    assert starts[-1] + pieces[-1].size == total
    with pytest.raises(ValueError, match=r"116,534,783 numbers but params_shapes.json lists"):
        split_params(flat[1:], shapes)

    assert release_config(shapes, n_ctx=77).n_ctx == 77
    with pytest.raises(ValueError, match="n_ctx must be between 1 and the release's 512"):
        release_config(shapes, n_ctx=513)
    with pytest.raises(ValueError, match="n_head must divide the embedding width 768"):
        release_config(shapes, n_head=7)
    bad = [*shapes[:14], (1, 768, 2300), *shapes[15:]]
    with pytest.raises(ValueError, match=r"array 14 \(layer 1 attn.c_attn.weight\) has shape "
                                         r"\[1, 768, 2300\], expected \[1, 768, 2304\]"):
        release_config(bad)
    with pytest.raises(ValueError, match="12 arrays per layer, got 145"):
        release_config(shapes[:-1])


@pytest.fixture()
def release_copy(release: tuple[Path, list[np.ndarray]], tmp_path: Path) -> Path:
    return Path(shutil.copytree(release[0], tmp_path / "model"))


def test_loads_the_shards_as_train_py_does(release: tuple[Path, list[np.ndarray]]) -> None:
    loaded = load_release_params(release[0])
    assert len(loaded) == 2 + 12 * LAYERS
    for ours, written in zip(loaded, release[1], strict=True):
        assert ours.dtype == np.float32 and np.array_equal(ours, written)


def test_missing_shard_in_the_middle(release_copy: Path) -> None:
    (release_copy / "params_3.npy").unlink()
    with pytest.raises(ValueError, match=r"shards numbered 0..9 lack params_3.npy"):
        load_release_params(release_copy)


def test_missing_last_shard_is_a_size_mismatch(release_copy: Path) -> None:
    (release_copy / "params_9.npy").unlink()
    with pytest.raises(ValueError, match=r"params_8.npy [\d,]+\) but params_shapes.json lists"):
        load_release_params(release_copy)


def test_wrong_total_size(release_copy: Path) -> None:
    np.save(release_copy / "params_10.npy", np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError, match=r"params_10.npy 5\) but params_shapes.json lists"):
        load_release_params(release_copy)


def test_no_shards_or_shapes(release_copy: Path, tmp_path: Path) -> None:
    for shard in release_copy.glob("params_*.npy"):
        shard.unlink()
    with pytest.raises(FileNotFoundError, match="no params_"):
        load_release_params(release_copy)
    (release_copy / "params_shapes.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"params_shapes.json: not found"):
        load_release_params(release_copy)


def test_a_shard_that_is_not_1d(release_copy: Path) -> None:
    np.save(release_copy / "params_2.npy", np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match=r"params_2.npy: expected a 1-D float array"):
        load_release_params(release_copy)


def test_a_nan_in_the_weights_is_refused_naming_file_position_and_array(
        release_copy: Path) -> None:
    shard = np.load(release_copy / "params_4.npy")
    shard[7] = np.nan
    np.save(release_copy / "params_4.npy", shard)
    before = sum(np.load(release_copy / f"params_{n}.npy").size for n in range(4)) + 7
    shapes = json.loads((release_copy / "params_shapes.json").read_text())
    ends = np.cumsum([int(np.prod(s)) for s in shapes])
    array = int(np.searchsorted(ends, before, side="right"))  # the array position `before` is in
    with pytest.raises(InputError, match=rf"params_4.npy: holds nan at position 7 \(array "
                                         rf"{array} of params_shapes.json, shape "
                                         rf"{re.escape(str(shapes[array]))}\); 1 numbers of the "
                                         r"release are not finite: it is damaged"):
        load_release_params(release_copy)


def test_a_shard_that_is_not_a_npy_file(release_copy: Path) -> None:
    (release_copy / "params_0.npy").write_text("these are not weights\n")
    with pytest.raises(InputError, match=r"params_0.npy: not a numpy .npy file \(it does not "
                                         r"start with numpy's magic bytes\)"):
        load_release_params(release_copy)


def test_encoder_size_must_match_the_token_rows(release_copy: Path, tmp_path: Path) -> None:
    encoder = {t: i for i, t in enumerate(TOKENS[:-1])}
    (release_copy / "encoder_bpe_40000.json").write_text(json.dumps(encoder))
    with pytest.raises(ValueError, match=r"59 tokens, but params_shapes.json has 60 token rows"):
        import_release(release_copy, tmp_path / "out", n_ctx=N_CTX, n_head=HEADS)
    assert not (tmp_path / "out").exists()


def test_cli_import_never_writes_inside_a_pipeline_output(
        release: tuple[Path, list[np.ndarray]], tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text("stages:\n  pretrain:\n    cmd: x\n    outs:\n"
                                       "      - artifacts/pretrain\n")
    out = tmp_path / "artifacts" / "pretrain" / "openai"
    result = CliRunner().invoke(app, ["import-openai", "--release", str(release[0]), "--out",
                                      str(out), "--n-ctx", str(N_CTX), "--n-head", str(HEADS)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: --out {out}: inside artifacts/pretrain, an output "
                                    "of stage pretrain in ")
    assert not out.exists()


def test_cli_imports_then_generates(release: tuple[Path, list[np.ndarray]],
                                    tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "gpt1"
    args = ["import-openai", "--release", str(release[0]), "--out", str(out)]
    result = runner.invoke(app, [*args, "--n-ctx", str(N_CTX), "--n-head", str(HEADS)])
    assert result.exit_code == 0, result.output
    assert "2 layers x 32, 4 heads, 64 tokens, n_ctx 12" in result.output
    result = runner.invoke(app, ["generate", "--model", str(out), "--prompt", "The cat sat",
                                 "--max-tokens", "5", "--temperature", "0"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("the cat sat")

    result = runner.invoke(app, [*args, "--n-ctx", str(POSITIONS + 1), "--n-head", str(HEADS)])
    assert result.exit_code == 2
    assert "error: n_ctx must be between 1 and the release's 16 positions" in result.output
    result = runner.invoke(app, [*args, "--n-ctx", str(N_CTX), "--n-head", "5"])
    assert result.exit_code == 2 and "error: n_head must divide" in result.output
    result = runner.invoke(app, ["import-openai", "--release", str(tmp_path / "nowhere"),
                                 "--out", str(out)])
    assert result.exit_code == 2 and "not found" in result.output


def test_cli_import_replaces_only_what_it_writes(release: tuple[Path, list[np.ndarray]],
                                                 tmp_path: Path) -> None:
    out = tmp_path / "gpt1"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = ["import-openai", "--release", str(release[0]), "--out", str(out),
            "--n-ctx", str(N_CTX), "--n-head", str(HEADS)]
    result = CliRunner().invoke(app, args)
    assert (result.exit_code, result.output) == (
        2, f"error: {out}: holds notes.txt, which this command does not write; refusing to "
           "replace it (--force replaces it)\n")
    assert (out / "notes.txt").read_text() == "mine" and len(list(tmp_path.iterdir())) == 1
    for extra in (["--force"], []):  # then its own output, which it replaces as asked
        result = CliRunner().invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        assert sorted(p.name for p in out.iterdir()) == [
            "config.json", "model.safetensors", "tokenizer.json"]


# --- the tokenizer, against a restatement of the original on real text ---------------------
# (reference/original_gpt1.py: openai/finetune-transformer-lm's text_utils.py, none of our code)


EDGE_CASES = [
    "Hello,\r\n\r\n  World\u2026 It\u00b4s \u2014 fine!!",  # CRLF, blank line, ellipsis, dashes
    "tabs\tand\u00a0no-break spaces",
    "\u4e2d\u6587 and caf\u00e9 na\u00efve \U0001f600",  # unknown characters -> 0
    "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3",  # a final capital sigma
    "The <start> and <classify> tokens are text here",
    "",
]


@pytest.fixture(scope="module")
def real_texts(shared_data: Path) -> list[str]:
    """Paragraphs (with their line breaks) from four books, SST-2 dev, and edge cases."""
    texts = []
    for book in sorted((shared_data / "corpus" / "books").glob("*.txt"))[:4]:
        raw = book.read_text(encoding="utf-8").replace("\r\n", "\n")
        texts += [p for p in re.split(r"\n\s*\n", raw) if p.strip()][:500]
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8", newline="") as fh:
        texts += [row[0] for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]
    return texts + EDGE_CASES


@pytest.fixture(scope="module")
def released(shared_data: Path) -> tuple[OpenAITextEncoder, OriginalTextEncoder]:
    folder = shared_data / "openai-gpt1"
    return (load_release_tokenizer(folder),
            OriginalTextEncoder(folder / "encoder_bpe_40000.json", folder / "vocab_40000.bpe"))


def test_released_vocabulary(released: tuple[OpenAITextEncoder, OriginalTextEncoder]) -> None:
    ours, original = released
    tok = ours.tokenizer
    assert tok.unk_id == 0 and original.decoder[0] == "<unk>"
    assert tok.backend.get_vocab_size(with_added_tokens=False) == len(original.encoder) == 40478
    assert (tok.start_id, tok.delim_id, tok.classify_id, tok.pad_id) == (40478, 40479, 40480,
                                                                         40481)
    assert tok.backend.token_to_id("\n</w>") == original.encoder["\n</w>"] == 40477


def test_encoder_matches_the_original(
        released: tuple[OpenAITextEncoder, OriginalTextEncoder], real_texts: list[str]) -> None:
    ours, original = released
    expected = [original.encode(t) for t in real_texts]
    got = ours.encode_batch(real_texts)
    mismatched = [t for t, a, b in zip(real_texts, expected, got, strict=True) if a != b]
    assert not mismatched, f"{len(mismatched)} of {len(real_texts)} texts differ: {mismatched[:3]}"
    assert sum(map(len, expected)) > 100_000
    newline = ours.tokenizer.backend.token_to_id("\n</w>")
    assert sum(ids.count(newline) for ids in expected) > 1000  # line breaks were exercised
    assert 0 in expected[real_texts.index(EDGE_CASES[2])]  # and unknown characters
    assert ours.encode(EDGE_CASES[0]) == expected[real_texts.index(EDGE_CASES[0])]


def test_backslashes_as_the_original(
        released: tuple[OpenAITextEncoder, OriginalTextEncoder]) -> None:
    """The original's standardisation never splits a backslash off (its pattern is a plain
    string), so `a\\b` is one word to it: ids 8, 127, 259, where splitting gave 246, 365, 259."""
    ours, original = released
    assert original.encode("a\\b") == ours.encode("a\\b") == [8, 127, 259]
    rng = random.Random(0)
    alphabet = "ab XY.,!?'\"-()[]/*_|+~;:\n\t\\\\\\"  # backslash three times as likely
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
             for _ in range(3000)]
    with_backslash = [t for t in texts if "\\" in t]
    assert len(with_backslash) > 2000
    assert ours.encode_batch(texts) == [original.encode(t) for t in texts]


def test_the_generate_path_drops_only_line_breaks(
        released: tuple[OpenAITextEncoder, OriginalTextEncoder], real_texts: list[str]) -> None:
    """`gpt1 generate` encodes TextCleaner's output with tokenizer.json: whitespace tokens are
    dropped, so it differs from the original by the `\\n</w>` ids alone (and final sigma)."""
    ours, original = released
    newline = ours.tokenizer.backend.token_to_id("\n</w>")
    cleaner = TextCleaner()
    for text in real_texts:
        if text == EDGE_CASES[3]:  # HF lower-cases a final capital sigma to a medial one
            continue
        expected = [i for i in original.encode(text) if i != newline]
        assert ours.tokenizer.encode(cleaner(text)) == expected, text


def test_decode(released: tuple[OpenAITextEncoder, OriginalTextEncoder]) -> None:
    ours, _ = released
    assert ours.decode(ours.encode("The film was \u201cGREAT\u201d, wasn't it?")) == (
        'the film was " great " , was n\'t it ?')


def test_line_breaks_are_kept_as_the_original_keeps_them(
        released: tuple[OpenAITextEncoder, OriginalTextEncoder]) -> None:
    """The clean stage drops spaCy's whitespace token between lines; the original encodes it as
    `\\n</w>`, once per run of blank lines, whatever whitespace surrounds it."""
    ours, original = released
    newline = original.encoder["\n</w>"]
    text = "one\ntwo \t\n\n\r\n  three\u2028four\n"
    expected = original.encode(text)
    assert expected.count(newline) == 3
    assert ours.encode(text) == ours.encode_batch([text])[0] == expected


# Pieces of random texts: words, special cases across words (`U.S.`, `:)`), every whitespace
# the standardisation treats, and what each of ftfy's fixes acts on: HTML entities (unescaped
# until a line holds "<"), mojibake, curly quotes, ligatures, full-width letters, terminal
# escapes, control characters; with non-ASCII letters and a final capital sigma.
PIECES = ["the", "Cat", "don't", "U.S.", ":)", "e.g.", "a\\b", "...", "--", " ", " ", "\n",
          "\n\n", "\r\n", "\t", "\u00a0", "\u2028", "\x85", "&amp;", "&lt;", "<b>", "&",
          "\u00c3\u00a9", "\u00e2\u20ac\u2122", "\u201cso\u201d", "it\u2019s", "\u2014",
          "\u2026", "\u00b4", "\ufb01ne", "\uff2c\uff2f\uff35\uff24", "\x1b[31m", "\x07",
          "caf\u00e9", "na\u00efve", "\u039f\u0394\u03a5\u03a3", "\u00df", "\u0130stanbul",
          "\u4e2d\u6587", "\U0001f600"]


def test_random_texts_as_the_original(
        released: tuple[OpenAITextEncoder, OriginalTextEncoder]) -> None:
    ours, original = released
    rng = random.Random(1)
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40)))
             for _ in range(2000)]
    expected = [original.encode(t) for t in texts]
    assert ours.encode_batch(texts) == expected
    assert ours.encode_batch(texts[::-1]) == expected[::-1]  # from the caches, in another order


def test_caches_past_their_bounds(monkeypatch: pytest.MonkeyPatch,
                                  released: tuple[OpenAITextEncoder, OriginalTextEncoder],
                                  real_texts: list[str]) -> None:
    """Both caches start again many times over (the spans' keeps the line break it holds)."""
    monkeypatch.setattr("gpt1.corpus.text._MAX_CACHED_SPANS", 64)
    monkeypatch.setattr("gpt1.corpus.encode.MAX_CACHED_WORDS", 64)
    texts = real_texts[:400] + EDGE_CASES
    fresh = OpenAITextEncoder(released[0].tokenizer)
    expected = [released[1].encode(t) for t in texts]
    assert [fresh.encode(t) for t in texts] == expected
    assert len(fresh._cleaner._cache) <= 200 and len(fresh._encoder._words) <= 400

