"""The paper's figures the report sets ours beside (Radford et al. 2018)."""

from __future__ import annotations

PAPER_GLUE = 72.8  # the paper's GLUE score (Table 4; test sets, nine tasks)

# Table 5 ("Analysis of various model ablations on different tasks"): variant -> registry task
# -> the paper's figure (CoLA mc, SST-2 acc, MRPC F1, STS-B pc, QQP F1, MNLI acc, QNLI acc, RTE
# acc), each model fine-tuned on the task's full training set; then each variant's unweighted
# average over those eight columns.
PAPER_TABLE5: dict[str, dict[str, float]] = {
    "full": {"cola": 45.4, "sst2": 91.3, "mrpc": 82.3, "stsb": 82.0, "qqp": 70.3, "mnli": 81.8,
             "qnli": 88.1, "rte": 56.0},
    "no_pretrain": {"cola": 18.9, "sst2": 84.0, "mrpc": 79.4, "stsb": 30.9, "qqp": 65.5,
                    "mnli": 75.7, "qnli": 71.2, "rte": 53.8},
    "no_aux": {"cola": 47.9, "sst2": 92.0, "mrpc": 84.9, "stsb": 83.2, "qqp": 69.8, "mnli": 81.1,
               "qnli": 86.9, "rte": 54.4},
    "lstm": {"cola": 30.3, "sst2": 90.5, "mrpc": 83.2, "stsb": 71.8, "qqp": 68.1, "mnli": 73.7,
             "qnli": 81.1, "rte": 54.6},
}
PAPER_TABLE5_AVERAGE = {"full": 74.7, "no_pretrain": 59.9, "no_aux": 75.0, "lstm": 69.1}
