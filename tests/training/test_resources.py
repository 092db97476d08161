"""gpt1.training.resources: memory and disk needs are checked before anything is allocated or
written."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch

from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.resources import (
    TRAINING_BYTES_PER_PARAMETER,
    check_disk,
    check_memory,
    training_bytes,
)


@pytest.mark.parametrize("cfg", [
    GPT1Config(vocab_size=504, n_ctx=32, n_embd=32, n_layer=2, n_head=2),
    GPT1Config(vocab_size=1000, n_ctx=64, n_embd=48, n_layer=3, n_head=4),
])
def test_parameter_count_is_the_models(cfg: GPT1Config) -> None:
    assert cfg.parameter_count() == GPT1(cfg).num_parameters()


def test_training_needs_at_least_the_weights_and_their_state() -> None:
    cfg = GPT1Config(vocab_size=504, n_ctx=32, n_embd=32, n_layer=2, n_head=2)
    assert training_bytes(cfg, 8) > TRAINING_BYTES_PER_PARAMETER * cfg.parameter_count()
    assert training_bytes(cfg, 16) > training_bytes(cfg, 8)


def test_a_context_no_memory_holds_is_refused_before_allocating() -> None:
    cfg = GPT1Config(vocab_size=504, n_ctx=100_000_000, n_embd=256, n_layer=4, n_head=4)
    with pytest.raises(ValueError, match=r"^model and pretrain\.batch_size: training needs at "
                                         r"least [\d.]+ GB \(25603\.\dM parameters, n_ctx "
                                         r"100000000\), more than the [\d.]+ GB free on cpu$"):
        check_memory(cfg, 32, torch.device("cpu"), "model and pretrain.batch_size")
    check_memory(GPT1Config(vocab_size=504, n_ctx=32, n_embd=32, n_layer=2, n_head=2), 8,
                 torch.device("cpu"), "model")  # a tiny model fits


def test_disk_needs_are_checked_where_the_files_will_go(tmp_path: Path) -> None:
    target = tmp_path / "not" / "made" / "yet"
    check_disk(target, 1, "one byte")
    with pytest.raises(OSError) as info:
        check_disk(target, 10**18, "an exabyte")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert info.value.strerror.startswith("an exabyte need about 1000000000.00 GB, ")
