"""`python -m bench.generate` at tiny sizes: it runs both sides and writes its table; its check
(our cached logits against transformers' within a tolerance, greedy ids wherever the reference
is no near tie) passes on the same weights, fails on wrong ones or a wrong cache, and lets a
near tie go either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import OpenAIGPTLMHeadModel

from bench import generate
from gpt1.model.transformer import GPT1, KVCache

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_generate_bench_writes_its_table(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = generate.main(["--tiny", "--repeats", "1", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    # what the figures were measured on heads the printed tables, as torch names it
    capability = torch.backends.cpu.get_cpu_capability()
    assert result["machine"]["cpu_capability"] == capability
    printed = capsys.readouterr().out
    bf16 = " (native bf16)" if result["machine"]["native_bf16"] else ""
    threads = torch.get_num_threads()
    assert (f" with {capability} kernels{bf16}, {threads} torch thread"
            f"{'s' if threads != 1 else ''}; ") in printed.split("\n## ")[0]
    assert path == tmp_path / "generate.json"
    (table,) = result["tables"]
    assert table["columns"] == ["model", "dtype", "new tokens/s", "ratio"]
    ours, hf = table["rows"]
    assert ours["model"].startswith("ours") and hf["model"].startswith("transformers")
    assert ours["new tokens/s"] > 0 and hf["new tokens/s"] > 0
    assert ours["ratio"] == pytest.approx(ours["new tokens/s"] / hf["new tokens/s"])
    assert ours["ratio"] > 0 and hf["ratio"] == 1.0
    settings = result["settings"]
    assert settings["init_std"] == 0.2 and settings["rtol"] == 1e-3
    assert 0 <= settings["max_abs_delta_logit"] <= 1e-3 * settings["max_abs_logit"]
    assert 0 <= settings["near_tie_steps"] < generate.TINY_NEW_TOKENS
    assert settings["transformers_agreed_steps"] == generate.TINY_NEW_TOKENS  # on the CPU
    assert settings["distinct_ids"] > 3  # the text varies: agreeing on it says something
    assert len(settings["tokens_per_second"]["ours"]) == 1
    notes = "\n".join(table["notes"])
    assert "N(0, 0.2)" in notes and "within 0.001 x max |logit|" in notes
    assert f"{settings['near_tie_steps']} of {generate.TINY_NEW_TOKENS} steps" in notes
    assert "ratio >= 5x" in notes


def tiny_pair() -> tuple[GPT1, OpenAIGPTLMHeadModel, list[int]]:
    """The tiny bench's model, transformers' copy of it and a prompt."""
    cfg = generate.make_config(None, True, generate.TINY_PROMPT_TOKENS + generate.TINY_NEW_TOKENS)
    torch.manual_seed(0)
    model = GPT1(cfg).eval()
    prompt = torch.randint(0, cfg.vocab_size, (generate.TINY_PROMPT_TOKENS,),
                           generator=torch.Generator().manual_seed(0)).tolist()
    return model, generate.transformers_model(model), prompt


LOGITS_DIFFER = r"logits differ at step {}: max \|Δlogit\| \S+ > tolerance \S+ \(0.001 x max"


def test_one_wrong_weight_fails_the_check() -> None:
    model, hf, prompt = tiny_pair()
    generate.verify(model, hf, prompt, generate.TINY_NEW_TOKENS)  # the same weights pass
    with torch.no_grad():
        hf.transformer.h[1].mlp.c_proj.weight[0, 0] += 0.5
    with pytest.raises(AssertionError, match=LOGITS_DIFFER.format(0)):
        generate.verify(model, hf, prompt, generate.TINY_NEW_TOKENS)


def test_a_cache_that_misplaces_new_tokens_fails_the_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model, hf, prompt = tiny_pair()
    # every decode step at position 0 (its position embedding, its slot of the cache, what it
    # attends to): the prompt's step is right, the next is not
    at = KVCache.at
    monkeypatch.setattr(KVCache, "at", lambda self, position: at(self, torch.zeros_like(position)))
    with pytest.raises(AssertionError, match=LOGITS_DIFFER.format(1)):
        generate.verify(model, hf, prompt, generate.TINY_NEW_TOKENS)


# three steps over four tokens; at step 1 tokens 1 and 2 tie
REFERENCE = torch.tensor([[0.0, 4.0, 1.0, -2.0],
                          [1.0, 3.0, 3.0, 0.0],
                          [2.0, 0.0, -1.0, 5.0]])


def test_a_near_tie_may_go_either_way() -> None:
    assert generate.near_ties(REFERENCE) == [False, True, False]
    ours = REFERENCE.clone()
    ours[1, 2] += 0.002  # within 0.001 x 3.0, and it now ranks token 2 first
    assert generate.check_logits(ours, REFERENCE) == pytest.approx(0.002, rel=1e-4)
    generate.check_greedy([1, 2, 3], REFERENCE, [False, True, False])
    assert generate.agreed_steps([1, 1, 0], [1, 2, 3], [False, True, False]) == 1
    assert generate.agreed_steps([1, 2, 3], [1, 2, 3], [False, True, False]) == 3


def test_logits_beyond_the_tolerance_fail_naming_the_step() -> None:
    ours = REFERENCE.clone()
    ours[2, 0] += 0.006  # 0.001 x 5.0 allowed at step 2
    with pytest.raises(AssertionError, match=r"step 2: max \|Δlogit\| 0.006 > tolerance 0.005 "):
        generate.check_logits(ours, REFERENCE)


def test_differing_greedy_ids_where_no_tie_fail() -> None:
    with pytest.raises(AssertionError, match="step 0, not a near tie: 0 against the reference's"):
        generate.check_greedy([0, 1, 3], REFERENCE, [False, True, False])
    with pytest.raises(AssertionError, match="step 2, not a near tie: 0 against 3"):
        generate.timed(lambda: [1, 2, 0],
                       lambda ids: generate.agreed_steps(ids, [1, 2, 3], [False, True, False]))


def test_the_check_runs_in_full_fp32_whatever_a_training_run_set(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A training run turns TF32 on for CUDA (configure_backends), which alone moves logits
    beyond the tolerance on an H200: the check turns it off inside, and back on after."""
    seen = []
    verify = generate.verify

    def spy(*args: object) -> generate.Agreement:
        seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
        return verify(*args)

    monkeypatch.setattr(generate, "verify", spy)
    cfg = generate.make_config(None, tiny=True, length=16)
    # torch's backend flags are properties of module objects, which monkeypatch cannot restore
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        generate.run(cfg, 4, 12, torch.device("cpu"), repeats=1)
        assert seen == [(False, False)]
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
