"""gpt1.jobs.bpe: stage bpe's job, a BPE learned on every document table of a folder and saved
(tokenizer.json, vocab.json, merges.txt) in place of the folder's files."""

from __future__ import annotations

import json
from pathlib import Path

from gpt1.config import BpeParams
from gpt1.corpus.tokenizer import END_OF_WORD, SPECIAL_TOKENS
from gpt1.jobs.bpe import learn_bpe
from tests.corpus_texts import synthetic_corpus


def test_learned_on_every_table_of_a_folder_and_saved(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus, out = tmp_path / "clean", tmp_path / "bpe"
    corpus.mkdir()
    out.mkdir()
    (out / "stale.json").write_text("{}")
    pq.write_table(pa.table({"text": synthetic_corpus(docs=100)}), corpus / "00000.parquet")
    # a word of the second table alone
    pq.write_table(pa.table({"text": ["zyzzyva ."] * 20}), corpus / "00001.parquet")
    learned = learn_bpe(corpus, out, BpeParams(vocab_size=300, min_frequency=2))
    assert sorted(p.name for p in out.iterdir()) == ["merges.txt", "tokenizer.json", "vocab.json"]
    saved = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert saved == json.loads(learned.to_str())
    assert json.loads((out / "vocab.json").read_text(encoding="utf-8")) == saved["model"]["vocab"]
    merges = (out / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert [m for m in merges if not m.startswith("#")] == [
        " ".join(m) if isinstance(m, list) else m for m in saved["model"]["merges"]]
    assert f"zyzzyva{END_OF_WORD}" in saved["model"]["vocab"]
    assert [t["content"] for t in saved["added_tokens"]][-len(SPECIAL_TOKENS):] == list(
        SPECIAL_TOKENS)
