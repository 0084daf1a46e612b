"""``udm-cli new``: a new UDM library from the cookiecutter template."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from udm.cli.app import (
    app,
    fail,
    load_registry,
    make_console,
    template_dir,
)


@app.command(
    short_help="Create a UDM package from the template (entry point, example UDA and UDO, tests)."
)
def new(
    name: Annotated[
        str, typer.Argument(help="Library name (the UDM prefix), e.g. my_udms.", metavar="NAME")
    ],
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Where to create the package.")
    ] = Path("."),
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Do not prompt; use defaults and options.")
    ] = False,
    description: Annotated[
        str | None, typer.Option(help="One-line description of the package.")
    ] = None,
    author: Annotated[str | None, typer.Option(help="Author name.")] = None,
    version: Annotated[str | None, typer.Option(help="Initial version.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing directory.")] = False,
) -> None:
    """Create a UDM package from the template: pyproject with the udm entry
    point, an example UDA and UDO, tests, README and ruff config.

    [bold]Examples[/bold]

      udm-cli new my_udms --no-input

      udm-cli new sensors --output-dir ~/src --author "Ada" --no-input
    """
    import keyword
    import re

    if not re.fullmatch(r"[a-z]([a-z0-9_]*[a-z0-9])?", name) or keyword.iskeyword(name):
        # ASCII only: the name is also the distribution's, which PyPI and
        # pip take in ASCII letters, digits, _ and - only, and not starting
        # or ending with - (PEP 508), which a leading or trailing _ becomes
        raise fail(
            f"library name {name!r} must be a Python identifier of lowercase ASCII letters "
            "(a-z), digits and _, starting with a letter, not ending with _ and not a Python "
            "keyword, "
            f"e.g. {_ascii_name(name)}"
        )
    distribution = name.replace("_", "-") if "_" in name else f"{name}-udms"
    taken = _name_taken(name, output_dir / distribution)
    if taken:
        raise fail(f"library name {name!r} {taken}; pick another name, e.g. {name}_udms")
    if output_dir.exists() and not output_dir.is_dir():
        raise fail(f"--output-dir {output_dir} is a file, not a folder; name a folder", 2)
    from cookiecutter.exceptions import OutputDirExistsException
    from cookiecutter.main import cookiecutter

    defaults = json.loads((template_dir() / "cookiecutter.json").read_text())
    context: dict[str, Any] = {"library": name}
    for key, val in (("description", description), ("author", author), ("version", version)):
        if val is None and not no_input:  # the name is the argument: ask only for the rest
            # an answer that is refused is asked for again, with the reason
            val = typer.prompt(
                key.capitalize(), default=defaults[key], value_proc=_answer_check(key)
            )
        elif val is not None:
            problem = _template_value_problem(key, val)
            if problem:
                raise fail(f"--{key} {val!r}: {problem}", 2)
        if val is not None:
            # cookiecutter renders every value as a Jinja template: a "{" of
            # the user's text must stay a "{"
            context[key] = val.strip().replace("{", "{{ '{' }}")
    try:
        out = cookiecutter(
            str(template_dir()),
            no_input=True,
            extra_context=context,
            output_dir=str(output_dir),
            overwrite_if_exists=force,
        )
    except OutputDirExistsException as exc:
        reason = str(exc).removeprefix("Error: ")
        raise fail(f"{reason}; pass --force to overwrite or pick another --output-dir") from None
    typer.echo(out)
    make_console(err=True).print(
        f"next: pip install -e {out} && udm-cli list && udm-cli test {out}\n"
        "(in this environment, where udm is installed: the package depends on udm, "
        "and the PyPI project named udm is an unrelated one)",
        markup=False,
    )


def _ascii_name(name: str) -> str:
    """A valid name close to a refused one (``ünï`` -> ``uni``, ``My-Udms``
    -> ``my_udms``), or ``my_udms`` when none is."""
    import keyword
    import re
    import unicodedata

    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    plain = re.sub(r"[^a-z0-9_]+", "_", plain).strip("_")
    if not plain:
        return "my_udms"
    if plain[0].isdigit():
        return f"udms_{plain}"
    return f"{plain}_udms" if keyword.iskeyword(plain) else plain


def _name_taken(name: str, target: Path) -> str | None:
    """Why a scaffolded package named ``name`` (its module and its library,
    created in ``target``) could not work here, or None: its module would
    shadow or be shadowed by an importable one (``udm``, ``json``), or its
    library name is already an installed library's (``stats``). Its own
    earlier copy in ``target`` (``--force``) is no clash."""
    import importlib.util

    clash = "which the package's module would clash with"
    if name in sys.stdlib_module_names:
        return f"is the name of a module of Python's standard library, {clash}"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        places = [spec.origin, *(spec.submodule_search_locations or [])]
        found = [Path(p).resolve() for p in places if p and Path(p).exists()]
        if not any(p.is_relative_to(target.resolve()) for p in found):
            at = f" (at {found[0]})" if found else ""
            return f"is the name of a module that is already importable here{at}, {clash}"
        return None  # this package itself, installed from target
    registry = load_registry()
    libraries = {e.library: e.distribution for e in registry.entries}
    libraries |= {f.library: f.distribution for f in registry.failures}
    if name in libraries:
        dist = libraries[name]
        return f"is already an installed UDM library's name ({dist or 'registered in-process'})"
    return None


#: PEP 440's version pattern (its appendix), which pip and setuptools follow
_PEP440 = r"""
    v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_\.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_\.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_\.]?(?P<post_l>post|rev|r)[-_\.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_\.]?(?P<dev_l>dev)[-_\.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_\.][a-z0-9]+)*))?
"""


def _template_value_problem(key: str, value: str) -> str | None:
    """Why ``udm-cli new`` refuses a description, author or version, or None."""
    import re

    text = value.strip()
    if not text:
        return "is empty"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        return "must be one line of text, without control characters"
    if key == "version" and not re.fullmatch(_PEP440, text, re.VERBOSE | re.IGNORECASE):
        return (
            "is not a PEP 440 version, which pip needs to install the package; "
            "use e.g. 0.1.0, 1.0rc1 or 2024.5.1"
        )
    return None


def _answer_check(key: str) -> Any:
    """A typer.prompt value_proc that asks again for a refused answer."""

    def check(value: str) -> str:
        problem = _template_value_problem(key, value)
        if problem:
            raise typer.BadParameter(f"{key} {problem}")
        return value

    return check
