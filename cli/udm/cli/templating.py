"""Jinja filters of the ``udm-cli new`` template (its cookiecutter.json loads
:class:`QuotingExtension` through ``_extensions``).

The package's description, author and version are the user's words; the
filters quote them for the file they land in, so a description such as
``He said "hi" \\ there`` gives a valid ``pyproject.toml`` and a valid
docstring instead of a file that pip or Python cannot read.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2.ext import Extension

__all__ = ["QuotingExtension", "docstring_text", "toml_escape"]

_TOML_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_escape(value: Any) -> str:
    """``value`` for the inside of a TOML basic string (``"..."``): quotes,
    backslashes and control characters escaped, so ``"{{ x | toml_escape }}"``
    reads back as ``x`` (and the template stays valid TOML itself)."""
    out = []
    for ch in str(value):
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:  # other control characters
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def docstring_text(value: Any) -> str:
    """``value`` for the inside of a ``\"\"\"`` docstring: backslashes doubled
    (``\\ `` is an invalid escape), and a quote escaped where it would
    make three in a row (ending the docstring) or end the text; other
    quotes stay as written, as ``ruff format`` leaves them."""
    return re.sub(r'"(?="|$)', r'\\"', str(value).replace("\\", "\\\\"))


class QuotingExtension(Extension):
    """Adds the ``toml_escape`` and ``docstring_text`` filters."""

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        environment.filters["toml_escape"] = toml_escape
        environment.filters["docstring_text"] = docstring_text
