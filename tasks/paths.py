"""Where each stage writes (the contracts of DESIGN.md); dvc.yaml declares the same paths."""

from pathlib import Path

from gpt1.config import SHARDS_FOLDER

RAW_CORPUS = Path("data/raw/corpus")
RAW_TASKS = Path("data/raw/tasks")
CLEAN_DIR = Path("data/clean")
BPE_DIR = Path("artifacts/bpe")
SHARDS_DIR = Path(SHARDS_FOLDER)
PRETRAIN_DIR = Path("artifacts/pretrain")
PRETRAIN_CHECKPOINTS = Path("artifacts/checkpoints/pretrain")
PRETRAIN_METRICS = Path("metrics/pretrain.json")
PRETRAIN_LIVE = Path("dvclive/pretrain")
FINETUNE_DIR = Path("artifacts/finetune")
FINETUNE_METRICS = Path("metrics/finetune")
LM_EVAL_METRICS = Path("metrics/lm_eval.json")
REPORT = Path("reports/summary.md")
REPORT_PLOTS = Path("reports/plots")
PRETRAIN_SNAPSHOTS = "snapshots"  # in a pretrained model's folder: step-<8 digits>/ each
PRETRAIN_LSTM_DIR = Path("artifacts/pretrain_lstm")
PRETRAIN_LSTM_CHECKPOINTS = Path("artifacts/checkpoints/pretrain_lstm")
PRETRAIN_LSTM_METRICS = Path("metrics/pretrain_lstm.json")
PRETRAIN_LSTM_LIVE = Path("dvclive/pretrain_lstm")
ABLATION_METRICS = Path("metrics/ablation")  # <variant>/<cell>.json
TRANSFER_METRICS = Path("metrics/transfer")  # <cell>.json
ZERO_SHOT_METRICS = Path("metrics/zero_shot")  # <task>.json
# The pretraining stages' own state: resumable checkpoints, deliberately not DVC outputs (dvc.yaml
# says why), so no `dvc repro` deletes them and no `dvc push` or `dvc status` involves them
STAGE_STATE = (PRETRAIN_CHECKPOINTS, PRETRAIN_LSTM_CHECKPOINTS)
