"""gpt1.corpus.tokenizer: a GPT-1-style BPE with `</w>` word ends, lower-casing and the special
tokens last. (Learned on a folder of document tables and saved, stage bpe's job:
tests/jobs/test_bpe.py.)"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from gpt1.corpus.tokenizer import END_OF_WORD, SPECIAL_TOKENS, UNK, GPT1Tokenizer, train_bpe
from tests.corpus_texts import synthetic_corpus

VOCAB = 150


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return train_bpe(synthetic_corpus(), vocab_size=VOCAB, min_frequency=2)


@pytest.fixture(scope="module")
def tok(tokenizer: Tokenizer) -> GPT1Tokenizer:
    return GPT1Tokenizer(tokenizer)


def test_vocabulary_size_and_special_tokens_last(tokenizer: Tokenizer) -> None:
    assert tokenizer.get_vocab_size(with_added_tokens=True) == VOCAB + len(SPECIAL_TOKENS)
    assert tokenizer.token_to_id(UNK) == 0
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [VOCAB, VOCAB + 1, VOCAB + 2,
                                                                   VOCAB + 3]
    assert SPECIAL_TOKENS == ("<start>", "<delim>", "<classify>", "<pad>")


def test_word_final_pieces_carry_end_of_word(tokenizer: Tokenizer) -> None:
    enc = tokenizer.encode("the cat sat on the mat .")
    assert enc.tokens == ["the</w>", "cat</w>", "sat</w>", "on</w>", "the</w>", "mat</w>", ".</w>"]
    learned = [t for t in tokenizer.get_vocab() if t not in (UNK, *SPECIAL_TOKENS)]
    assert any(t.endswith(END_OF_WORD) for t in learned)
    assert any(not t.endswith(END_OF_WORD) for t in learned)  # word-internal pieces
    # a word split into several pieces: only the last one ends the word
    pieces = tokenizer.encode("thecatsatonthemat").tokens
    assert len(pieces) > 1
    assert pieces[-1].endswith(END_OF_WORD)
    assert not any(p.endswith(END_OF_WORD) for p in pieces[:-1])


def test_lower_cased(tokenizer: Tokenizer) -> None:
    assert tokenizer.encode("The CAT Sat").ids == tokenizer.encode("the cat sat").ids
    assert all(t == t.lower() for t in tokenizer.get_vocab())


def test_unknown_characters_map_to_unk(tok: GPT1Tokenizer) -> None:
    assert tok.unk_id == 0
    ids = tok.encode("\u4e2d")
    assert ids and set(ids) == {0}


def test_gpt1_tokenizer_ids(tok: GPT1Tokenizer) -> None:
    assert tok.vocab_size == VOCAB + 4
    assert (tok.start_id, tok.delim_id, tok.classify_id, tok.pad_id) == (
        VOCAB, VOCAB + 1, VOCAB + 2, VOCAB + 3)


def test_decode_round_trips_a_clean_sentence(tok: GPT1Tokenizer) -> None:
    sentence = "the cat sat on the mat , i do n't ."
    ids = tok.encode(sentence)
    assert tok.unk_id not in ids
    assert tok.decode(ids) == sentence
    mixed = "The Cat SAT on the mat ."
    assert tok.decode(tok.encode(mixed)) == mixed.lower()


def test_encode_batch_matches_encode(tok: GPT1Tokenizer) -> None:
    texts = ["the cat sat", "on the mat .", "", "i do n't"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.encode("") == []


def test_special_tokens_are_atomic_in_text(tok: GPT1Tokenizer) -> None:
    assert tok.encode("<classify>") == [tok.classify_id]


def test_training_is_deterministic(tokenizer: Tokenizer) -> None:
    """Same texts, same settings -> the same ids (else `dvc repro` of bpe is not reproducible)."""
    runs = [tokenizer] + [train_bpe(synthetic_corpus(), vocab_size=VOCAB, min_frequency=2)
                          for _ in range(2)]
    assert all(sorted(r.get_vocab()) == sorted(tokenizer.get_vocab()) for r in runs)
    moved = {t: [r.token_to_id(t) for r in runs] for t in tokenizer.get_vocab()
             if len({r.token_to_id(t) for r in runs}) > 1}
    assert not moved, f"train_bpe gave tokens different ids on identical input: {moved}"


def test_equally_frequent_merges_come_in_one_order() -> None:
    """Every pair of these words is as frequent as every other, and only 13 merges fit: which
    come first is the trainer's tie-break. `tokenizers` breaks ties by its symbols' numbers,
    and numbers word-final characters in hash-map order, which changes from run to run: five
    runs gave five different vocabularies before word ends were trained as characters."""
    words = ["".join(pair) for pair in itertools.product("abcdefgh", repeat=2)]
    runs = [train_bpe([" ".join(words)] * 2, vocab_size=30, min_frequency=2).to_str()
            for _ in range(5)]
    assert len(set(runs)) == 1
    merges = json.loads(runs[0])["model"]["merges"]
    assert len(merges) == 30 - 1 - 16  # <unk>, a..h and a</w>..h</w>
    assert merges[0] == ["a", "a</w>"]  # ties go to the characters first in code-point order


def test_a_character_that_only_ends_words_is_in_the_alphabet() -> None:
    """`,` is only ever a word of its own here, so only `,</w>` is seen; a text may still hold
    it inside a word, and GPT-1's vocabulary has every character both ways."""
    tok = GPT1Tokenizer(train_bpe(["x , y , z"] * 3, vocab_size=40, min_frequency=2))
    assert {",", ",</w>"} <= tok.backend.get_vocab().keys()
    assert tok.unk_id not in tok.encode("x,y")


def test_private_use_characters_of_word_ends_are_refused() -> None:
    with pytest.raises(ValueError, match=r"U\+100000, a private-use character"):
        train_bpe(["a \U00100000b"], vocab_size=40, min_frequency=1)


def test_save_and_load(tokenizer: Tokenizer, tok: GPT1Tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    loaded = GPT1Tokenizer.load(path)
    text = "the cat sat on the mat ."
    assert loaded.encode(text) == tok.encode(text)
    assert loaded.decode(loaded.encode(text)) == text
    assert loaded.pad_id == tok.pad_id and loaded.vocab_size == tok.vocab_size


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"tokenizer.json: not found \(the tokenizer\)"):
        GPT1Tokenizer.load(tmp_path / "tokenizer.json")


def test_tokenizer_without_special_tokens_is_rejected() -> None:
    bare = Tokenizer(models.BPE(vocab={UNK: 0, "a": 1}, merges=[], unk_token=UNK))
    with pytest.raises(ValueError, match="<start>"):
        GPT1Tokenizer(bare)
