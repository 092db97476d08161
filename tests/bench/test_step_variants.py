"""`bench.step_variants`: each candidate change to the compiled step computes what the step as
it is computes (its timing needs a GPU: `python -m bench.step_variants --preset paper`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend

from bench import step_variants
from gpt1.model.transformer import GPT1, GPT1Config


@pytest.mark.parametrize("name", ["plain loss", "large loss chunks"])
def test_a_loss_variant_gives_the_chunked_loss_and_gradients(name: str) -> None:
    """On 8,320 rows: the step as it is takes 9 chunks of the LM loss, the large chunks 2."""
    torch.manual_seed(0)
    model = GPT1(GPT1Config(vocab_size=301, n_ctx=16, n_embd=32, n_layer=1, n_head=2,
                            embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0))
    ids = torch.randint(0, 301, (520, 16))
    targets = ids.roll(-1, dims=1)
    targets[0, -4:] = -100  # padding the loss leaves out

    def loss_and_grad() -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad()
        loss = model.lm_loss(ids, targets, ignore_index=-100)
        loss.backward()
        return loss.detach(), model.tokens_embed.weight.grad.clone()

    chunked = loss_and_grad()
    with step_variants.applied(step_variants.VARIANTS[name]):
        varied = loss_and_grad()
    after = loss_and_grad()
    torch.testing.assert_close(varied, chunked, rtol=1e-5, atol=1e-6)
    assert torch.equal(after[0], chunked[0])  # the patch is gone after the variant


def test_an_unknown_variant_is_refused(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        step_variants.main(["--tiny", "--device", "cpu", "--variants", "as is,fp8",
                            "--out", str(tmp_path)])
    assert stop.value.code == 2 and "unknown ['fp8']" in capsys.readouterr().err


def test_the_cudnn_attention_variant_computes_the_same_attention() -> None:
    """Off CUDA no cuDNN kernel serves: the variant's preference falls through to the next
    backend, and attention is what it was (on a GPU, the bench compares the losses)."""
    torch.manual_seed(0)
    model = GPT1(GPT1Config(vocab_size=301, n_ctx=16, n_embd=32, n_layer=1, n_head=2)).eval()
    ids = torch.randint(0, 301, (3, 16))
    before, order = model(ids), torch._C._get_sdp_priority_order()
    with step_variants.applied(step_variants.VARIANTS["cuDNN attention"]):
        assert torch._C._get_sdp_priority_order()[0] == int(SDPBackend.CUDNN_ATTENTION)
        during = model(ids)
    torch.testing.assert_close(during, before)
    assert torch._C._get_sdp_priority_order() == order  # as it was after the variant
