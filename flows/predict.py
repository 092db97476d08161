"""Flow `predict`: score a table with a task's fine-tuned model, as `gpt1 predict` does, after
bringing `finetune@<task>` (and what it needs) up to date."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_table_artifact

from flows.cli import check_task, parser, run_flow
from flows.pipeline import run_upstream
from gpt1.config import load_params
from gpt1.destinations import check_destination
from gpt1.errors import is_input_error
from tasks.paths import FINETUNE_DIR

SCORED = Path("scored")  # where a flow run writes: scored/<task>/<input stem>.parquet
PREVIEW_ROWS = 20  # rows of the predictions shown in the UI


def _retry_unless_bad_input(task, task_run, state) -> bool:  # Prefect's retry_condition_fn
    try:
        state.result()
    except Exception as err:
        return not is_input_error(err)
    return False


@task(task_run_name="predict-{name}", retry_condition_fn=_retry_unless_bad_input)
def score(name: str, model: Path, source: Path, out: Path) -> int:
    """`gpt1 predict` in this process; bad input (a column, a row) fails without a retry."""
    from gpt1.jobs.predict import predict_file

    return predict_file(model, source, out)


def _preview(out: Path, rows: int) -> None:
    """The first rows of the predictions, as an artifact the UI shows."""
    from gpt1.downstream.tables import iter_batches

    first = next(iter_batches(out, batch_rows=PREVIEW_ROWS), None)
    table = [] if first is None else first.table.to_pylist()
    create_table_artifact(table=table, key="gpt1-predictions",
                          description=f"the first {len(table)} of {rows:,} rows of {out}")


@flow(name="predict", log_prints=True)
def predict(task: str, input: str) -> str:
    """Score `input` (a CSV, TSV, JSON Lines or Parquet file; relative paths from the checkout
    this runs in) with the fine-tuned model of `task`, into `scored/<task>/<input's
    name>.parquet` (a later run on a file of that name replaces it); first `finetune@<task>`
    is brought up to date as `dvc repro` would. Returns the path written. Its parameters are
    the task and the file only: whoever may trigger the deployment chooses no path written."""
    root = Path.cwd()
    check_task(root, task)
    flows = load_params(root / "params.yaml").flows
    source = Path(input) if Path(input).is_absolute() else root / input
    dest = root / SCORED / task / f"{source.stem}.parquet"
    check_destination(dest, option="the flow's predictions", inputs=(source,), force=True)
    run_upstream(root, f"finetune@{task}")
    rows = score.with_options(retries=flows.retries, retry_delay_seconds=flows.retry_delay_seconds)(
        task, root / FINETUNE_DIR / task, source, dest)
    _preview(dest, rows)
    return str(dest)


if __name__ == "__main__":
    command = parser("flows.predict", __doc__)
    command.add_argument("task", help="a task of the registry (params.yaml `tasks`)")
    command.add_argument("input", help="the table to score (CSV, TSV, JSON Lines, Parquet); "
                                       "written to scored/<task>/<input's name>.parquet")
    args = command.parse_args()
    run_flow(lambda: predict(args.task, args.input),
             lambda: check_task(Path.cwd(), args.task))
