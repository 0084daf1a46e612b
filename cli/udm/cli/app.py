"""The udm-cli application: the typer app every command registers on, and
what the commands share (consoles, failing with a message, the registry of
installed UDMs, the project template).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from udm.cli import views

__all__ = [
    "PLOT_FORMATS",
    "app",
    "check_plot_path",
    "fail",
    "load_registry",
    "make_console",
    "template_dir",
]

app = typer.Typer(
    help="udm: user-defined temporal modules on Spark.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    add_completion=True,
)


views.quiet_flag_types()


def template_dir() -> Path:
    """The cookiecutter template, from a checkout or an installed wheel."""
    from importlib.resources import files

    return Path(str(files("udm.templates") / "udm-package"))


def make_console(err: bool = False) -> Console:
    """The CLI's rich console (``err``: on stderr), without highlighting or
    hard wraps so output can be piped and compared."""
    return Console(stderr=err, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    # messages quote user text (file names, YAML keys, ids) that may look
    # like rich markup ("[min, max]", "[/oops]"): escape it
    """Print ``message`` as an error and return the exit to raise, so every
    command fails the same way (user text escaped, not read as markup)."""
    make_console(err=True).print(f"[red]error:[/red] {escape(message)}", markup=True)
    return typer.Exit(code)


def load_registry() -> Any:
    """The UDM registry with every installed library loaded, failures left for
    the command to report; duplicate names end the command with their error."""
    import warnings

    from udm.host.registry import UdmPluginWarning, get_registry

    registry = get_registry()
    with warnings.catch_warnings():
        # list/show report failed libraries themselves, with tracebacks
        warnings.simplefilter("ignore", UdmPluginWarning)
        try:
            registry.load()
        except ValueError as exc:  # duplicate libraries or UDM names
            raise fail(str(exc)) from None
    return registry


def _print_version(value: bool) -> None:
    if value:
        from udm.sdk import __version__

        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the udm version and exit.",
        ),
    ] = False,
) -> None:
    """udm: user-defined temporal modules on Spark."""


#: the files --plot can write
PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(plot: Path) -> None:
    """Refuse a --plot target that cannot be written before any work."""
    if plot.suffix.lower() not in PLOT_FORMATS:
        raise fail(f"--plot {plot}: use a file ending in {', '.join(PLOT_FORMATS)}", 2)
    folder = plot.parent if str(plot.parent) else Path(".")
    if not folder.is_dir():
        raise fail(f"--plot {plot}: folder {folder} does not exist")
