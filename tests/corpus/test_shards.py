"""gpt1.corpus.shards: token ids split into Arrow shards and read back memory-mapped without a
copy."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gpt1.corpus.shards import (
    ShardInfo,
    ShardWriter,
    read_shard,
    read_split,
    read_verified_split,
    sha256_file,
    token_dtype,
)

UINT16 = np.dtype(np.uint16)


def test_token_dtype() -> None:
    assert token_dtype(500) == np.uint16
    assert token_dtype(65536) == np.uint16  # ids 0..65535 fit
    assert token_dtype(65537) == np.uint32
    assert token_dtype(40478) == np.uint16


def _write(out: Path, chunks: list[np.ndarray], shard_tokens: int,
           dtype: np.dtype = UINT16) -> list[ShardInfo]:
    writer = ShardWriter(out, dtype, shard_tokens)
    for chunk in chunks:
        writer.append(chunk)
    return writer.close()


def test_splits_at_shard_tokens(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    chunks = [rng.integers(0, 500, size=n) for n in (7, 18, 0, 3, 1)]
    infos = _write(tmp_path / "train", chunks, shard_tokens=10)
    assert [i.file for i in infos] == ["00000.arrow", "00001.arrow", "00002.arrow"]
    assert [i.tokens for i in infos] == [10, 10, 9]
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == [i.file for i in infos]
    got = np.concatenate(read_split(tmp_path / "train"))
    np.testing.assert_array_equal(got, np.concatenate(chunks))
    assert got.dtype == np.uint16


def test_exact_multiple_leaves_no_empty_shard(tmp_path: Path) -> None:
    infos = _write(tmp_path, [np.arange(20)], shard_tokens=10)
    assert [i.tokens for i in infos] == [10, 10]
    assert _write(tmp_path / "empty", [], shard_tokens=10) == []


def test_sha256_matches_the_file(tmp_path: Path) -> None:
    infos = _write(tmp_path, [np.arange(25)], shard_tokens=10)
    for info in infos:
        data = (tmp_path / info.file).read_bytes()
        assert info.sha256 == hashlib.sha256(data).hexdigest()
        assert info.sha256 == sha256_file(tmp_path / info.file)
    assert len({i.sha256 for i in infos}) == 3


def test_read_shard_is_a_read_only_zero_copy_memory_map(tmp_path: Path) -> None:
    values = np.arange(1000, 1000 + 64, dtype=np.uint16)
    (info,) = _write(tmp_path, [values], shard_tokens=1000)
    path = tmp_path / info.file
    before = pa.total_allocated_bytes()
    arr = read_shard(path)
    assert pa.total_allocated_bytes() == before  # nothing was copied into Arrow's memory
    np.testing.assert_array_equal(arr, values)
    assert arr.dtype == np.uint16
    assert not arr.flags.writeable
    with pytest.raises(ValueError):
        arr[0] = 1
    # The array is a view of the file's pages: a change to the file shows through it.
    data = path.read_bytes()
    offset = data.find(values.tobytes())
    assert offset >= 0 and data.count(values.tobytes()) == 1
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(np.array([7], dtype=np.uint16).tobytes())
    assert arr[0] == 7 and arr[1] == 1001


def test_uint32_when_the_vocabulary_is_large(tmp_path: Path) -> None:
    dtype = token_dtype(100_000)
    values = np.array([0, 65535, 65536, 99_999, 12], dtype=np.int64)
    infos = _write(tmp_path, [values], shard_tokens=3, dtype=dtype)
    shards = read_split(tmp_path)
    assert [s.dtype for s in shards] == [np.uint32, np.uint32]
    np.testing.assert_array_equal(np.concatenate(shards), values)
    assert [i.tokens for i in infos] == [3, 2]


def test_no_temporary_files_left(tmp_path: Path) -> None:
    _write(tmp_path, [np.arange(35)], shard_tokens=10)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000.arrow", "00001.arrow", "00002.arrow", "00003.arrow"]


def test_read_split_needs_shards(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no \.arrow shards"):
        read_split(tmp_path)


def test_read_shard_rejects_several_batches(tmp_path: Path) -> None:
    path = tmp_path / "two.arrow"
    batch = pa.record_batch([pa.array(np.arange(4, dtype=np.uint16))], names=["ids"])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
        writer.write_batch(batch)
    with pytest.raises(ValueError, match="expected one record batch, found 2"):
        read_shard(path)


def test_token_counts_and_unigram_loss() -> None:
    from gpt1.corpus.shards import token_counts, unigram_loss

    train = [np.array([0, 0, 1], np.uint16), np.array([1], np.uint16)]
    assert token_counts(train, 3).tolist() == [2, 2, 0]
    # smoothed p = (2+1)/(4+3) for ids 0 and 1, 1/7 for id 2
    val = [np.array([0, 1, 2], np.uint16)]
    expected = -(2 * np.log(3 / 7) + np.log(1 / 7)) / 3
    assert unigram_loss(train, val, 3) == pytest.approx(expected)


def _written_split(tmp_path: Path) -> tuple[Path, list[dict]]:
    split = tmp_path / "shards" / "train"
    writer = ShardWriter(split, np.dtype(np.uint16), 100)
    writer.append(np.arange(250, dtype=np.uint16))
    return split, [vars(info) for info in writer.close()]


def test_verified_split_reads_the_shards_the_manifest_lists(tmp_path: Path) -> None:
    split, listed = _written_split(tmp_path)
    shards = read_verified_split(split, listed)
    assert [len(s) for s in shards] == [100, 100, 50]
    assert np.array_equal(np.concatenate(shards), np.arange(250))


def test_a_shard_changed_after_tokenize_is_refused(tmp_path: Path) -> None:
    split, listed = _written_split(tmp_path)
    path = split / "00001.arrow"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a token overwritten in place: same size, other ids
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"00001\.arrow: contents differ from the sha256 in "
                                         r".*manifest\.json.*run the tokenize stage again"):
        read_verified_split(split, listed)


@pytest.mark.parametrize("change", ["remove", "add"])
def test_a_shard_missing_or_added_is_refused(tmp_path: Path, change: str) -> None:
    split, listed = _written_split(tmp_path)
    if change == "remove":
        (split / "00002.arrow").unlink()
    else:
        (split / "00003.arrow").write_bytes((split / "00002.arrow").read_bytes())
    with pytest.raises(ValueError, match=r"shards differ from .*manifest\.json"):
        read_verified_split(split, listed)
