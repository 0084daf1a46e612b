"""A source file as ``udm-cli run --engine local`` reads it: as Spark's
readers read it (``udm-cli run`` on Spark reads a CSV source with
``header`` and ``inferSchema``), so both engines answer the same, and
every value exact.

pyarrow's readers alone differ from Spark's where it matters to a query:
its CSV reader takes ``NA``, ``null``, ``N/A``, ``nan`` and ``NaN`` for a
null and knows no ``\\`` escape, and both of its text readers type a
column holding an integer beyond int64 (or one bad row, ``2.5``) as a
double, which rounds integers past 2**53 silently. Here

* a CSV record is split as Spark's reader (univocity, quote ``"``, escape
  ``\\``) splits it (:func:`csv_records`), then typed by pyarrow with only
  an empty field null, and its double columns checked against the text;
* a JSON double written as udm and Spark write one that is not a number
  (``"NaN"``, ``"Infinity"``, ``"-Infinity"``) is read as that double;
* an integer column beyond int64 is a decimal, as Spark infers it
  (``decimal(20,0)``); an integer a double column would round is refused,
  naming the column and the row;
* a time column (``source.start``/``source.end``) keeps integer ticks
  exact: a value that is no whole int64 (``2.5``) stays text, an invalid
  row that ``on_invalid`` reports or drops and counts; a timestamp beyond
  the year 9999 (Parquet) is handed on as ISO text, which udm reads to the
  tick where Python's ``datetime`` stops;
* a file that cannot be read is reported with its line (and data row) and
  what to do, at the spec's ``source.path``.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LocalEngineError", "csv_records", "read_csv", "read_json", "times_as_text"]


class LocalEngineError(ValueError):
    """Something the local engine cannot do or read; the message says what
    to do, ``field`` is the spec field at fault (``source.path``)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


_UNESCAPE = re.compile(r"\\([\\\"])")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)
_INTEGER = re.compile(r"[+-]?\d+")
#: the text of a double Spark's CSV reader takes (Java's parseDouble, its
#: nanValue/positiveInf/negativeInf); pyarrow also takes nan, inf ...
_SPARK_SPECIAL = frozenset({"NaN", "Infinity", "+Infinity", "-Infinity", "Inf", "-Inf"})
_SPECIAL = re.compile(r"[+-]?(nan|inf|infinity)", re.I)
_INT64 = 2**63


def csv_records(text: str, delimiter: str) -> Iterator[tuple[int, list[str | None]]]:
    """Each record of CSV ``text`` with the line it starts on, its fields
    as Spark's CSV reader takes them: a quoted field may hold the
    delimiter and line breaks, ``\\"`` and ``\\\\`` in it are ``"`` and ``\\``
    (any other ``\\`` stays, as outside quotes); a field that is not
    closed by its quote before the delimiter is read as it stands
    (``"a""b"`` stays ``"a""b"``, as univocity's ``STOP_AT_DELIMITER``
    has it); an empty field, quoted or not, is None (null). Blank lines
    are skipped, as Spark skips them."""
    plain = re.compile(f"[^{re.escape(delimiter)}\r\n]*")
    pos, line, n = 0, 1, len(text)
    while pos < n:
        first, begun = line, pos
        fields: list[str | None] = []
        while True:
            quoted = _QUOTED.match(text, pos) if text.startswith('"', pos) else None
            after = quoted.end() if quoted else -1
            if quoted and (after == n or text.startswith((delimiter, "\n", "\r"), after)):
                fields.append(_UNESCAPE.sub(r"\1", quoted.group(1)) or None)
                line += quoted.group(0).count("\n")
                pos = after
            else:
                found = plain.match(text, pos)
                assert found is not None  # the pattern matches the empty string
                fields.append(found.group(0) or None)
                pos = found.end()
            if not text.startswith(delimiter, pos):
                break
            pos += len(delimiter)
        blank = pos == begun
        pos += 2 if text.startswith("\r\n", pos) else 1
        line += 1
        if not blank:
            yield first, fields


def _csv_field(value: str | None) -> str:
    """A field in the plain CSV pyarrow parses (``,``, ``""`` doubling)."""
    if value is None:
        return ""
    if any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


def read_csv(file: Path, delimiter: str, times: Sequence[str]) -> Any:
    """One CSV file with a header as a pyarrow Table, as Spark reads it."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    text = _text(file)
    records = csv_records(text, delimiter)
    header = next(records, None)
    if header is None:
        return pa.table({})
    names = [name or f"_c{i}" for i, name in enumerate(header[1])]
    rows: list[list[str | None]] = []
    for line, fields in records:
        if len(fields) != len(names):
            raise LocalEngineError(
                f"line {line} of {file.name} (data row {len(rows) + 1}) has {len(fields)} "
                f"field(s) where its header has {len(names)}; fix that line (a field holding "
                f"{delimiter!r} goes in double quotes)",
                "source.path",
            )
        rows.append(fields)
    head: list[str | None] = list(names)
    plain = "\n".join(",".join(_csv_field(v) for v in row) for row in [head, *rows]) + "\n"
    table = pcsv.read_csv(
        io.BytesIO(plain.encode("utf-8")),
        parse_options=pcsv.ParseOptions(newlines_in_values=True),
        # as Spark's reader: only an empty field is null, quoted or not
        convert_options=pcsv.ConvertOptions(
            null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True
        ),
    )
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            raw = [row[i] for row in rows]
            table = table.set_column(i, field.name, _exact_number_column(field.name, raw, times))
    return table


def _text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8-sig")  # a byte order mark is no text
    except UnicodeDecodeError as exc:
        line = file.read_bytes()[: exc.start].count(b"\n") + 1
        raise LocalEngineError(
            f"line {line} of {file.name} is not UTF-8 text, the encoding Spark's reader "
            "expects; save the file as UTF-8",
            "source.path",
        ) from None


def _exact_number_column(name: str, raw: list[str | None], times: Sequence[str]) -> Any:
    """A CSV column pyarrow typed as double, from its text: text where
    Spark's reader would keep text (``nan``, ``inf``), integer ticks exact
    in a time column, a decimal for integers beyond int64; else the
    doubles, unless one of them would round an integer (refused)."""
    import pyarrow as pa

    values = [v.strip() for v in raw if v is not None]
    if any(_SPECIAL.fullmatch(v) and v not in _SPARK_SPECIAL for v in values):
        return pa.array(raw, pa.string())
    numbers: list[Any] = [
        None if v is None else int(v) if _INTEGER.fullmatch(v.strip()) else v.strip() for v in raw
    ]
    return _exact_column(name, numbers, times)


def _exact_column(name: str, values: list[Any], times: Sequence[str]) -> Any:
    """A numeric column from exact values (Python ints, floats or the text
    of a double), no integer rounded (see :func:`_exact_number_column`)."""
    import pyarrow as pa

    if name in times:
        return _ticks_column(values)
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    others = [v for v in values if v is not None and not isinstance(v, int)]
    if not others and ints:  # integers, some beyond int64: a decimal, as Spark infers it
        digits = max(len(str(abs(v))) for v in ints)
        if digits <= 38:
            wide = any(abs(v) < _INT64 for v in ints)
            return pa.array(values, pa.decimal128(max(digits, 20) if wide else digits, 0))
    for row, v in enumerate(values, 1):
        if isinstance(v, int) and _rounded(v):
            raise LocalEngineError(
                f"column {name!r} holds {v} (data row {row}), an integer a double would round "
                f"({_rounded(v)}), in a column of decimals or of integers beyond 38 digits, "
                "which is read as double; write that column's integers as decimals or keep "
                "them in a column of their own",
                "source.path",
            )
    return pa.array([None if v is None else float(v) for v in values], pa.float64())


def _rounded(value: int) -> str | None:
    """What a double makes of an integer it does not hold exactly, else None."""
    try:
        double = float(value)
    except OverflowError:
        return "infinity"
    return None if double == value else repr(double)


def _as_tick(value: Any) -> int | None:
    """An int64 tick from a time column's value (an int, or a whole
    double, or its text, that a double holds exactly); None for another."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64:
        return value
    return None


def _ticks_column(values: list[Any]) -> Any:
    """A time column whose values are not all int64 ticks, each kept as it
    is: an int64 tick exact, anything else as its text (an invalid time,
    which the source's ``on_invalid`` reports or drops and counts).
    An Arrow union column holds both; a double column would round ticks
    past 2**53 (``1234567890123456789`` read as ``...768``)."""
    import pyarrow as pa

    ticks = [None if v is None else _as_tick(v) for v in values]
    kinds: list[int] = []
    offsets: list[int] = []
    ints: list[int] = []
    texts: list[str | None] = []
    for v, t in zip(values, ticks, strict=True):
        if t is not None:
            kinds.append(0)
            offsets.append(len(ints))
            ints.append(t)
        else:
            kinds.append(1)
            offsets.append(len(texts))
            texts.append(None if v is None else v if isinstance(v, str) else json.dumps(v))
    children = [pa.array(ints, pa.int64()), pa.array(texts, pa.string())]
    return pa.UnionArray.from_dense(
        pa.array(kinds, pa.int8()), pa.array(offsets, pa.int32()), children, ["ticks", "text"]
    )


#: JSON text of a double that is no number, as udm and Spark write it
_JSON_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def read_json(file: Path, times: Sequence[str]) -> Any:
    """One line-delimited JSON file as a pyarrow Table, as Spark reads it,
    numbers exact (see the module doc)."""
    import pyarrow as pa
    import pyarrow.json as pjson

    data = file.read_bytes()
    try:
        table = pjson.read_json(io.BytesIO(data))
    except pa.ArrowInvalid as exc:
        records = _json_records(file)  # a line that is no JSON object: named
        table = _json_with_specials(records, exc)
    else:
        floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
        if not floats:
            return table
        records = _json_records(file)
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            values = [_json_number(r.get(field.name)) for _, r in records]
            table = table.set_column(i, field.name, _exact_column(field.name, values, times))
    return table


def _json_number(value: Any) -> Any:
    """A JSON value of a double column: a number, or the text of a double
    that is no number (``"NaN"``) as that double."""
    if isinstance(value, str) and value in _JSON_SPECIAL:
        return _JSON_SPECIAL[value]
    return value


def _json_records(file: Path) -> list[tuple[int, dict[str, Any]]]:
    """Each JSON object of a line-delimited file with its line (blank lines
    skipped); a line that is no JSON object is reported with its line."""
    records: list[tuple[int, dict[str, Any]]] = []
    for line, text in enumerate(_text(file).splitlines(), 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except ValueError as exc:
            record = exc
        if not isinstance(record, dict):
            why = f" ({record})" if isinstance(record, ValueError) else ""
            raise LocalEngineError(
                f"line {line} of {file.name} (data row {len(records) + 1}) is not a JSON "
                f"object{why}; line-delimited JSON holds one object per line: fix or remove "
                "that line",
                "source.path",
            )
        records.append((line, record))
    return records


def _json_with_specials(records: list[tuple[int, dict[str, Any]]], failed: Exception) -> Any:
    """The table of JSON ``records`` that pyarrow refused (``failed``) for
    a column of numbers holding ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"``: those columns as doubles, the rest as pyarrow reads
    them; for another reason, that reason with the column and data row."""
    import pyarrow as pa
    import pyarrow.json as pjson

    order = list(dict.fromkeys(k for _, r in records for k in r))
    special = [c for c in order if _special_column([r.get(c) for _, r in records])]
    rest = "".join(
        json.dumps({k: v for k, v in r.items() if k not in special}) + "\n" for _, r in records
    )
    try:
        table = pjson.read_json(io.BytesIO(rest.encode("utf-8")))
    except pa.ArrowInvalid as exc:
        why = _json_problem(records, exc if special else failed)
        raise LocalEngineError(why, "source.path") from None
    for c in special:
        column = [_json_number(r.get(c)) for _, r in records]
        table = table.append_column(c, pa.array(column, pa.float64()))
    return table.select([c for c in order if c in table.column_names])


def _special_column(values: list[Any]) -> bool:
    """Whether a JSON field's values are numbers and texts of doubles that
    are no numbers (``"NaN"``), at least one of each: a double column."""
    numbers = specials = False
    for v in values:
        if isinstance(v, str) and v in _JSON_SPECIAL:
            specials = True
        elif isinstance(v, int | float) and not isinstance(v, bool):
            numbers = True
        elif v is not None:
            return False
    return numbers and specials


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    return "a list" if isinstance(value, list) else "an object"


def _json_problem(records: list[tuple[int, dict[str, Any]]], failed: Exception) -> str:
    """Why pyarrow could not read JSON ``records`` (``failed``), with the
    line and data row of the value at fault when the message names a
    column (``Column(/max) changed from number to string``)."""
    first = str(failed).strip().splitlines()[0]
    named = re.search(r"Column\(/([^)/]*)\)", first)
    if named:
        column, kind = named.group(1), None
        for row, (line, record) in enumerate(records, 1):
            if record.get(column) is None:
                continue
            found = _json_kind(record[column])
            if kind is not None and found != kind:
                return (
                    f"column {column!r} holds {kind} and, at line {line} (data row {row}), "
                    f"{found}; a column holds one kind of value: fix that line"
                )
            kind = kind or found
    return f"{first}; check the file's values"


#: the ticks of 0001-01-01 and of 10000-01-01: Python's datetime holds the years between
_FIRST, _PAST_LAST = -62_135_596_800_000_000, 253_402_300_800_000_000


def times_as_text(table: Any, times: Sequence[str]) -> Any:
    """``table`` with each time column holding a timestamp outside the
    years 1-9999 as exact ISO text (``+10000-01-01T00:00:00.000000Z``, as
    Spark writes it), which udm reads to the tick; Python's ``datetime``,
    through which an Arrow timestamp would go, stops at 9999."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from udm.cli.sparktext import tick_text

    for name in times:
        if name not in table.column_names:
            continue
        i = table.column_names.index(name)
        kind = table.schema.field(i).type
        if not pa.types.is_timestamp(kind) or kind.unit == "ns":  # ns: 1677-2262
            continue
        ticks = table.column(i).cast(pa.timestamp("us", kind.tz)).cast(pa.int64())
        low, high = pc.min_max(ticks).values()
        if low.as_py() is None or (low.as_py() >= _FIRST and high.as_py() < _PAST_LAST):
            continue
        zoned = kind.tz is not None
        texts = [None if t is None else tick_text(t, zoned) for t in ticks.to_pylist()]
        table = table.set_column(i, name, pa.array(texts, pa.string()))
    return table
