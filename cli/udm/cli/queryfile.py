"""Query files for ``udm-cli run`` and ``udm-cli explain``.

A query file is either

* a Python file defining ``queries(spark)`` (a dict of output name to
  :class:`~udm.host.Stream` or Spark DataFrame, written in order) or
  ``query(spark)`` (one of them, named after the file); or
* a YAML query spec (``*.yaml``/``*.yml``): one windowed UDM over a file
  source, validated with errors naming the file, line and field.
"""

from __future__ import annotations

import os
import re
import runpy
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from udm.cli.specchecks import field_line, first_line, policy_problem, returns_problem
from udm.testing.loading import validation_messages
from udm.testing.schema import FixtureError, WindowModel
from udm.testing.yamlread import read_documents

__all__ = [
    "QueryFileError",
    "QuerySpec",
    "SourceSpec",
    "check_query_file",
    "in_spec_words",
    "load_queries",
    "run_error_place",
]


class QueryFileError(ValueError):
    """A query file that cannot be used; the message says where and why."""


def _option_text(value: Any) -> Any:
    """A reader option as Spark takes it: ``true``/``false`` for bools."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class SourceSpec(BaseModel):
    """Where the events come from: a file or directory Spark can read."""

    model_config = ConfigDict(extra="forbid")

    path: str
    # None: from the path's extension (or its files'), else Parquet
    format: Literal["parquet", "csv", "json", "orc"] | None = None
    start: str = "start"
    end: str | None = None
    shape: Literal["point", "interval", "edge"] | None = None
    key: str | list[str] | None = None
    on_invalid: Literal["raise", "drop"] = "raise"
    on_null_key: Literal["raise", "drop", "keep"] = "raise"
    where: str | None = None
    # YAML writes true, 1 and 0.5 as bool, int and float: Spark reads text
    options: dict[str, Annotated[str, BeforeValidator(_option_text)]] = Field(default_factory=dict)


#: file extensions -> Spark's reader, for a source without format:
EXTENSIONS = {
    ".parquet": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".orc": "orc",
}


def infer_format(path: Path) -> str:
    """The reader for a source without ``format:``: its extension's, or
    for a folder the one extension its data files share; else Parquet
    (what Spark writes by default)."""
    found = EXTENSIONS.get(path.suffix.lower())
    if found or not path.is_dir():
        return found or "parquet"
    kinds = {
        EXTENSIONS[f.suffix.lower()]
        for f in path.rglob("*")
        if f.is_file() and not f.name.startswith((".", "_")) and f.suffix.lower() in EXTENSIONS
    }
    return kinds.pop() if len(kinds) == 1 else "parquet"


#: a spec names one UDM (checked by the model, and from the raw document
#: when other fields do not validate, which skips the model's check)
ONE_UDM = "give exactly one of aggregate (a UDA name) or apply (a UDO name)"


class QuerySpec(BaseModel):
    """A YAML query: one windowed UDA or UDO over one source."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    source: SourceSpec
    window: WindowModel
    aggregate: str | None = None
    apply: str | None = None
    value: str | list[str] | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    alias: str | None = None
    input_clipping: Literal["none", "left", "right", "full"] = "none"
    output_policy: Literal["align", "point_end", "clip", "keep", "time_bound"] | None = None
    returns: str | None = None

    def udm_field(self) -> tuple[str, str]:
        """The field naming the UDM (``aggregate`` or ``apply``) and the name."""
        if self.aggregate is not None:
            return "aggregate", self.aggregate
        assert self.apply is not None  # _one_udm
        return "apply", self.apply

    @model_validator(mode="after")
    def _one_udm(self) -> QuerySpec:
        if (self.aggregate is None) == (self.apply is None):
            raise ValueError(ONE_UDM)
        return self

    def source_path(self, base: Path) -> Path:
        """The source's path, relative to the spec's folder."""
        path = Path(self.source.path)
        return path if path.is_absolute() else base / path

    def source_format(self, base: Path) -> str:
        """``source.format``, or the one its path's extension says."""
        return self.source.format or infer_format(self.source_path(base))

    def named_columns(self) -> list[tuple[str, str]]:
        """``(field, column)`` for every column the spec names, the fields
        as dotted paths into the spec (``source.start``, ``value``)."""
        src = self.source
        named = [("source.start", src.start)]
        if src.end is not None:
            named.append(("source.end", src.end))
        for field, cols in (("source.key", src.key), ("value", self.value)):
            named += [(field, c) for c in ([cols] if isinstance(cols, str) else cols or [])]
        return named

    def stream(self, spark: Any, base: Path, where: Callable[[str], str] | None = None) -> Any:
        """The query of this spec as a :class:`~udm.host.query.Stream` over
        its source read with ``spark`` (paths relative to ``base``);
        ``where`` turns a field name into its place in the query file, so
        missing fields are reported at their lines."""
        from udm.host.query import Stream

        src = self.source
        path = self.source_path(base)
        if not path.exists():
            raise QueryFileError(f"source path {path} does not exist")
        fmt = self.source_format(base)
        if spark is None:  # --engine local: pyarrow reads it, no Spark
            from udm.cli.local import LocalEngineError, read_table

            times = [c for c in (src.start, src.end) if c is not None]
            try:
                df = read_table(path, fmt, src.options, src.where, times)
            except LocalEngineError as exc:
                if exc.field is None or where is None:
                    raise
                # at the field at fault: a file that does not read at its path
                raise QueryFileError(f"{where(exc.field)}: {exc.field}: {exc}") from None
            columns = list(df.column_names)
        else:
            from udm.cli.sparkread import read_source

            times = [c for c in (src.start, src.end) if c is not None]
            df = read_source(spark, literal_path(path), fmt, src.options, times)
            columns = df.columns
        # CSV and JSON columns are known once the source is read: a
        # missing one is reported now, at its field (KeyError's message
        # prefix names the field, see _field_of)
        prefix = {"source.start": "start", "source.end": "end", "source.key": "key"}
        missing = [  # (field, message): a field may name several columns
            (field, f"{prefix.get(field, 'value')} column {col!r} is not in {path.name}; "
             f"its columns are {columns}")
            for field, col in self.named_columns()
            if col not in columns
        ]  # fmt: skip
        if missing and where is not None:  # every one, each at its line
            raise QueryFileError("\n".join(f"{where(f)}: {f}: {m}" for f, m in missing))
        if missing:
            raise KeyError(missing[0][1])
        if src.where and spark is not None:
            df = df.where(src.where)
        make = Stream.from_arrow if spark is None else Stream.from_dataframe
        stream = make(
            df,
            start=src.start,
            end=src.end,
            key=src.key,
            shape=src.shape,
            on_invalid=src.on_invalid,
            on_null_key=src.on_null_key,
        )
        windowed = stream.window(self.window.build())
        options: dict[str, Any] = {
            "input_clipping": self.input_clipping,
            "output_policy": self.output_policy,
            "returns": self.returns,
            "alias": self.alias,
            **self.args,
        }
        if self.aggregate is not None:
            return windowed.aggregate(self.aggregate, self.value, **options)
        return windowed.apply(self.apply, self.value, **options)


def literal_path(path: Path) -> str:
    """``path`` for Spark's readers, which take ``[ ] { } * ?`` as a
    pattern: escaped, so a file named ``r[1].parquet`` is read as named."""
    return re.sub(r"([\[\]{}*?])", r"\\\1", str(path))


def _document(path: Path) -> Any:
    """The one YAML mapping of a query spec, lines remembered; raises
    :class:`QueryFileError` for a mistake the YAML loader read past too."""
    data, problems = _read_document(path)
    if problems:
        raise QueryFileError("\n".join(problems))
    return data


def _read_document(path: Path) -> tuple[Any, list[str]]:
    """The one YAML mapping of a query spec, lines remembered, and the
    mistakes the YAML loader read past (a key given twice ...), to report
    with the spec's other mistakes."""
    try:
        docs, problems = read_documents(path)
    except FixtureError as exc:
        raise QueryFileError(str(exc)) from None
    if len(docs) != 1 or not isinstance(docs[0][0], dict):
        raise QueryFileError(f"{path}: a query spec is one YAML mapping (source, window, ...)")
    return docs[0][0], problems


def _spec(path: Path) -> tuple[QuerySpec, Any]:
    """The validated spec of a YAML query file and its loaded data."""
    data = _document(path)
    try:
        return QuerySpec.model_validate(data), data
    except ValidationError as exc:
        raise QueryFileError(validation_messages(str(path), data, exc, ())) from None


def _load_yaml(path: Path, spark: Any) -> dict[str, Any]:
    spec, data = _spec(path)
    name = spec.name or path.name.split(".")[0]
    field, _ = spec.udm_field()
    try:
        return {name: spec.stream(spark, path.parent, lambda f: f"{path}:{field_line(data, f)}")}
    except QueryFileError:
        raise
    except Exception as exc:  # a UDM name, column or condition the data does not have
        # the Python API's advice, in the spec's words
        message = _data_rows(in_spec_words(first_line(exc), path))
        field = _invalid_row_field(message, data) or _field_of(message, field, data)
        raise QueryFileError(f"{path}:{field_line(data, field)}: {field}: {message}") from None


#: the Python API's words in hints -> a YAML spec's (the field, as written there)
_SPEC_WORDS = (
    (
        re.compile(
            r"pass on_invalid='drop' to drop such rows and count them "
            r"\(stream\.metrics\.invalid_rows\(\)\)"
        ),
        "source.on_invalid",
        "set source.on_invalid: drop to drop such rows and count them (run prints how many)",
    ),
    (re.compile(r"\bon_invalid='(\w+)'"), "source.on_invalid", r"source.on_invalid: \1"),
    (
        re.compile(
            r"pass on_null_key='drop' to drop such rows and count them, or on_null_key='keep'"
        ),
        "source.on_null_key",
        "set source.on_null_key: drop to drop such rows and count them, or keep",
    ),
    (
        re.compile(r"round the times to microseconds first: df\[.*?\(Arrow\)"),
        "",
        "round the times in the file to microseconds (at most six fraction digits) first",
    ),
    (re.compile(r"\bpass (returns|value|alias)=( \(e\.g\. '(\w+)'\))?"), "", r"set \1:\2"),
    (re.compile(r"\bshape='(\w+)'"), "source.shape", r"source.shape: \1"),
    (re.compile(r"use \.apply\(\) for it"), "", "use apply: for it"),
    (re.compile(r"use \.aggregate\(\) for it"), "", "use aggregate: for it"),
)


def in_spec_words(message: str, path: Path) -> str:
    """A message of the Python API (``pass on_invalid='drop'``) in a YAML
    spec's own words (``set source.on_invalid: drop``), with the line of
    the field to change where the spec has it."""
    try:
        data = _document(path)
    except QueryFileError:
        data = {}
    for pattern, field, words in _SPEC_WORDS:
        if not pattern.search(message):
            continue
        message = pattern.sub(words, message)
        if field and isinstance(data, dict):
            line = field_line(data, field)
            at = f"{path}:{line}" if line > 1 or field.split(".")[0] in data else f"{path}"
            message += f" ({field} goes at {at})"
    return message


_ROW = re.compile(r"\brow (\d+): ")


def _data_rows(message: str) -> str:
    """An invalid row's 0-based index (``row 1:``, the Python API's table
    position) as the data row a spec's user reads in the file: counted from
    1, the header not counted (``data row 2:``; docs/cli.md)."""
    return _ROW.sub(lambda m: f"data row {int(m.group(1)) + 1}: ", message)


_INVALID = re.compile(r"^invalid event: (key )?'([^']*)'")


def _invalid_row_field(message: str, data: Any) -> str | None:
    """The source field naming the column an invalid row's reason is about
    (``'ts' is not a valid time`` -> ``source.start`` when ``start: ts``,
    ``key 'sensor' is null`` -> ``source.key``); None for other errors."""
    m = _INVALID.match(message)
    source = data.get("source") if isinstance(data, dict) else None
    if m is None or not isinstance(source, dict):
        return None
    fields = ("key",) if m.group(1) else ("start", "end")
    for name in fields:
        cols = source.get(name)
        if m.group(2) == cols or (isinstance(cols, list) and m.group(2) in cols):
            return f"source.{name}"
    return None


def run_error_place(message: str, path: Path) -> str:
    """``file:line: field: `` of the spec field an error of a running query
    is about (an invalid row's column, found once Spark reads the data),
    or '' when it names none (the message says what it is about)."""
    try:
        data = _document(path)
    except QueryFileError:
        return ""
    field = _invalid_row_field(message, data)
    return f"{path}:{field_line(data, field)}: {field}: " if field else ""


def _field_of(message: str, udm_field: str, data: Any = None) -> str:
    """The spec field a Spark-time error is about (the UDM's by default,
    ``args`` for arguments the UDM does not take)."""
    for prefix, field in (
        ("value column", "value"),
        ("start column", "source.start"),
        ("end column", "source.end"),
        ("key column", "source.key"),
    ):
        if message.startswith(prefix):
            return field
    if message.startswith("output policy"):
        return "output_policy"
    if any(w in message.lower() for w in ("where", "cannot resolve", "parse", "unresolved")):
        return "source.where"
    if "column" in message:
        return "source"
    given_args = isinstance(data, dict) and "args" in data
    if given_args and message.startswith(("cannot create UDM", "bad arguments")):
        return "args"
    return udm_field


def _load_python(path: Path, spark: Any) -> dict[str, Any]:
    # the file's folder is importable here and in Spark's Python workers
    # (they inherit PYTHONPATH), so UDMs defined next to it can be pickled
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        namespace = runpy.run_path(str(path), run_name="udm_query")
        if "queries" in namespace:
            result = namespace["queries"](spark)
            if not isinstance(result, dict) or not result:
                raise QueryFileError(
                    f"{path}: queries(spark) must return a non-empty dict of name -> Stream"
                )
            return dict(result)
        if "query" in namespace:
            return {path.stem: namespace["query"](spark)}
    except QueryFileError:
        raise
    except Exception as exc:  # the query file's own mistake: name its line
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        where = f"{path}:{frames[-1].lineno}" if frames else str(path)
        raise QueryFileError(f"{where}: {type(exc).__name__}: {first_line(exc)}") from None
    raise QueryFileError(
        f"{path}: define queries(spark) -> dict[str, Stream] or query(spark) -> Stream"
    )


def worker_path(path: Path) -> None:
    """Put the query file's folder on PYTHONPATH before Spark starts, so its
    Python workers can import modules next to the query file."""
    folder = str(path.parent.resolve())
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *parts])


def _parquet_columns(path: Path) -> list[str] | None:
    """A Parquet source's column names, read from its footers (no Spark);
    None when they cannot be read here (Spark will say why)."""
    import pyarrow.dataset as ds

    try:
        return list(ds.dataset(str(path), format="parquet").schema.names)
    except Exception:
        return None


def _check_source(path: Path, spec: QuerySpec, data: Any) -> None:
    """The source's path and, for Parquet, every column the spec names:
    all problems at once, each at its line, before Spark starts."""
    source = spec.source_path(path.parent)
    if not source.exists():
        line = field_line(data, "source.path")
        raise QueryFileError(f"{path}:{line}: source.path: {source} does not exist")
    if spec.source_format(path.parent) != "parquet":
        return  # CSV and JSON columns depend on Spark's reader options
    columns = _parquet_columns(source)
    if columns is None:
        return
    problems = [
        f"{path}:{field_line(data, field)}: {field}: column {col!r} is not in {source.name}; "
        f"its columns are {columns}"
        for field, col in spec.named_columns()
        if col not in columns
    ]
    if problems:
        raise QueryFileError("\n".join(problems))


def check_query_file(path: Path, local: bool = False) -> None:
    """Everything that can be checked without Spark: the file exists, is a
    Python file or a YAML spec, and a spec is valid, names an installed UDM,
    a source that exists and (for Parquet) columns the source has; with
    ``local`` (``--engine local``), no source setting only Spark reads. Every
    mistake is reported at once, in line order: a field that does not
    validate does not hide an unknown UDM or a missing source."""
    if not path.is_file():
        raise QueryFileError(f"{path}: no such query file")
    if path.suffix in (".yaml", ".yml"):
        data, problems = _read_document(path)
        spec: QuerySpec | None = None
        try:
            spec = QuerySpec.model_validate(data)
        except ValidationError as exc:
            problems += validation_messages(str(path), data, exc, ()).splitlines()
            named = [f for f in ("aggregate", "apply") if data.get(f) is not None]
            if len(named) != 1:
                problems.append(f"{path}:{getattr(data, 'line', 1)}: (top level): {ONE_UDM}")
        problems += _udm_problems(path, data)
        problems += returns_problem(path, data)
        if local and spec is not None:
            problems += _spark_only_problems(path, spec, data)
        if spec is not None:
            try:
                _check_source(path, spec, data)
            except QueryFileError as exc:
                problems += str(exc).splitlines()
        else:
            problems += _source_path_problem(path, data)
        if problems:
            problems = list(dict.fromkeys(problems))
            raise QueryFileError("\n".join(sorted(problems, key=lambda m: _line_in(m, path))))
    elif path.suffix != ".py":
        raise QueryFileError(f"{path}: a query file is a Python file (.py) or a YAML spec (.yaml)")


def _spark_only_problems(path: Path, spec: QuerySpec, data: Any) -> list[str]:
    """The source settings ``--engine local`` refuses, each at its line."""
    from udm.cli.local import spark_only

    src = spec.source
    fmt = spec.source_format(path.parent)
    return [
        f"{path}:{field_line(data, field)}: {field}: {message}"
        for message, field in spark_only(fmt, src.options, src.where)
    ]


def _line_in(message: str, path: Path) -> int:
    head = message.removeprefix(f"{path}:").split(":", 1)[0]
    return int(head) if head.isdigit() else 0


def _udm_problems(path: Path, data: Any) -> list[str]:
    """An unknown UDM, or one of the wrong kind, under aggregate:/apply:
    (needs only the registry, not Spark)."""
    from udm.host.registry import DuplicateUdmError, UnknownUdmError, get_registry

    named = [(f, data[f]) for f in ("aggregate", "apply") if isinstance(data.get(f), str)]
    if len(named) != 1:
        return []  # none or both: the validation says so
    field, name = named[0]
    line = field_line(data, field)
    try:
        udm = get_registry().resolve(name)
    except (UnknownUdmError, DuplicateUdmError) as exc:
        return [f"{path}:{line}: {field}: {first_line(exc)}"]
    # aggregate: takes a UDA, apply: a UDO
    wanted = {"aggregate": "aggregate", "apply": "operator"}[field]
    kind = getattr(udm, "kind", "function")
    if kind == wanted:
        return policy_problem(path, data, udm)
    what = udm.flavor() if hasattr(udm, "flavor") else "UDF (span-based)"
    other = {"aggregate": "aggregate:", "operator": "apply:"}.get(kind)
    advice = f"use {other} for it" if other else "a UDF goes in a Python query file"
    return [f"{path}:{line}: {field}: {name!r} is a {what}; {advice}"]


def _source_path_problem(path: Path, data: Any) -> list[str]:
    """A ``source.path`` that does not exist or, for Parquet, the columns it
    lacks, read from a spec that did not validate (so a misspelt field does
    not hide them until it is fixed)."""
    source = data.get("source")
    given = source.get("path") if isinstance(source, dict) else None
    if not isinstance(given, str):
        return []
    found = Path(given) if Path(given).is_absolute() else path.parent / given
    if not found.exists():
        return [f"{path}:{field_line(data, 'source.path')}: source.path: {found} does not exist"]
    fmt = source.get("format")
    try:
        parquet = (fmt if isinstance(fmt, str) else infer_format(found)) == "parquet"
    except Exception:  # an unknown extension: the spec's own check says so
        return []
    columns = _parquet_columns(found) if parquet else None
    if columns is None:
        return []
    named = [(f"source.{f}", source.get(f)) for f in ("start", "end", "key")]
    named.append(("value", data.get("value")))
    return [
        f"{path}:{field_line(data, field)}: {field}: column {col!r} is not in {found.name}; "
        f"its columns are {columns}"
        for field, cols in named
        for col in ([cols] if isinstance(cols, str) else cols if isinstance(cols, list) else [])
        if isinstance(col, str) and col not in columns
    ]


def load_queries(path: Path, spark: Any) -> dict[str, Any]:
    """Output name -> Stream (or DataFrame) defined by a query file."""
    check_query_file(path)
    if path.suffix in (".yaml", ".yml"):
        return _load_yaml(path, spark)
    return _load_python(path, spark)
