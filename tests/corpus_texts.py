"""Made-up text for the corpus stages' tests: documents over a Zipfian vocabulary to learn a BPE
on (gpt1.corpus.tokenizer, stage bpe), and texts that try an encoder's edge cases with a BPE
learned on the first three (gpt1.corpus.encode, stage tokenize)."""

from __future__ import annotations

import random

from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe


def synthetic_corpus(seed: int = 0, docs: int = 300) -> list[str]:
    """Cleaned-looking documents over a Zipfian vocabulary of made-up words, some upper-case."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    lexicon = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(400)]
    lexicon += ["the", "cat", "sat", "on", "mat", "do", "n't", ",", "."]
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    out = []
    for i in range(docs):
        words = rng.choices(lexicon, weights=weights, k=60)
        text = " ".join(words) + " the cat sat on the mat . i do n't ."
        out.append(text.upper() if i % 4 == 0 else text)
    return out


TEXTS = ["the cat sat on the mat .", "The CAT , the dog ; a bird", "zebra quagga xylophone",
         "", " lead  double\x1cspace trail ",
         "x<start>y <pad> \u03a3\u0391\u03a3 \u0130x caf\u00e9"]


def tiny_tokenizer() -> GPT1Tokenizer:
    return GPT1Tokenizer(train_bpe(TEXTS[:3] * 5, vocab_size=60, min_frequency=1))
