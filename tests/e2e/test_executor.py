"""The executor of clean and tokenize: local processes or a Dask cluster, the same bytes out."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.config import ExecutorParams, load_params
from gpt1.corpus import parallel
from gpt1.corpus.books import read_book, split_documents
from gpt1.corpus.clean import clean_corpus
from gpt1.corpus.documents import DOCUMENT_SCHEMA, iter_text_arrays
from gpt1.corpus.encode import tokenize_corpus
from gpt1.corpus.parallel import dask_map, describe, executor_map
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.errors import InputError
from tests.conftest import REPO

pytestmark = pytest.mark.heavy  # Dask clusters

EXECUTORS = {
    "this process": ExecutorParams(kind="local", workers=1),
    "2 local processes": ExecutorParams(kind="local", workers=2),
    "a local Dask cluster of 2 workers": ExecutorParams(kind="dask", workers=2),
}
BOOKS = sorted((REPO / "gpt1/sample_data/corpus").glob("*.txt"))[:2]


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_clean_and_tokenize_write_the_same_bytes_on_every_executor(tmp_path: Path) -> None:
    """Two of the bundled books in documents of 2,000 characters, four to a batch: dozens of
    batches, which two workers finish out of order."""
    raw = tmp_path / "raw.parquet"
    docs = [(f"{book.stem}#{i}", book.name, text) for book in BOOKS
            for i, text in enumerate(split_documents(read_book(book), 2000))]
    pq.write_table(pa.table(list(map(list, zip(*docs, strict=True))), schema=DOCUMENT_SCHEMA), raw)
    assert len(docs) > 100

    cleaned, shards = {}, {}
    for name, executor in EXECUTORS.items():
        out = tmp_path / name
        (out / "clean").mkdir(parents=True)
        stats = clean_corpus([raw], out / "clean/corpus.parquet", executor=executor,
                             batch_docs=4, min_chars=100, dedupe=True)
        assert stats.docs_out > 100
        cleaned[name] = _digests(out / "clean")
        if name == "this process":
            texts = [t for batch in iter_text_arrays(out / "clean") for t in batch.to_pylist()]
            train_bpe(texts, 500, 2).save(str(tmp_path / "tokenizer.json"))
        tokenize_corpus(out / "clean", GPT1Tokenizer.load(tmp_path / "tokenizer.json"),
                        out / "shards", val_every=5, shard_tokens=5000, executor=executor)
        shards[name] = _digests(out / "shards")
    assert len(shards["this process"]) > 4  # several shards per split
    for name in EXECUTORS:
        assert cleaned[name] == cleaned["this process"], name
        assert shards[name] == shards["this process"], name


# Functions a worker process runs must be importable there: module level.


def _square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x


def _mark_setup() -> None:
    os.environ["GPT1_TEST_WORKER_SET_UP"] = "yes"


def _was_set_up(_: int) -> str | None:
    return os.environ.get("GPT1_TEST_WORKER_SET_UP")


def test_dask_map_keeps_order_runs_setup_on_workers_and_raises_their_errors() -> None:
    out = list(dask_map(_square_and_pid, range(20), address=None, workers=2))
    assert [value for value, _ in out] == [x * x for x in range(20)]
    assert os.getpid() not in {pid for _, pid in out}
    assert list(dask_map(_was_set_up, range(4), None, 2, worker_setup=_mark_setup)) == \
        ["yes"] * 4
    assert "GPT1_TEST_WORKER_SET_UP" not in os.environ  # never in this process
    with pytest.raises(ValueError, match="three is not allowed"):
        list(dask_map(_fail_on_three, range(6), None, 2))


@contextmanager
def _listener(reply: bytes | None) -> Iterator[str]:
    """A TCP port that takes connections and, to each, says `reply` (None: nothing at all)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    taken: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):  # the listener closed: done
            while True:
                conn, _ = server.accept()
                taken.append(conn)
                if reply is not None:
                    conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in taken:
            conn.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # free, and nothing listens once it is closed


def _first_result(address: str) -> tuple[BaseException | None, float]:
    """What `dask_map` on `address` raised, and after how long; fails the test when it has not
    returned within 60 s (Dask itself would wait for a silent scheduler for ever)."""
    outcome: list[BaseException | None] = []
    started = time.monotonic()

    def first() -> None:
        try:
            next(dask_map(abs, [-1], address, workers=1))
            outcome.append(None)
        except Exception as err:  # the test looks at what it was
            outcome.append(err)

    worker = threading.Thread(target=first, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert outcome, f"dask_map on {address} still waiting after 60 s"
    return outcome[0], time.monotonic() - started


@pytest.mark.parametrize("scheduler", ["nothing listens", "a silent port", "another protocol",
                                       "no port"])
def test_a_scheduler_address_that_does_not_answer_is_one_error_naming_it(
        scheduler: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """executor.address where no Dask scheduler answers: bad input naming executor.address,
    after at most CONNECT_TIMEOUT_SECONDS, however the address fails to answer."""
    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT_SECONDS", 2)
    with contextlib.ExitStack() as stack:
        address, says = {
            "nothing listens": (f"tcp://127.0.0.1:{_closed_port()}", "no Dask scheduler answers"),
            "a silent port": (stack.enter_context(_listener(None)),
                              "no Dask scheduler answers"),
            "another protocol": (stack.enter_context(_listener(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")),
                "answers, but not as a Dask scheduler"),
            "no port": ("scheduler-host", "is not the address of a Dask scheduler"),
        }[scheduler]
        err, seconds = _first_result(address)
    assert isinstance(err, InputError), repr(err)
    assert str(err).startswith("executor.address: ") and says in str(err), str(err)
    assert address in str(err)
    assert seconds < 2 + 10, seconds  # the timeout, and Dask's import


def test_a_scheduler_that_answers_is_used() -> None:
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=None, scheduler_port=0) as cluster:
        parallel.check_scheduler(cluster.scheduler_address, timeout=5)
        assert list(dask_map(abs, [-1, -2, 3], cluster.scheduler_address, workers=1)) == \
            [1, 2, 3]


def test_worker_setup_never_runs_in_this_process() -> None:
    one = ExecutorParams(kind="local", workers=1)
    assert list(executor_map(_was_set_up, range(3), one, worker_setup=_mark_setup)) == [None] * 3
    two = ExecutorParams(kind="local", workers=2)
    assert list(executor_map(_was_set_up, range(3), two, worker_setup=_mark_setup)) == \
        ["yes"] * 3


def test_params_and_descriptions() -> None:
    assert load_params(REPO / "params.yaml").executor == ExecutorParams(kind="local", workers=0)
    with pytest.raises(ValueError, match="names a Dask scheduler: set kind: dask"):
        ExecutorParams(kind="local", address="tcp://127.0.0.1:8786")
    assert [describe(e) for e in EXECUTORS.values()] == list(EXECUTORS)
    assert describe(ExecutorParams(kind="dask", address="tcp://h:8786")) == \
        "the Dask cluster at tcp://h:8786"


def test_stages_do_not_depend_on_the_executor() -> None:
    """The executor changes who computes, not what: no stage lists it among its params, so
    changing it re-runs nothing."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        declared = {dotted for stage in repo.index.stages for dep in stage.deps
                    if isinstance(dep, ParamsDependency) for dotted in dep.params}
    assert "clean.batch_docs" in declared or "clean" in declared
    assert not [key for key in declared if key.split(".")[0] == "executor"]
