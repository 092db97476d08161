"""`gpt1 export-hf` of a fine-tuned model folder: a multiple-choice model loads as transformers'
`OpenAIGPTDoubleHeadsModel` and gives our logits; the families no transformers class computes are
refused in one line; the exported tokenizer loads with `AutoTokenizer` and gives our ids.

Run with `pytest -s` to see the max absolute differences.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, OpenAIGPTDoubleHeadsModel
from transformers.utils import logging as hf_logging

from gpt1.config import Family, TaskParams
from gpt1.corpus.bpe import SPECIAL_TOKENS, GPT1Tokenizer, train_bpe
from gpt1.downstream.families import family_of
from gpt1.downstream.standalone import save_finetuned, task_card
from gpt1.interop.hf import export_hf
from gpt1.model.heads import TaskModel
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config
from tests.test_hf_interop import invoke, max_diff, perturb_, snapshot

pytestmark = pytest.mark.usefixtures("one_torch_thread")
hf_logging.disable_progress_bar()

TOL = 1e-4
N_CTX = 40
# texts as `TextCleaner` leaves them (spaCy's tokens joined by spaces), accents kept: the BERT
# normaliser of transformers' own OpenAIGPTTokenizer would strip them
CLEANED = ["The café 's film - was n't it GOOD ? Naïve , \" quoted \" .",
           "a good film , a bad plot .", "the story ends well ; i liked it !"]


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


def finetuned(folder: Path, tokenizer: Path, family: Family) -> TaskModel:
    """A fine-tuned model folder of `family` in `folder`: a tiny trunk, a head whose bias
    matters; returns the model, in eval mode."""
    task = spec(family)
    torch.manual_seed(0)
    trunk = GPT1(GPT1Config(vocab_size=GPT1Tokenizer.load(tokenizer).vocab_size, n_ctx=N_CTX,
                            n_embd=32, n_layer=2, n_head=4))
    model = TaskModel(trunk, family, family_of(task).n_outputs(task), dropout=0.1, seed=1)
    perturb_(model, seed=2)
    with torch.no_grad():
        model.head.bias.add_(1.0)
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
    assert max_diff(mine, out.mc_logits, "multiple choice ours->HF") <= TOL
    # at the real tokens: the mask makes padding attend differently
    assert max_diff(lm_logits[real], out.logits.flatten(0, 1)[real], "double heads LM") <= TOL


@pytest.mark.parametrize("source", ["pretrained", "fine-tuned"])
def test_exported_tokenizer_gives_our_ids(tmp_path: Path, tokenizer: Path, source: str) -> None:
    if source == "fine-tuned":
        finetuned(tmp_path / "model", tokenizer, "multiple_choice")
    else:
        (tmp_path / "model").mkdir()
        save_model(GPT1(GPT1Config(vocab_size=64, n_ctx=N_CTX, n_embd=8, n_layer=1,
                                   n_head=1)), tmp_path / "model")
        (tmp_path / "model" / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    export_hf(tmp_path / "model", tmp_path / "hf")

    ours, theirs = GPT1Tokenizer.load(tokenizer), AutoTokenizer.from_pretrained(tmp_path / "hf")
    for text in CLEANED:
        assert theirs(text)["input_ids"] == ours.encode(text), text
    specials = (theirs.unk_token_id, theirs.bos_token_id, theirs.sep_token_id,
                theirs.cls_token_id, theirs.pad_token_id)
    assert specials == (ours.unk_id, ours.start_id, ours.delim_id, ours.classify_id, ours.pad_id)
    assert theirs("<start> a good film <delim> i liked it <classify>")["input_ids"] == [
        ours.start_id, *ours.encode("a good film"), ours.delim_id, *ours.encode("i liked it"),
        ours.classify_id]
    assert theirs.model_max_length == N_CTX


@pytest.mark.parametrize("family", ["classification", "entailment", "similarity"])
def test_cli_refuses_families_without_a_transformers_class(tmp_path: Path, tokenizer: Path,
                                                           family: Family) -> None:
    finetuned(tmp_path / "ft", tokenizer, family)
    before = snapshot(tmp_path)
    code, output = invoke("export-hf", "--model", tmp_path / "ft", "--out", tmp_path / "hf")
    assert code == 2 and output.startswith(f"error: {tmp_path / 'ft'}: task 'tiny_{family}' "
                                           f"is a {family} model"), output
    assert output.count("\n") == 1 and "transformers" in output, output
    assert ("both orders" in output) == (family == "similarity"), output
    assert snapshot(tmp_path) == before  # nothing written, no temporaries

