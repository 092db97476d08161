"""gpt1.transforms: task text cleaned like the corpus, then `<start> text <classify>`."""

from __future__ import annotations

import pytest

from gpt1.bpe import Gpt1Tokenizer, train_bpe
from gpt1.text import TextCleaner
from gpt1.transforms import classification_input, encode_texts


@pytest.fixture(scope="module")
def tok() -> Gpt1Tokenizer:
    texts = ["i do n't like the film , it is dull .", "the film is great ! i like it ."] * 20
    return Gpt1Tokenizer(train_bpe(texts, vocab_size=300, min_frequency=1))


def test_classification_input(tok: Gpt1Tokenizer) -> None:
    assert classification_input([1, 2, 3], tok, n_ctx=8) == [tok.start_id, 1, 2, 3,
                                                              tok.classify_id]
    cut = classification_input(list(range(20)), tok, n_ctx=8)
    assert len(cut) == 8
    assert cut == [tok.start_id, 0, 1, 2, 3, 4, 5, tok.classify_id]  # the end is cut
    assert classification_input([], tok, n_ctx=8) == [tok.start_id, tok.classify_id]


def test_encode_texts_cleans_like_the_corpus(tok: Gpt1Tokenizer) -> None:
    cleaner = TextCleaner()
    raw = ["I don't like the film, it is dull.", "The film is GREAT!"]
    ids = encode_texts(raw, tok, cleaner)
    assert ids == [tok.encode(cleaner(t)) for t in raw]
    assert tok.decode(ids[0]) == "i do n't like the film , it is dull ."
    assert tok.unk_id not in ids[0] + ids[1]
