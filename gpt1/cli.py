"""The `gpt1` command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpt1.config import ParamsError
from gpt1.presets import apply_preset, available, parse_assignments, update_params

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="GPT-1 pretraining and fine-tuning pipeline.")


@app.callback()
def _root() -> None:
    """GPT-1 pretraining and fine-tuning pipeline (run stages with `dvc repro`)."""


@app.command()
def preset(
    name: Annotated[str, typer.Argument(help=f"one of {available()}")],
    params: Annotated[Path, typer.Option(help="the params file to rewrite")] = Path("params.yaml"),
) -> None:
    """Overlay a preset's size and training knobs onto params.yaml (comments are kept)."""
    try:
        apply_preset(name, params)
    except ParamsError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{params}: preset {name!r} applied")


@app.command("set")
def set_params(
    assignments: Annotated[list[str], typer.Argument(help="KEY=VALUE, e.g. ingest.root=../data")],
    params: Annotated[Path, typer.Option(help="the params file to rewrite")] = Path("params.yaml"),
) -> None:
    """Set params.yaml keys (values are YAML), validated before anything is written."""
    try:
        update_params(params, parse_assignments(assignments))
    except ParamsError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{params}: set {', '.join(assignments)}")


if __name__ == "__main__":
    app()
