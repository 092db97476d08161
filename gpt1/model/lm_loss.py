"""Cross-entropy through the LM head, a chunk of rows at a time, without the full logits.

`F.cross_entropy(hidden @ weight.T, targets)` materialises logits of (rows x vocabulary) floats,
their log-softmax and, in backward, a gradient of the same size: for the paper's sizes (64 x 512
tokens, 40,478 words) 5.3 GB each, and on any hardware passes over memory that cost more than the
head's matmul. Here each chunk's logits are made, turned into the chunk's loss and into the
gradient of the loss with respect to them (softmax minus one-hot), multiplied out into the
gradients of `hidden` and `weight`, and dropped: the same three matmuls, the same result, and
only a chunk's logits ever in memory. Backward then scales the stored gradients.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Rows per chunk: fewer than this and the matmuls run slower; 1,024 x 8,000 fp32 logits are 33 MB.
CHUNK_ROWS = 1024
# The head's rows are padded to a multiple of this for the logits' matmul, which runs slower at
# GPT-1's odd vocabularies (8,005 or 40,478 rows).
# Measured: bench/results/findings.md ("Loss head: vocabulary rows padded to a multiple of 64").
PAD_ROWS = 64


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                ignore_index: int, chunk_rows: int) -> torch.Tensor:
        rows = hidden.reshape(-1, hidden.shape[-1])
        targets = targets.reshape(-1)
        kept = targets != ignore_index
        # autocast does not reach inside a Function's forward: compute in the dtype it would pick
        dtype = torch.get_autocast_dtype(hidden.device.type) \
            if torch.is_autocast_enabled(hidden.device.type) else hidden.dtype
        w = weight.to(dtype)
        w_padded = F.pad(w, (0, 0, 0, -len(w) % PAD_ROWS))
        loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_rows = torch.empty(rows.shape, dtype=dtype, device=hidden.device)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        for start in range(0, rows.shape[0], chunk_rows):
            h = rows[start:start + chunk_rows].to(dtype)
            t, k = targets[start:start + chunk_rows], kept[start:start + chunk_rows]
            safe_t = torch.where(k, t, 0)[:, None]
            logits = (h @ w_padded.T)[:, :len(w)].float()
            target_logits = logits.gather(1, safe_t)
            # the softmax in the logits' memory, one pass each: shift, exp, normalise
            peak = logits.amax(dim=1, keepdim=True)
            total = logits.sub_(peak).exp_().sum(dim=1, keepdim=True)
            loss += ((peak + total.log() - target_logits).squeeze(1) * k).sum()
            grad = logits.div_(total)
            grad.scatter_add_(1, safe_t, torch.full_like(total, -1.0))  # softmax - one-hot
            grad.mul_(k[:, None])
            grad = grad.to(dtype)
            grad_rows[start:start + chunk_rows] = grad @ w
            if dtype == torch.float32:
                grad_weight.addmm_(grad.T, h)
            else:
                grad_weight += (grad.T @ h).float()
        count = kept.sum()  # 0 gives nan, as F.cross_entropy does
        ctx.save_for_backward(grad_rows, grad_weight, count)
        ctx.shapes = (hidden.shape, hidden.dtype, weight.dtype)
        return loss / count

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_rows, grad_weight, count = ctx.saved_tensors
        hidden_shape, hidden_dtype, weight_dtype = ctx.shapes
        scale = grad_loss / count
        return ((grad_rows * scale).to(hidden_dtype).view(hidden_shape),
                (grad_weight * scale).to(weight_dtype), None, None, None)


def whole_logits_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor,
                               targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """`linear_cross_entropy`'s value from the whole logits at once: where there are no
    gradients to keep, or where torch.compile is left to fuse the logits into the loss."""
    return F.cross_entropy(F.linear(hidden, weight).flatten(0, -2).float(), targets.flatten(),
                           ignore_index=ignore_index)


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         ignore_index: int = -100, chunk_rows: int = CHUNK_ROWS) -> torch.Tensor:
    """Mean cross-entropy (in fp32) of `targets` (...) under the logits `hidden (..., d) @
    weight.T (vocab, d)`, rows whose target is `ignore_index` left out: `F.cross_entropy` on
    those logits, computed a chunk at a time. Without gradients it is `F.cross_entropy` itself."""
    if not (torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)):
        return whole_logits_cross_entropy(hidden, weight, targets, ignore_index)
    return _LinearCrossEntropy.apply(hidden, weight, targets, ignore_index, chunk_rows)
