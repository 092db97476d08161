"""GPT-1-style BPE: lower-cased, whitespace-split words, `</w>` marking the end of a word."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

UNK = "<unk>"
START, DELIM, CLASSIFY, PAD = "<start>", "<delim>", "<classify>", "<pad>"
# Appended after the learned vocabulary, as GPT-1 appended them after its 40,478 BPE tokens.
SPECIAL_TOKENS = (START, DELIM, CLASSIFY, PAD)
END_OF_WORD = "</w>"


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int,
              length: int | None = None, show_progress: bool = False) -> Tokenizer:
    """Learn a BPE vocabulary of `vocab_size` entries (`<unk>` = 0) and append the special tokens.

    `texts` are cleaned documents: spaCy tokens separated by spaces.
    """
    tokenizer = Tokenizer(models.BPE(unk_token=UNK, end_of_word_suffix=END_OF_WORD))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=[UNK], end_of_word_suffix=END_OF_WORD,
                                  show_progress=show_progress)
    tokenizer.train_from_iterator(texts, trainer=trainer, length=length)
    tokenizer = _renumbered(tokenizer)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def _renumbered(trained: Tokenizer) -> Tokenizer:
    """The same BPE with ids in a canonical order, GPT-1's: `<unk>`, single characters, single
    characters + `</w>`, then each merge's result in merge order.

    `tokenizers` numbers the `</w>` characters in hash-map order, which changes from process to
    process (huggingface/tokenizers#1794), so without this two identical runs write different ids.
    """
    model = json.loads(trained.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    merged = [a + b for a, b in merges]
    merged_set = set(merged)
    base = sorted((tok for tok in model["vocab"] if tok != UNK and tok not in merged_set),
                  key=lambda tok: (tok.endswith(END_OF_WORD), tok))
    vocab: dict[str, int] = {}
    for tok in [UNK, *base, *merged]:
        vocab.setdefault(tok, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=UNK,
                                     end_of_word_suffix=END_OF_WORD))
    tokenizer.normalizer = trained.normalizer
    tokenizer.pre_tokenizer = trained.pre_tokenizer
    tokenizer.decoder = trained.decoder
    return tokenizer


class GPT1Tokenizer:
    """A trained BPE with GPT-1's special tokens: cleaned text in, token ids out."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.backend = tokenizer
        ids = {tok: tokenizer.token_to_id(tok) for tok in (UNK, *SPECIAL_TOKENS)}
        missing = [tok for tok, i in ids.items() if i is None]
        if missing:
            raise ValueError(f"tokenizer lacks the special tokens {missing}")
        self.unk_id, self.start_id, self.delim_id, self.classify_id, self.pad_id = ids.values()
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    @classmethod
    def load(cls, path: Path | str) -> GPT1Tokenizer:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: tokenizer not found")
        try:
            backend = Tokenizer.from_file(str(path))
        except Exception as err:  # the Rust library raises a bare Exception for any bad file
            raise ValueError(f"{path}: not a tokenizer file ({err})") from None
        try:
            return cls(backend)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=False)
