"""How the `gpt1` commands end on bad input: one line and exit code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from gpt1.errors import describe, is_input_error


@contextmanager
def input_errors() -> Iterator[None]:
    """Bad input raised in the block (`gpt1.errors.is_input_error`: bad params, a model or
    release directory missing or malformed, a full disk) becomes `error: <message>` on stderr
    and exit code 2. Anything else is a bug and keeps its traceback."""
    try:
        yield
    except (ValueError, OSError) as err:
        if not is_input_error(err):
            raise
        typer.echo(f"error: {describe(err)}", err=True)
        raise typer.Exit(2) from None
