"""Which of dvc.yaml's per-task stages exist: those params request, for tasks with data.

DVC's `foreach` and `matrix` cannot filter, so the lists they iterate over are resolved here from
params (`resolve`) and written to `dag.yaml` (`DAG_FILE`), which dvc.yaml loads beside
params.yaml: `finetune.tasks: all` becomes the registry's tasks whose data is under
`ingest.root`; `predict@` exists for a fine-tuned task whose entry names `files.predict`; the
analyses for their tasks that are fine-tuned; the LSTM control's pretraining only where Table 5
asks for its row. What is left out, and why, is written beside them for the report.

`gpt1 dag` writes the file, as do `gpt1 set`, `gpt1 preset`, `gpt1 task add`, `make pipeline`
and the flows before they run anything; a stage run by DVC checks it (`check`) and, where
params.yaml was edited by hand since, writes it anew and stops: DVC read the stale one."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpt1.atomic import write_text
from gpt1.config import PREDICT_SPLIT, Params, ParamsError, TaskParams, load_params
from gpt1.data_root import check_data_root

DAG_FILE = Path("dag.yaml")
LSTM_MODEL = "artifacts/pretrain_lstm"  # stage pretrain_control@lstm's model, as dvc.yaml says
TRANSFORMER_MODEL = "artifacts/pretrain"
HEADER = """\
# Written by `gpt1 dag` from params.yaml: do not edit (docs/pipeline.md, "Which stages exist").
# dvc.yaml's per-task stages iterate over these lists; `not_run` is what params name that is
# no stage, and why. gpt1 set / preset / task add, make pipeline and the flows rewrite it; a
# stage started on a stale one rewrites it and asks for `dvc repro` again.
"""


@dataclass(frozen=True)
class Ablation:
    variants: list[str]
    tasks: list[str]


@dataclass(frozen=True)
class Dag:
    """The items of dvc.yaml's per-task stage groups, and the stages params name that are none
    (stage address -> why not)."""

    finetune: list[str]
    predict: list[str]
    control: list[str]  # ["lstm"] where the LSTM control is pretrained, else []
    ablation: Ablation
    transfer: list[str]
    zero_shot: list[str]
    # the model folder the LSTM's cells read: the Transformer's where there is no LSTM (DVC has
    # no optional dependency: a stage listing it twice depends on it once)
    control_model: str
    not_run: dict[str, str] = field(default_factory=dict)

    def stages(self) -> list[str]:
        """Every stage dvc.yaml declares with these lists, by address, in the order they run."""
        return ["code", "ingest", "clean", "bpe", "tokenize", "pretrain",
                *(f"pretrain_control@{trunk}" for trunk in self.control),
                *(f"finetune@{task}" for task in self.finetune),
                *(f"predict@{task}" for task in self.predict), "lm_eval",
                *(f"ablation@{variant}-{task}" for variant in self.ablation.variants
                  for task in self.ablation.tasks),
                *(f"transfer@{task}" for task in self.transfer),
                *(f"zero_shot@{task}" for task in self.zero_shot), "report"]


def _data_missing(task: TaskParams, root: Path) -> str | None:
    """Why `task` cannot run on the data under `root` (None: its files are there)."""
    from gpt1.downstream.readers import missing_files  # pyarrow's import, only for `all`

    missing = missing_files(task, root)
    if not missing:
        return None
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return f"data not found at {missing[0]}{more}"


def _fine_tuned(params: Params, root: Path, not_run: dict[str, str]) -> list[str]:
    """The tasks fine-tuned: `finetune.tasks` as listed (ingest fails on one without data), or
    under `all` each registry task with data (under `ingest.root`, relative to `root`); each
    other registry task's reason into `not_run`."""
    chosen = []
    for name, task in params.tasks.items():
        if params.finetune.tasks != "all" and name not in params.finetune.tasks:
            not_run[f"finetune@{name}"] = "not in finetune.tasks"
        elif (params.finetune.tasks == "all"
              and (missing := _data_missing(task, root / params.ingest.root)) is not None):
            not_run[f"finetune@{name}"] = missing
        else:
            chosen.append(name)
    return chosen


def _analysed(group: str, asked: list[str], tuned: list[str], not_run: dict[str, str],
              addresses: list[str] | None = None) -> list[str]:
    """The tasks of `analysis.<group>.tasks` (`asked`) that are fine-tuned; each other one's
    stages (`addresses`, by default `<group>@<task>`) into `not_run`."""
    for task in asked:
        if task not in tuned:
            reason = (f"task {task} is not fine-tuned ({not_run.get(f'finetune@{task}')}): the "
                      "analyses read the tasks ingest wrote")
            for address in addresses or [f"{group}@{task}"]:
                not_run[address.format(task=task)] = reason
    return [task for task in asked if task in tuned]


def resolve(params: Params, root: Path = Path()) -> Dag:
    """The per-task stages `params` ask for (docstring of this module), for the checkout at
    `root` (where a relative `ingest.root` lies)."""
    not_run: dict[str, str] = {}
    tuned = _fine_tuned(params, root, not_run)
    analysis = params.analysis
    variants = list(analysis.ablation.variants)
    ablation_tasks = _analysed("ablation", list(analysis.ablation.tasks), tuned, not_run,
                               [f"ablation@{v}-{{task}}" for v in variants])
    control = []
    if "lstm" in variants:
        if params.pretrain.released:
            reason = (f"pretrain.source is {params.pretrain.source}: the LSTM control is "
                      "pretrained only beside a Transformer pretrained here, on the same shards")
            not_run["pretrain_control@lstm"] = reason
            for task in ablation_tasks:
                not_run[f"ablation@lstm-{task}"] = reason
            variants.remove("lstm")
        elif ablation_tasks:
            control = ["lstm"]
    return Dag(finetune=tuned,
               predict=[t for t in tuned if PREDICT_SPLIT in params.tasks[t].files],
               control=control, ablation=Ablation(variants, ablation_tasks),
               transfer=_analysed("transfer", list(analysis.transfer.tasks), tuned, not_run),
               zero_shot=_analysed("zero_shot", list(analysis.zero_shot.tasks), tuned, not_run),
               control_model=LSTM_MODEL if control else TRANSFORMER_MODEL, not_run=not_run)


def render(dag: Dag) -> str:
    """dag.yaml's text for `dag`: under the key `dag`, one flow-style line per list (so that a
    change shows as one line in a diff)."""
    body = asdict(dag)
    lines = [HEADER.rstrip("\n"), "dag:"]
    for key, value in body.items():
        if key == "not_run":
            lines.append("  not_run:" + ("" if value else " {}"))
            lines += [f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()]
        elif isinstance(value, dict):
            lines.append(f"  {key}:")
            lines += [f"    {k}: {json.dumps(v)}" for k, v in value.items()]
        else:
            lines.append(f"  {key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def write(root: Path, params: Params | None = None) -> bool:
    """Write `root`'s dag.yaml from its params.yaml (or `params`, already loaded) unless it holds
    that already. Returns whether it changed."""
    params = load_params(root / "params.yaml") if params is None else params
    text = render(resolve(params, root))
    path = root / DAG_FILE
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    write_text(path, text)
    return True


def prepare(root: Path, params: Params) -> bool:
    """`write`, once the data root holds nothing DVC cannot hash (`check_data_root`): for what
    hands the checkout to DVC next (`gpt1 dag`, the flows), where a FIFO would hang it; not for
    a stage's own `check`, which would walk the data root at every stage's start."""
    check_data_root(root / params.ingest.root)
    return write(root, params)


def check(root: Path, params: Params) -> None:
    """ParamsError, after writing dag.yaml anew, where `root`'s dag.yaml is not what `params`
    resolve to: DVC declared the stages from the old one, so what it runs now is not what params
    ask for."""
    if write(root, params):
        raise ParamsError(f"{DAG_FILE}: it did not list the stages params.yaml asks for (edited "
                          f"by hand since `gpt1 dag`?); written anew: run `dvc repro` again")
