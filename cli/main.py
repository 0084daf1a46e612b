"""udm-cli entry point (typer)."""

from __future__ import annotations

import typer

app = typer.Typer(help="udm: user-defined temporal modules on Spark.", no_args_is_help=True)


@app.callback()
def main() -> None:
    """udm: user-defined temporal modules on Spark."""


@app.command()
def version() -> None:
    """Print the udm version."""
    from udm.sdk import __version__

    typer.echo(__version__)
