"""The `gpt1` command."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from gpt1.command_errors import input_errors
from gpt1.destinations import check_destination
from gpt1.errors import InputError
from gpt1.presets.edit import apply_preset, available, parse_assignments, set_keys
from gpt1.team import team_app

FORCE_HELP = "replace --out even if it holds files this command does not write"
PLOT_FORMATS = (".png", ".svg", ".pdf")  # what `gpt1 sweep --show --plot` draws into

# click's plain help pages (for the sub-groups too): Rich's tables cut long option names with
# an ellipsis and squeeze the help into a narrow column at 80 columns
app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="GPT-1 pretraining and fine-tuning pipeline.")


@app.callback()
def _root() -> None:
    """GPT-1 pretraining and fine-tuning pipeline (run stages with `dvc repro`)."""


def _refresh_dag(params: Path) -> None:
    """Write dag.yaml anew beside a pipeline's params.yaml just edited: the stages DVC declares
    follow params at once (gpt1.dag)."""
    from gpt1 import dag
    from gpt1.config import load_params

    if params.name == "params.yaml" and (params.parent / "dvc.yaml").is_file():
        dag.write(params.parent, load_params(params))


@app.command("dag")
def write_dag(
    params: Annotated[Path, typer.Option(help="the pipeline's params file")] = Path("params.yaml"),
) -> None:
    """Write dag.yaml: the per-task stages params.yaml asks for.

    dvc.yaml declares them; make pipeline, the flows, gpt1 set, preset and task add write it
    themselves."""
    from gpt1 import dag
    from gpt1.config import load_params

    with input_errors():
        loaded = load_params(params)
        changed = dag.prepare(params.parent, loaded)
        stages = dag.resolve(loaded, params.parent).stages()
    typer.echo(f"{params.parent / dag.DAG_FILE}: {'written' if changed else 'up to date'}; "
               f"{len(stages)} stages: {', '.join(stages)}")


@app.command()
def preset(
    name: Annotated[str, typer.Argument(help=f"one of {available()}")],
    params: Annotated[Path, typer.Option(help="the params file to rewrite")] = Path("params.yaml"),
) -> None:
    """Overlay a preset onto params.yaml (comments are kept).

    The preset sets the model's size and the training knobs."""
    with input_errors():
        apply_preset(name, params)
        _refresh_dag(params)
    typer.echo(f"{params}: preset {name!r} applied")


@app.command("set")
def set_params(
    assignments: Annotated[list[str], typer.Argument(help="KEY=VALUE, e.g. ingest.root=../data")],
    params: Annotated[Path, typer.Option(help="the params file to rewrite")] = Path("params.yaml"),
) -> None:
    """Set params.yaml keys (values are YAML).

    Every value is validated before anything is written."""
    with input_errors():
        set_keys(params, parse_assignments(assignments))
        _refresh_dag(params)
    typer.echo(f"{params}: set {', '.join(assignments)}")


@app.command()
def generate(
    model: Annotated[Path, typer.Option(help="a directory with config.json, model.safetensors "
                                             "and tokenizer.json (e.g. artifacts/pretrain)")],
    prompt: Annotated[str, typer.Option(help="text to continue")],
    max_tokens: Annotated[int, typer.Option(min=1, help="tokens to generate")] = 50,
    temperature: Annotated[float, typer.Option(min=0.0, help="0 picks the likeliest token")] = 1.0,
    top_k: Annotated[int | None, typer.Option(min=1, help="sample among the k likeliest")] = 40,
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1,
                                      help="random seed of the sampling")] = 0,
) -> None:
    """Continue a prompt with a pretrained model.

    Prints the prompt and the continuation."""
    from gpt1.corpus.text import TextCleaner
    from gpt1.model.generate import sample
    from gpt1.model.registry import load_language_model

    with input_errors():
        lm = load_language_model(model)
        prompt_ids = lm.tokenizer.encode(TextCleaner()(prompt))
        new_ids = sample(lm.model, prompt_ids, max_tokens, temperature, top_k, seed)
    typer.echo(lm.tokenizer.decode(prompt_ids + new_ids))


@app.command("export-hf")
def export_hf(
    model: Annotated[Path, typer.Option(help="our model directory: pretrained (e.g. "
                                             "artifacts/pretrain) or fine-tuned "
                                             "(artifacts/finetune/<task>)")],
    out: Annotated[Path, typer.Option(help="the HuggingFace directory to write")],
    force: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
) -> None:
    """Write a model as a HuggingFace (transformers) directory.

    from_pretrained loads it: a pretrained model as OpenAIGPTLMHeadModel; a fine-tuned
    classification or entailment model as OpenAIGPTForSequenceClassification (its head's bias folded
    into the bias-free score, checked to 1e-4 on probe sequences, refused where it does not fold),
    whose tokenizer adds <start> and <classify> so that pipeline("text-classification") reads
    cleaned text; a multiple-choice model as OpenAIGPTDoubleHeadsModel. A similarity model is
    refused: no transformers class computes its head. The tokenizer loads with AutoTokenizer."""
    from gpt1.interop import hf

    with input_errors():
        check_destination(out, inputs=(model,), force=force, folder=True)
        hf.export_hf(model, out, force)
    typer.echo(f"{out}: written (openai-gpt)")


@app.command()
def predict(
    model: Annotated[Path, typer.Option(help="a fine-tuned model folder "
                                             "(artifacts/finetune/<task>)")],
    input: Annotated[Path, typer.Option("--input", help="the rows to score: CSV, TSV, JSON Lines "
                                                        "or Parquet")],
    out: Annotated[Path, typer.Option(help="where to write the rows with their predictions "
                                           "(format by extension)")],
    input_format: Annotated[str | None, typer.Option(help="csv | tsv | jsonl | parquet "
                                                          "(default: from the extension)")] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="examples per forward pass")] = 32,
    device: Annotated[str, typer.Option(help="auto (a GPU when there is one) | cpu | cuda | "
                                             "cuda:N")] = "auto",
    precision: Annotated[str, typer.Option(
        help="fp32 | bf16 (bf16 autocast: faster on CUDA or a CPU with AMX, slower with "
             "AVX512-BF16 alone, refused on other CPUs) | auto (bf16 on CUDA and AMX, else fp32)")
    ] = "fp32",
    force: Annotated[bool, typer.Option(help="replace --out if it exists")] = False,
) -> None:
    """Score a table with a fine-tuned model.

    Writes its rows with the predicted label and each label's probability (the score for
    regression, the chosen candidate for multiple choice)."""
    from gpt1.jobs.predict import predict_file

    with input_errors():
        check_destination(out, inputs=(input, model), force=force)
        rows = predict_file(model, input, out, input_format, batch_size=batch_size,
                            device=device, precision=precision, native_bf16_only=True,
                            format_option="--input-format")
    typer.echo(f"{out}: {rows:,} rows predicted")


@app.command("import-hf")
def import_hf(
    hf_dir: Annotated[Path, typer.Option("--hf", help="a HuggingFace openai-gpt directory "
                                                      "(config.json and model weights)")],
    out: Annotated[Path, typer.Option(help="our model directory to write")],
    seed: Annotated[int, typer.Option(help="seed of new special-token rows")] = 0,
    force: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
) -> None:
    """Convert a HuggingFace openai-gpt checkpoint to ours.

    The checkpoint may be bare or have the LM head or double heads. Its tokenizer comes along,
    GPT-1's special tokens after it."""
    from gpt1.interop.source import import_hf

    with input_errors():
        check_destination(out, inputs=(hf_dir,), force=force, folder=True)
        ignored = import_hf(hf_dir, out, seed, force)
    if ignored:
        typer.echo(f"ignored (no place in our LM): {', '.join(ignored)}")
    typer.echo(f"{out}: written")


@app.command("import-openai")
def import_openai(
    release: Annotated[Path, typer.Option(help="OpenAI's released model/ folder: "
                                               "params_shapes.json, params_0.npy.., "
                                               "encoder_bpe_40000.json, vocab_40000.bpe")],
    out: Annotated[Path, typer.Option(help="the model directory to write")],
    n_ctx: Annotated[int, typer.Option(min=1, help="positions to keep (at most 512)")] = 512,
    n_head: Annotated[int, typer.Option(min=1, help="attention heads (not in the release)")] = 12,
    seed: Annotated[int, typer.Option(help="seed of the new special-token rows")] = 0,
    force: Annotated[bool, typer.Option(help=FORCE_HELP)] = False,
) -> None:
    """Import OpenAI's released GPT-1 weights and BPE.

    Writes them as a model directory, which generate loads."""
    from gpt1.interop.openai import import_release

    with input_errors():
        check_destination(out, inputs=(release,), force=force, folder=True)
        cfg = import_release(release, out, n_ctx=n_ctx, n_head=n_head, seed=seed, force=force)
    typer.echo(f"{out}: written ({cfg.n_layer} layers x {cfg.n_embd}, {cfg.n_head} heads, "
               f"{cfg.vocab_size} tokens, n_ctx {cfg.n_ctx})")


@app.command()
def sweep(
    task: Annotated[str, typer.Argument(help="a fine-tuned task of params.yaml")],
    grid: Annotated[list[str] | None, typer.Argument(
        help="KEY=VALUE,VALUE... per knob of finetune.train, e.g. lr=0.0005,0.001 "
             "epochs=2,3")] = None,
    show: Annotated[bool, typer.Option(
        help="show the task's experiments side by side instead")] = False,
    plot: Annotated[Path | None, typer.Option(
        help="with --show: draw them too, into this file (.png, .svg, .pdf)")] = None,
    params: Annotated[Path, typer.Option(help="the pipeline's params file")] = Path("params.yaml"),
) -> None:
    """Sweep a task's fine-tuning knobs as DVC experiments.

    Queues one DVC experiment of finetune@<task> per point of the grid (dvc exp run --queue,
    its -S lists expanded by DVC) and prints the command that runs the queue. With --show,
    a table of the task's experiments: each point's dev score (median [min, max] over seeds)
    beside the majority class, the best marked; --plot draws it. See docs/experiments.md."""
    import json
    import shlex
    import subprocess

    from gpt1.config import load_params
    from gpt1.sweep import (
        parse_grid,
        plot_sweep,
        points,
        queue_command,
        queue_jobs,
        run_command,
        sweep_runs,
        sweep_table,
        table_text,
    )

    with input_errors():
        loaded = load_params(params)
        spec = loaded.task(task)
        if not show:
            if plot is not None:
                raise InputError("--plot goes with --show")
            grid_values = parse_grid(loaded, task, grid or [])
            command = queue_command(task, grid_values)
        elif grid:
            raise InputError("--show takes the task alone, no grid")
        elif plot is not None:
            if plot.suffix.lower() not in PLOT_FORMATS:
                raise InputError(f"--plot {plot}: name a {', '.join(PLOT_FORMATS)} file")
            check_destination(plot, option="--plot", force=True)
    if show:
        shown = subprocess.run(["dvc", "exp", "show", "--json"], capture_output=True,
                               text=True, check=False, cwd=params.parent)
        if shown.returncode:
            typer.echo(shown.stderr, err=True, nl=False)
            raise typer.Exit(shown.returncode)
        with input_errors():
            runs = sweep_runs(json.loads(shown.stdout), task, spec.metrics[0])
            if plot is not None:
                plot_sweep(runs, spec.title, spec.metrics[0], plot)
        typer.echo(table_text(sweep_table(runs, spec.metrics[0])))
        if plot is not None:
            typer.echo(f"drawn: {plot}")
        return
    typer.echo(shlex.join(command))
    if subprocess.run(command, cwd=params.parent, check=False).returncode:
        raise typer.Exit(1)
    n = len(points(grid_values))
    jobs = queue_jobs(n)
    typer.echo(f"queued {n} experiment{'s' if n > 1 else ''} of finetune@{task}; run them: "
               f"{shlex.join(run_command(n, jobs))} (in the background: dvc queue start -j "
               f"{jobs}); then: gpt1 sweep {task} --show")


task_app = typer.Typer(no_args_is_help=True, help="Your own fine-tuning tasks in params.yaml.")
app.add_typer(task_app, name="task")
app.add_typer(team_app, name="team")


@task_app.callback()
def _task() -> None:
    """Your own fine-tuning tasks, over CSV, TSV, JSON Lines or Parquet files, in params.yaml."""


def _column_help(field: str) -> str:
    return f"the column holding {field} (default: the one named {field})"


@task_app.command("add")
def task_add(
    name: Annotated[str, typer.Argument(help="the task's name (letters, digits and _)")],
    family: Annotated[str, typer.Option(help="classification | entailment | similarity | "
                                             "multiple_choice")],
    train: Annotated[Path, typer.Option(help="the train file, under ingest.root (with "
                                             "--split-column, every split's)")],
    dev: Annotated[Path | None, typer.Option(help="the dev file (none: a tenth of the train "
                                                  "rows is held out)")] = None,
    test: Annotated[Path | None, typer.Option(help="the test file (labels optional)")] = None,
    predict: Annotated[Path | None, typer.Option(help="a file the fine-tuned model is to "
                                                      "score")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="csv | tsv | jsonl | parquet "
                                            "(default: from each file's extension)")] = None,
    text_column: Annotated[str | None, typer.Option(help=_column_help("text"))] = None,
    premise_column: Annotated[str | None, typer.Option(help=_column_help("premise"))] = None,
    hypothesis_column: Annotated[str | None,
                                 typer.Option(help=_column_help("hypothesis"))] = None,
    text_a_column: Annotated[str | None, typer.Option(help=_column_help("text_a"))] = None,
    text_b_column: Annotated[str | None, typer.Option(help=_column_help("text_b"))] = None,
    context_column: Annotated[str | None, typer.Option(help=_column_help("context"))] = None,
    question_column: Annotated[str | None, typer.Option(help=_column_help("question"))] = None,
    choices_column: Annotated[list[str] | None, typer.Option(
        help="one column holding a list of choices, or one column per choice (repeat the "
             "option, or a,b)")] = None,
    label_column: Annotated[str | None, typer.Option(help=_column_help("label"))] = None,
    labels: Annotated[str | None, typer.Option(help="the labels, a,b (default: the train "
                                                    "rows' label values, sorted)")] = None,
    label_map: Annotated[str | None, typer.Option(help="the file's label values -> labels: "
                                                       "1=negative,5=positive")] = None,
    split_column: Annotated[str | None, typer.Option(help="the column saying each row's split, "
                                                          "where one file holds them all")] = None,
    split_values: Annotated[str | None, typer.Option(help="split -> its value in the split "
                                                          "column: dev=TRIAL,test=TEST")] = None,
    scores: Annotated[str | None, typer.Option(help="LOW,HIGH: the range of a similarity "
                                                    "score (a regression task)")] = None,
    title: Annotated[str | None, typer.Option(help="the report's name for it")] = None,
    holdout: Annotated[int | None, typer.Option(min=1, help="dev rows drawn out of "
                                                            "train")] = None,
    force: Annotated[bool, typer.Option(help="replace a task of that name")] = False,
    params: Annotated[Path, typer.Option(help="the params file to rewrite")] = Path("params.yaml"),
) -> None:
    """Declare a fine-tuning task over your own tables.

    Every split is read first; then the entry is written to params.yaml (comments kept) and
    printed."""
    from gpt1.downstream.declare import TaskSpec, add_task, parse_scores, split_list, split_pairs
    from gpt1.presets.edit import task_yaml

    with input_errors():
        files = {split: path for split, path in [("train", train), ("dev", dev), ("test", test),
                                                 ("predict", predict)] if path is not None}
        texts = {"text": text_column, "premise": premise_column, "hypothesis": hypothesis_column,
                 "text_a": text_a_column, "text_b": text_b_column, "context": context_column,
                 "question": question_column, "label": label_column}
        columns: dict[str, str | list[str]] = {f: c for f, c in texts.items() if c is not None}
        if choices_column:
            choices = [c for item in choices_column for c in split_list("--choices-column", item)]
            columns["choices"] = choices[0] if len(choices) == 1 else choices
        spec = TaskSpec(
            name=name, family=family, files=files, columns=columns, format=fmt,
            labels=split_list("--labels", labels) if labels is not None else None,
            label_map=split_pairs("--label-map", label_map) if label_map is not None else None,
            split_column=split_column,
            split_values=split_pairs("--split-values", split_values) if split_values else {},
            scores=parse_scores(scores) if scores is not None else None,
            title=title, holdout=holdout)
        entry = add_task(params, spec, force)
        _refresh_dag(params)
    typer.echo(f"# {params}: tasks.{name}")
    typer.echo(task_yaml(name, entry), nl=False)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """The `gpt1` command. SIGTERM (`kill`, a supervisor stopping it) ends it as Ctrl-C does,
    with exit code 143: the command's `finally` blocks run, so the temporary file an
    interrupted write was filling is removed rather than left beside its output (`gpt1.atomic`)
    until the next write of that output. A SIGTERM its parent made it ignore stays ignored."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    app()


if __name__ == "__main__":
    main()
