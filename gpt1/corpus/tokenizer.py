"""GPT-1-style BPE: lower-cased, whitespace-split words, `</w>` marking the end of a word."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from gpt1.errors import InputError, not_found

UNK = "<unk>"
START, DELIM, CLASSIFY, PAD = "<start>", "<delim>", "<classify>", "<pad>"
# Appended after the learned vocabulary, as GPT-1 appended them after its 40,478 BPE tokens.
SPECIAL_TOKENS = (START, DELIM, CLASSIFY, PAD)
END_OF_WORD = "</w>"


# Word-final characters are trained as characters of their own, from Unicode's Supplementary
# Private Use Area-B, rather than through the trainer's `end_of_word_suffix`: the trainer numbers
# suffixed characters in hash-map order, which changes from run to run, and breaks ties between
# equally frequent merges by those numbers (huggingface/tokenizers#1794), so the merges came out
# in a different order on each run. Characters it reads from the text are numbered in code-point
# order: these, numbered in the order the corpus first ends a word with each, keep it fixed.
_FINAL_MARKS = 0x100000  # the first of Area-B's 65,534 code points


class _WordEnds:
    """Marks each word's last character with its private-use stand-in, and maps them back."""

    def __init__(self) -> None:
        self.marks: dict[str, str] = {}
        self.originals: dict[str, str] = {}
        self._normalizer = normalizers.Lowercase()
        self._pre_tokenizer = pre_tokenizers.WhitespaceSplit()

    def _mark(self, char: str) -> str:
        if char not in self.marks:
            if len(self.marks) == 65_534:
                raise InputError("more than 65,534 distinct word-final characters")
            self.marks[char] = mark = chr(_FINAL_MARKS + len(self.marks))
            self.originals[mark] = char
        return self.marks[char]

    def __call__(self, text: str) -> str:
        """`text` lower-cased and split as the tokenizer does, each word's last character
        marked."""
        if text and max(text) >= chr(_FINAL_MARKS):
            raise InputError(f"a document holds U+{ord(max(text)):X}, a private-use character "
                             "BPE training reserves for word ends")
        words = self._pre_tokenizer.pre_tokenize_str(self._normalizer.normalize_str(text))
        return " ".join(word[:-1] + self._mark(word[-1]) for word, _ in words)

    def unmarked(self, token: str) -> str:
        """A trained token as the tokenizer spells it: a marked character is itself + `</w>`."""
        return "".join(self.originals[c] + END_OF_WORD if c in self.originals else c
                       for c in token)


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int,
              length: int | None = None, show_progress: bool = False) -> Tokenizer:
    """Learn a BPE vocabulary of `vocab_size` entries (`<unk>` = 0) and append the special tokens.

    `texts` are cleaned documents: spaCy tokens separated by spaces. The same texts and settings
    give the same merges, in the same order, and the same ids on every run.
    """
    ends = _WordEnds()
    trainee = Tokenizer(models.BPE(unk_token=UNK))
    trainee.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=[UNK], show_progress=show_progress)
    trainee.train_from_iterator(map(ends, texts), trainer=trainer, length=length)
    model = json.loads(trainee.to_str())["model"]
    merges = [(ends.unmarked(a), ends.unmarked(b)) for a, b in
              (m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"])]
    merged = {a + b for a, b in merges}
    # every character is in the alphabet, as it is to a trainer given `end_of_word_suffix`, even
    # one that only ever ends a word (`,`): a text may hold it elsewhere
    alphabet = {ends.unmarked(tok) for tok in model["vocab"]} - merged | ends.marks.keys()
    tokenizer = _canonical(alphabet, merges, vocab_size)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def _canonical(alphabet: set[str], merges: list[tuple[str, str]], vocab_size: int) -> Tokenizer:
    """GPT-1's tokenizer of `alphabet` (with `<unk>`) and as many of the `merges` as
    `vocab_size` leaves room for, ids in GPT-1's order: `<unk>`, single characters, single
    characters + `</w>`, then each merge's result in merge order."""
    base = sorted(alphabet - {UNK}, key=lambda tok: (tok.endswith(END_OF_WORD), tok))
    vocab = {tok: i for i, tok in enumerate([UNK, *base])}
    kept = []
    for a, b in merges:
        if len(vocab) >= vocab_size:
            break
        kept.append((a, b))
        vocab.setdefault(a + b, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=kept, unk_token=UNK,
                                     end_of_word_suffix=END_OF_WORD))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    return tokenizer


class GPT1Tokenizer:
    """A trained BPE with GPT-1's special tokens: cleaned text in, token ids out."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.backend = tokenizer
        ids = {tok: tokenizer.token_to_id(tok) for tok in (UNK, *SPECIAL_TOKENS)}
        missing = [tok for tok, i in ids.items() if i is None]
        if missing:
            raise InputError(f"tokenizer lacks the special tokens {missing}")
        self.unk_id, self.start_id, self.delim_id, self.classify_id, self.pad_id = ids.values()
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    @classmethod
    def load(cls, path: Path | str) -> GPT1Tokenizer:
        path = Path(path)
        if not path.is_file():
            raise not_found(path, " (the tokenizer)")
        try:
            backend = Tokenizer.from_file(str(path))
        except Exception as err:  # the Rust library raises a bare Exception for any bad file
            raise InputError(f"{path}: not a tokenizer file ({err})") from None
        try:
            return cls(backend)
        except InputError as err:
            raise InputError(f"{path}: {err}") from None

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=False)
