"""gpt1.downstream.transforms: task text cleaned like the corpus, truncated longest first, and laid
out as its family says (paper §3.3), the special tokens around it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpt1.config import Family, TaskParams
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream import families
from gpt1.downstream.families import TaskFamily
from gpt1.downstream.transforms import encode_examples, encode_texts, truncate_segments


@pytest.fixture(scope="module")
def tok() -> GPT1Tokenizer:
    texts = ["i do n't like the film , it is dull .", "the film is great ! i like it ."] * 20
    return GPT1Tokenizer(train_bpe(texts, vocab_size=300, min_frequency=1))


@pytest.fixture(scope="module")
def cleaner() -> TextCleaner:
    return TextCleaner()


def task(family: Family, labels: list[str] | None = None) -> TaskParams:
    metrics = ["pearson"] if family == "similarity" and labels is None else ["accuracy"]
    return TaskParams(title="toy", family=family, reader="toy", labels=labels, metrics=metrics,
                      files={"train": "train.tsv", "dev": "dev.tsv"})


def test_encode_texts_cleans_like_the_corpus(tok: GPT1Tokenizer, cleaner: TextCleaner) -> None:
    raw = ["I don't like the film, it is dull.", "The film is GREAT!", "The film is GREAT!"]
    ids = encode_texts(raw, tok, cleaner)
    assert ids == [tok.encode(cleaner(t)) for t in raw]
    assert tok.decode(ids[0]) == "i do n't like the film , it is dull ."
    assert tok.unk_id not in ids[0] + ids[1]
    ids[1].append(-1)  # a repeated text is encoded once, but each gets its own list
    assert ids[2] == tok.encode(cleaner(raw[2]))


def test_truncate_cuts_the_longest_segment_first() -> None:
    a, b, c = list(range(10)), [20, 21, 22], [30, 31]
    assert truncate_segments([a, b, c], 15) == [a, b, c]  # fits: unchanged
    assert truncate_segments([a, b, c], 11) == [a[:6], b, c]
    assert truncate_segments([a, b, c], 7) == [a[:3], b[:2], c[:2]]
    assert truncate_segments([a, b, c], 6) == [a[:2], b[:2], c[:2]]
    assert truncate_segments([a, b, c], 0) == [[], [], []]
    assert truncate_segments([[1, 2], [3, 4]], 3) == [[1, 2], [3]]  # ties: the later is cut
    assert truncate_segments([[], [1, 2, 3]], 1) == [[], [1]]
    with pytest.raises(ValueError, match="no room for the special tokens"):
        truncate_segments([a], -1)


def _one_token_at_a_time(segments: list[list[int]], budget: int) -> list[list[int]]:
    """The definition: cut the end of the longest (of equals, the last) while over budget."""
    segments = [list(s) for s in segments]
    while sum(map(len, segments)) > budget:
        longest = max(range(len(segments)), key=lambda i: (len(segments[i]), i))
        segments[longest].pop()
    return segments


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=40), min_size=1, max_size=4),
       st.integers(0, 100))
def test_truncate_matches_its_definition(segments: list[list[int]], budget: int) -> None:
    cut = truncate_segments(segments, budget)
    assert cut == _one_token_at_a_time(segments, budget)
    assert sum(map(len, cut)) == min(budget, sum(map(len, segments)))  # exactly the budget


def test_classification_layout(tok: GPT1Tokenizer, cleaner: TextCleaner) -> None:
    table = pa.table({"idx": [0, 1], "text": ["The film is great!", "it is dull " * 30],
                      "label": [1, 0]})
    encoded = encode_examples(task("classification", ["0", "1"]), table, tok, cleaner, n_ctx=12)
    (short,), (long,) = encoded.examples
    assert short == [tok.start_id, *tok.encode("the film is great !"), tok.classify_id]
    assert len(long) == 12  # the text is cut, the special tokens stay
    assert long[0] == tok.start_id and long[-1] == tok.classify_id
    assert long[1:-1] == tok.encode("it is dull " * 30)[:10]
    # the lengths uncut: the long one's would have been its text and the two special tokens
    assert encoded.lengths.tolist() == [len(short), 2 + len(tok.encode("it is dull " * 30))]


def test_entailment_layout(tok: GPT1Tokenizer, cleaner: TextCleaner) -> None:
    table = pa.table({"idx": [0, 1], "premise": ["the film is great", "it is dull " * 30],
                      "hypothesis": ["i like it", "the film"], "label": [0, 1]})
    examples = encode_examples(task("entailment", ["yes", "no"]), table, tok, cleaner,
                               n_ctx=16).examples
    (first,), (second,) = examples
    assert first == [tok.start_id, *tok.encode("the film is great"), tok.delim_id,
                     *tok.encode("i like it"), tok.classify_id]
    hypothesis = tok.encode("the film")
    assert len(second) == 16  # the long premise is cut, the short hypothesis kept whole
    assert second[-len(hypothesis) - 2:] == [tok.delim_id, *hypothesis, tok.classify_id]


def test_similarity_has_both_orders(tok: GPT1Tokenizer, cleaner: TextCleaner) -> None:
    table = pa.table({"idx": [0], "text_a": ["the film is great"], "text_b": ["i like it"],
                      "label": [1]})
    (pair,) = encode_examples(task("similarity", ["0", "1"]), table, tok, cleaner,
                              n_ctx=32).examples
    a, b = tok.encode("the film is great"), tok.encode("i like it")
    assert pair == [[tok.start_id, *a, tok.delim_id, *b, tok.classify_id],
                    [tok.start_id, *b, tok.delim_id, *a, tok.classify_id]]


def test_similarity_orders_hold_the_same_tokens_when_cut(tok: GPT1Tokenizer,
                                                         cleaner: TextCleaner) -> None:
    text = "the film is great"  # two equally long texts and an odd budget: one is cut more
    table = pa.table({"idx": [0], "text_a": [text], "text_b": [text.replace("great", "dull")],
                      "label": [0.5]})
    (pair,) = encode_examples(task("similarity"), table, tok, cleaner, n_ctx=10).examples
    ab, ba = pair
    assert len(ab) == len(ba) == 10
    assert sorted(ab) == sorted(ba)


def test_multiple_choice_layout(tok: GPT1Tokenizer, cleaner: TextCleaner) -> None:
    table = pa.table({"idx": [0, 1], "context": ["the film is great", "it is dull " * 30],
                      "question": ["", "i like it"], "choices": [["great", "dull", "i like it"],
                                                                 ["dull", "the film"]],
                      "label": [0, 1]})
    encoded = encode_examples(task("multiple_choice"), table, tok, cleaner, n_ctx=16)
    examples = encoded.examples
    assert [len(e) for e in examples] == [3, 2]  # one sequence per choice
    # an example is as long as its longest choice makes it: <start> <delim> <classify> and texts
    assert encoded.lengths.tolist() == [
        3 + len(tok.encode("the film is great")) + len(tok.encode("i like it")),
        3 + len(tok.encode("it is dull " * 30)) + len(tok.encode("i like it"))
        + len(tok.encode("the film"))]
    context = tok.encode("the film is great")
    for seq, choice in zip(examples[0], ["great", "dull", "i like it"], strict=True):
        # the empty question adds nothing: no delimiter or token of its own
        assert seq == [tok.start_id, *context, tok.delim_id, *tok.encode(choice),
                       tok.classify_id]
    question, answer = tok.encode("i like it"), tok.encode("the film")
    kept = 13 - len(question) - len(answer)
    long = examples[1][1]
    assert len(long) == 16  # the long context is cut, question and answer kept whole
    assert long == [tok.start_id, *tok.encode("it is dull " * 30)[:kept], *question,
                    tok.delim_id, *answer, tok.classify_id]


def test_the_layout_is_the_familys(tok: GPT1Tokenizer, cleaner: TextCleaner,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing about a family's layout lives in the transformation: change the object, and the
    sequences follow."""
    entailment = families.FAMILIES["entailment"]
    layout = "<start> hypothesis <delim> <delim> premise <classify>"
    monkeypatch.setitem(families.FAMILIES, "entailment",
                        TaskFamily("entailment", entailment.columns, (layout,)))
    table = pa.table({"idx": [0], "premise": ["the film is great " * 5],
                      "hypothesis": ["i like it"], "label": [0]})
    ((seq,),) = encode_examples(task("entailment", ["yes", "no"]), table, tok, cleaner,
                                n_ctx=12).examples
    hypothesis = tok.encode("i like it")
    kept = 12 - 4 - len(hypothesis)  # four special tokens now
    assert seq == [tok.start_id, *hypothesis, tok.delim_id, tok.delim_id,
                   *tok.encode("the film is great " * 5)[:kept], tok.classify_id]
