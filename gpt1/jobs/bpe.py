"""Stage `bpe`'s job: the BPE vocabulary (`gpt1.corpus.tokenizer.train_bpe`) learned on the document
tables of a folder and saved. A module of its own so that the stages that only read a tokenizer
(`gpt1.corpus.tokenizer`) do not depend on the document tables' code."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from gpt1.atomic import atomic_dir
from gpt1.config import BpeParams
from gpt1.corpus.documents import count_documents, iter_texts
from gpt1.corpus.tokenizer import train_bpe


def learn_bpe(corpus_dir: Path, out_dir: Path, params: BpeParams,
              show_progress: bool = False) -> Tokenizer:
    """Learn `params.vocab_size` entries (`bpe.min_frequency`) on every document of the Parquet
    files in `corpus_dir`, and save them in `out_dir` (replaced atomically): `tokenizer.json`,
    and `vocab.json` + `merges.txt` for other tools."""
    docs = count_documents(sorted(corpus_dir.glob("*.parquet")))
    tokenizer = train_bpe(iter_texts(corpus_dir), params.vocab_size, params.min_frequency,
                          length=docs, show_progress=show_progress)
    with atomic_dir(out_dir) as tmp:
        tokenizer.save(str(tmp / "tokenizer.json"))
        tokenizer.model.save(str(tmp))
    return tokenizer
