"""Where each stage writes (docs/pipeline.md, "Stages and outputs"); dvc.yaml declares the same
paths."""

from pathlib import Path

from gpt1.config import SHARDS_FOLDER

CODE_DIR = Path("artifacts/code")  # <driver>.json: the code each stage driver runs, fingerprinted
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
FINETUNE_CURVES = Path("metrics/finetune_curves")  # <task>.tsv: dvc.yaml's plot of each task
PREDICTIONS = Path("predictions")  # <task>.parquet: a task's files.predict, scored
LM_EVAL_METRICS = Path("metrics/lm_eval.json")
LM_EVAL_DIR = Path("artifacts/lm_eval")
GENERATED = LM_EVAL_DIR / "generated.json"  # a short text the pretrained model wrote
REPORT = Path("reports/summary.md")
REPORT_HTML = Path("reports/index.html")
REPORT_HEADLINE = Path("reports/headline.txt")  # what `make pipeline` prints at its end
REPORT_PLOTS = Path("reports/plots")
REPORT_RECORD = Path("reports/record.json")  # the report's stage record (tasks.stage.record_path)
# each stage's record of its last successful run (tasks.stage): <stage>.json, or
# <stage>/<key>.json for one of a foreach or matrix stage
STAGE_RECORDS = Path("metrics/stages")
PRETRAIN_SNAPSHOTS = "snapshots"  # in a pretrained model's folder: step-<8 digits>/ each
PRETRAIN_LSTM_DIR = Path("artifacts/pretrain_lstm")
PRETRAIN_LSTM_CHECKPOINTS = Path("artifacts/checkpoints/pretrain_lstm")
PRETRAIN_LSTM_METRICS = Path("metrics/pretrain_lstm.json")
PRETRAIN_LSTM_LIVE = Path("dvclive/pretrain_lstm")
ABLATION_METRICS = Path("metrics/ablation")  # <variant>/<cell>.json
TRANSFER_METRICS = Path("metrics/transfer")  # <cell>.json
ZERO_SHOT_METRICS = Path("metrics/zero_shot")  # <task>.json
# what the report reads and links to, by name: gpt1.reporting.files.RunFiles(**RUN_FILES)
RUN_FILES = {"pretrain": PRETRAIN_METRICS, "pretrain_lstm": PRETRAIN_LSTM_METRICS,
             "pretrain_live": PRETRAIN_LIVE, "lm_eval": LM_EVAL_METRICS, "generated": GENERATED,
             "finetune": FINETUNE_METRICS, "ablation": ABLATION_METRICS,
             "transfer": TRANSFER_METRICS, "zero_shot": ZERO_SHOT_METRICS,
             "stages": STAGE_RECORDS, "pretrain_model": PRETRAIN_DIR,
             "finetune_models": FINETUNE_DIR}
# The pretraining stages' own state: resumable checkpoints, deliberately not DVC outputs (dvc.yaml
# says why), so no `dvc repro` deletes them and no `dvc push` or `dvc status` involves them
STAGE_STATE = (PRETRAIN_CHECKPOINTS, PRETRAIN_LSTM_CHECKPOINTS)
