"""Task heads on a pretrained trunk (paper §3.2-3.3): a linear layer on the final `<classify>`
state, and the auxiliary language-modelling loss over the task text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from gpt1.model.dropout import Dropout
from gpt1.model.lm_loss import whole_logits_cross_entropy
from gpt1.model.trunk import Trunk

PADDING_TARGET = -100  # the target of a padding position in the LM loss, which ignores it


class HeadFamily(Protocol):
    """What the head needs of a task family (`gpt1.downstream.families.TaskFamily` is one): how
    many sequences an example has, how its last states become outputs, and whether it scores."""

    scores: bool

    def check_outputs(self, n_outputs: int) -> None: ...

    def sequences_per_example(self, examples: list[list[list[int]]]) -> int: ...

    def read_out(self, last: torch.Tensor, per_example: int,
                 head: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor: ...

    def output_width(self, n_outputs: int, per_example: int) -> int: ...


class TaskModel(nn.Module):
    """The pretrained trunk, dropout, and a linear head on the sequences' last (`<classify>`)
    states, read as the task's family reads them (`TaskFamily.read_out`): per example, logits
    over labels, a score (regression: one output), or, for multiple choice, one scalar per
    choice, the logits of a softmax over the choices."""

    def __init__(self, trunk: Trunk, family: HeadFamily, n_outputs: int, dropout: float,
                 seed: int) -> None:
        super().__init__()
        self.family = family
        self.family.check_outputs(n_outputs)
        self.trunk = trunk
        self.dropout = Dropout(dropout)
        self.head = nn.Linear(trunk.config.n_embd, n_outputs)
        # its own generator: the head is a function of `seed` alone, whatever ran before
        nn.init.normal_(self.head.weight, std=trunk.config.initializer_range,
                        generator=torch.Generator().manual_seed(seed))
        nn.init.zeros_(self.head.bias)

    @property
    def regression(self) -> bool:
        """A score (STS-B's similarity), trained with MSE on the score itself: the one output
        of a family whose tasks may be scored."""
        return self.family.scores and self.head.out_features == 1

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor,
                per_example: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs of the B examples whose `per_example` sequences are consecutive rows of `ids`
        (B·m, T): (B, n_outputs), or (B, m) for multiple choice; and the hidden states."""
        if ids.shape[0] % per_example:
            raise ValueError(f"{ids.shape[0]} sequences are not examples of {per_example}")
        hidden = self.trunk(ids)
        last = hidden[torch.arange(ids.shape[0], device=ids.device), lengths - 1]
        outputs = self.family.read_out(last, per_example, lambda x: self.head(self.dropout(x)))
        return outputs, hidden

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """L2: cross-entropy over labels (or choices), or MSE on the score for regression."""
        if self.regression:
            return F.mse_loss(outputs.squeeze(1).float(), targets)
        return F.cross_entropy(outputs.float(), targets)


def lm_loss_on_text(model: TaskModel, hidden: torch.Tensor, ids: torch.Tensor,
                    lengths: torch.Tensor) -> torch.Tensor:
    """L1: the mean loss of predicting every real token after the first, padding left out.

    On the CPU the real rows are selected, so that the LM head's matmuls skip the padding (with
    GPT-1's 40,478 words they are most of the cost). Elsewhere, and under torch.compile, the
    padding's targets are ignored instead: a selection's size depends on the data, which syncs
    a GPU with the host every step and breaks a compiled step's graph. Compiled (for batches of
    varying shapes), the loss is taken from the whole logits: the LM head's loss a chunk of
    rows at a time loops over a number of rows that varies by batch, and would recompile the
    step for every new one."""
    padding = torch.arange(1, ids.shape[1], device=ids.device)[None, :] >= lengths[:, None]
    if ids.device.type == "cpu" and not torch.compiler.is_compiling():
        return selected_rows_loss(model.trunk, hidden, ids, padding)
    return ignored_padding_loss(model.trunk, hidden, ids, padding)


def selected_rows_loss(trunk: Trunk, hidden: torch.Tensor, ids: torch.Tensor,
                       padding: torch.Tensor) -> torch.Tensor:
    real = ~padding
    return trunk.lm_head_loss(hidden[:, :-1][real], ids[:, 1:][real])


def ignored_padding_loss(trunk: Trunk, hidden: torch.Tensor, ids: torch.Tensor,
                         padding: torch.Tensor) -> torch.Tensor:
    targets = ids[:, 1:].masked_fill(padding, PADDING_TARGET)
    if torch.compiler.is_compiling():
        return whole_logits_cross_entropy(hidden[:, :-1], trunk.lm_head_weight, targets,
                                          PADDING_TARGET)
    return trunk.lm_head_loss(hidden[:, :-1], targets, ignore_index=PADDING_TARGET)
