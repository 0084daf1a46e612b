"""``udm-cli version``, ``list`` and ``show``: what is installed."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from udm.cli.app import (
    app,
    fail,
    load_registry,
    make_console,
)


@app.command()
def version() -> None:
    """Print the udm version.

    [bold]Examples[/bold]

      udm-cli version
    """
    from udm.sdk import __version__

    typer.echo(__version__)


@app.command("list")
def list_udms(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    library: Annotated[
        str | None, typer.Option("--library", "-l", help="Only this library's UDMs.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if any library failed to load.")
    ] = False,
) -> None:
    """List the UDMs of every installed library, and libraries that failed to load.

    [bold]Examples[/bold]

      udm-cli list

      udm-cli list --library stats --json
    """
    import difflib

    registry = load_registry()
    entries = [e for e in registry.entries if library is None or e.library == library]
    failures = [f for f in registry.failures if library is None or f.library == library]
    if library is not None and not entries and not failures:
        known = sorted(
            {e.library for e in registry.entries} | {f.library for f in registry.failures}
        )
        close = difflib.get_close_matches(library, known, n=3) or known
        raise fail(
            f"no library {library!r} is installed; installed: {', '.join(known) or 'none'}"
            + (f" (did you mean {', '.join(close)}?)" if close and close != known else "")
        )
    if as_json:
        doc = {
            "udms": [e.as_dict() for e in entries],
            "failed": [f.as_dict() for f in failures],
        }
        typer.echo(json.dumps(doc, indent=2))
    elif _too_narrow(make_console(), entries):
        _stacked(make_console(), entries, failures)
    else:
        console = make_console()
        table = Table(title="UDMs")
        # names are what users copy: never wrapped, nor the other single
        # words; a narrow terminal wraps the flavor and the properties
        for col in ("name", "kind", "flavor", "properties", "library", "version"):
            if col in ("flavor", "properties"):
                table.add_column(col, overflow="fold")
            else:
                widest = max((len(getattr(e, col) or "-") for e in entries), default=0)
                table.add_column(col, no_wrap=True, min_width=max(widest, len(col)))
        for e in entries:
            cells = (e.name, e.kind, e.flavor, ", ".join(e.properties), e.library, e.version or "-")
            table.add_row(*(Text(c) for c in cells))  # Text: no markup in names
        if not console.is_terminal and "COLUMNS" not in os.environ:
            # piped or redirected: one line per UDM, whatever its length
            wide = console.measure(table, options=console.options.update_width(10_000))
            console.width = max(console.width, wide.maximum)
        console.print(table)
        _print_failures(console, failures)
    if strict and failures:
        raise typer.Exit(1)


#: the narrowest flavor and properties columns worth a table
_WRAPPED_MIN = 22


def _too_narrow(console: Any, entries: list[Any]) -> bool:
    """Whether the table would squeeze the flavor and properties columns
    below readable width (a word a column, broken mid-word): a terminal
    that narrow gets :func:`_stacked` instead. Piped output is never."""
    if not console.is_terminal and "COLUMNS" not in os.environ:
        return False
    fixed = sum(
        max((len(getattr(e, col) or "-") for e in entries), default=0)
        for col in ("name", "kind", "library", "version")
    )
    return console.width < fixed + 2 * _WRAPPED_MIN + 3 * 6 + 1  # cells' padding, borders


def _stacked(console: Any, entries: list[Any], failures: list[Any]) -> None:
    """``list`` for a narrow terminal: a UDM's name, kind, library and
    version on one line (never broken), its flavor and properties below,
    wrapped between words."""
    import textwrap

    console.print("UDMs", markup=False)
    for e in entries:
        console.print(f"{e.name}  {e.kind}  {e.library} {e.version or '-'}", markup=False)
        detail = e.flavor + (f"; {', '.join(e.properties)}" if e.properties else "")
        indent = " " * 4
        wrapped = textwrap.fill(
            detail,
            width=max(console.width, 20),
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        console.print(wrapped, markup=False)
    _print_failures(console, failures)


def _print_failures(console: Any, failures: list[Any]) -> None:
    for f in failures:
        dist = f" ({f.distribution} {f.version})" if f.distribution else ""
        console.print(
            f"[red]failed to load[/red] {escape(f'{f.library}{dist}: {f.error}')}",
            markup=True,
        )
        if f.traceback:
            console.print(f.traceback, markup=False)


@app.command()
@app.command("inspect", hidden=True)  # the verb users reach for first
def show(
    name: Annotated[str, typer.Argument(help="A UDM name such as stats.median.", metavar="NAME")],
) -> None:
    """Show a UDM: flavor, signature, properties, docstring and where it comes from.

    [bold]Examples[/bold]

      udm-cli show stats.median

      udm-cli show stats.quantile
    """
    from udm.host.registry import DuplicateUdmError, UnknownUdmError

    registry = load_registry()
    try:
        entry = registry.entry(name)
    except (UnknownUdmError, DuplicateUdmError) as exc:
        raise fail(str(exc)) from None
    console = make_console()
    console.print(f"[bold]{escape(entry.name)}[/bold]  ({escape(entry.flavor)})", markup=True)
    console.print(f"signature:  {entry.signature}", markup=False)
    console.print(f"properties: {', '.join(entry.properties) or '-'}", markup=False)
    dist = f"{entry.distribution} {entry.version}" if entry.distribution else "in-process"
    console.print(f"library:    {entry.library} ({dist})", markup=False)
    console.print(f"defined in: {entry.source}", markup=False)
    if entry.doc:
        console.print("")
        console.print(entry.doc, markup=False)
    console.print("")
    console.print("example:", markup=False)
    if entry.kind == "function":
        call = ", ".join(f'p["{p}"]' for p in _udf_params(registry.resolve(entry.name)))
        console.print(
            f"  from udm.host.registry import get_registry\n"
            f'  {entry.name.split(".")[-1]} = get_registry().resolve("{entry.name}")\n'
            f"  stream.select(out=lambda p: {entry.name.split('.')[-1]}({call}))",
            markup=False,
        )
    else:
        verb = "aggregate" if entry.kind == "aggregate" else "apply"
        required = entry.required_arguments()
        args = "".join(f", {p}=<{p}>" for p in required)
        console.print(
            f'  Stream.from_cht(events).tumbling_window(10).{verb}("{entry.name}"{args})'
            '.to_cht(engine="reference")',
            markup=False,
        )
        if required:
            console.print(
                f"  (replace the <...> placeholders: {', '.join(required)} "
                f"{'has' if len(required) == 1 else 'have'} no default)",
                markup=False,
            )


def _udf_params(udf: Any) -> list[str]:
    """The names of a UDF's positional parameters (for a usage example)."""
    import inspect

    try:
        params = inspect.signature(udf).parameters.values()
    except (TypeError, ValueError):
        return ["value"]
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds] or ["value"]
