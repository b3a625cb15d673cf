"""Session: one pipeline of a Config, run by the engine in this process; and its query results."""

from __future__ import annotations

import decimal
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from . import _engine
from .config import PipelineRef

__all__ = ["Result", "Session"]

# Rows fetched from the engine per call when iterating.
_ROWS_PER_FETCH = 1024

# pandas keeps datetimes in nanoseconds (1677-09-21 to 2262-04-11); values outside stay objects.
_NANOSECOND_MICROS_MIN = -9_223_372_036_854_775
_NANOSECOND_MICROS_MAX = 9_223_372_036_854_775


def _decimal_or_none(text: Optional[str]) -> Optional[decimal.Decimal]:
    return None if text is None else decimal.Decimal(text)


class Result:
    """A statement's result, streamed from the engine and read once.

    Read it as rows — ``fetchone()``, ``fetchmany(n)``, iteration, ``fetchall()`` — or whole, as
    ``to_pandas()`` or ``to_arrow()`` (Ctrl-C stops either between batches), which build their columns from the engine's columnar
    batches (numbers, booleans, dates and timestamps as arrays; never through text). Rows read
    one way are not read again the other way: the result is a cursor, not a table. Values are
    Python's: ``int``, ``float``, ``decimal.Decimal`` (exact), ``str``, ``bytes``,
    ``uuid.UUID``, ``datetime`` types (timestamps with time zone in UTC), ``dict`` for structs
    and maps, ``list`` for lists, ``None`` for NULL.
    """

    def __init__(self, engine_result: _engine.Result,
                 converters: Optional[Mapping[int, Callable[[Any], Any]]] = None) -> None:
        self._result = engine_result
        self._converters = dict(converters or {})
        self._read_whole = False

    @property
    def columns(self) -> list[str]:
        """The column names, in order."""
        return list(self._result.columns)

    @property
    def column_types(self) -> list[str]:
        """The columns' SQL types as DuckDB names them (``BIGINT``, ``DECIMAL(10,2)``, ...)."""
        return list(self._result.column_types)

    def fetchmany(self, size: int = _ROWS_PER_FETCH) -> list[tuple[Any, ...]]:
        """Up to ``size`` more rows; an empty list once every row has been read."""
        if size < 0:
            raise ValueError(f"fetchmany size must be 0 or more, not {size}")
        rows = self._result.next_rows(size)
        if self._converters:
            rows = [self._convert_row(row) for row in rows]
        return rows

    def fetchone(self) -> Optional[tuple[Any, ...]]:
        """The next row, or None once every row has been read."""
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row not read yet."""
        rows: list[tuple[Any, ...]] = []
        while batch := self.fetchmany(65536):
            rows.extend(batch)
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while batch := self.fetchmany(_ROWS_PER_FETCH):
            yield from batch

    def to_pandas(self) -> Any:
        """The rows not read yet as a ``pandas.DataFrame``.

        Integers, floats and booleans with NULLs use pandas' nullable dtypes (``Int64``,
        ``Float64``, ``boolean``), so no value is rounded; timestamps are ``datetime64[ns]``
        (``UTC`` for timestamps with time zone) where they fit, Python objects otherwise;
        decimals are ``decimal.Decimal``. Memory: the columns are gathered straight into the
        arrays the DataFrame keeps.
        """
        import pandas  # type: ignore[import]

        data: dict[str, Any] = {}
        for position, (name, column) in enumerate(zip(self.columns, self._read_columns())):
            data[self._unique_name(name, position, data)] = _pandas_column(
                pandas, *column, self._converters.get(position))
        return pandas.DataFrame(data, copy=False)

    def to_arrow(self) -> Any:
        """The rows not read yet as a ``pyarrow.Table`` (needs pyarrow installed)."""
        try:
            import pyarrow  # type: ignore[import]
        except ImportError as error:
            raise ImportError("Result.to_arrow needs pyarrow; install it (Debian: python3-pyarrow) "
                              "or use to_pandas()") from error
        arrays = [_arrow_column(pyarrow, *column, self._converters.get(position))
                  for position, column in enumerate(self._read_columns())]
        return pyarrow.Table.from_arrays(arrays, names=self.columns)

    def close(self) -> None:
        """Ends the result now: the engine and the store snapshot it reads are let go (as they
        are once the last row is read). Reading afterwards raises."""
        self._result.close()

    def __enter__(self) -> "Result":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<skippr.Result columns={self.columns!r}>"

    def _read_columns(self) -> list[tuple[str, Any, Any]]:
        if self._read_whole:
            raise _engine.InvalidArgumentError(
                "this result was already read to its end; run the query again for its rows")
        self._read_whole = True
        return self._result.read_columns()

    def _convert_row(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row)
        for position, convert in self._converters.items():
            values[position] = convert(values[position])
        return tuple(values)

    @staticmethod
    def _unique_name(name: str, position: int, taken: dict[str, Any]) -> str:
        # A DataFrame column per result column, even where SQL repeated a name.
        return name if name not in taken else f"{name}_{position}"


def _pandas_column(pandas: Any, kind: str, values: Any, nulls: Any,
                   convert: Optional[Callable[[Any], Any]]) -> Any:
    import numpy

    if convert is not None:
        return numpy.array([convert(value) for value in values], dtype=object)
    if kind == "object":
        return values
    if kind == "bool":
        return values if nulls is None else pandas.arrays.BooleanArray(values, nulls)
    if kind == "int64":
        return values if nulls is None else pandas.arrays.IntegerArray(values, nulls)
    if kind == "float64":
        return values if nulls is None else pandas.arrays.FloatingArray(values, nulls)
    return _pandas_datetimes(pandas, kind, values, nulls)


def _pandas_datetimes(pandas: Any, kind: str, values: Any, nulls: Any) -> Any:
    import numpy

    micros = values.view("int64") * (86_400_000_000 if kind == "datetime64[D]" else 1)
    valid = micros if nulls is None else micros[~nulls]
    if len(valid) and (valid.min() < _NANOSECOND_MICROS_MIN or valid.max() > _NANOSECOND_MICROS_MAX):
        objects = values.astype(object)  # datetime.date / datetime.datetime, or numpy's past those
        if nulls is not None:
            objects[nulls] = None
        return objects
    nanos = values.astype("datetime64[ns]")
    if nulls is not None:
        nanos[nulls] = numpy.datetime64("NaT")
    if kind == "datetime64[us, UTC]":
        return pandas.DatetimeIndex(nanos).tz_localize("UTC")
    return nanos


def _arrow_column(pyarrow: Any, kind: str, values: Any, nulls: Any,
                  convert: Optional[Callable[[Any], Any]]) -> Any:
    if convert is not None:
        return pyarrow.array([convert(value) for value in values])
    if kind == "object":
        return pyarrow.array(values.tolist(), from_pandas=False)
    if kind == "datetime64[D]":
        return pyarrow.array(values, type=pyarrow.date32(), mask=nulls)
    if kind == "datetime64[us]":
        return pyarrow.array(values, type=pyarrow.timestamp("us"), mask=nulls)
    if kind == "datetime64[us, UTC]":
        return pyarrow.array(values, type=pyarrow.timestamp("us", tz="UTC"), mask=nulls)
    return pyarrow.array(values, mask=nulls)


class Session:
    """One pipeline of a Config, run by the engine in this process (not a subprocess).

    ``Session(cfg.get_pipeline("orders"))`` snapshots that pipeline's part of the configuration —
    the pipeline, its source and sinks, the ``skippr:`` block, with changes not saved yet — and
    resolves its ``${NAME}`` references (only those) from the environment and the ``.env`` /
    ``.env.local`` files beside the config: a ``ConfigError``, which is a ``ValueError``, names
    a variable that is not set, at its place in the file. Later changes to the Config do not
    reach an existing Session.
    """

    def __init__(self, pipeline: PipelineRef) -> None:
        if not isinstance(pipeline, PipelineRef):
            raise TypeError("Session takes a PipelineRef — cfg.get_pipeline(name) or what "
                            f"cfg.pipeline(name, Pipeline(...)) returns — not {type(pipeline).__name__}")
        config = pipeline.config
        self._pipeline = pipeline
        # The whole file as save() would write it, so that messages point at its lines; the
        # engine resolves only what this pipeline runs with.
        self._session = _engine.Session(config.to_yaml(), config.path or "skippr.yml",
                                        pipeline.name)

    @property
    def pipeline(self) -> PipelineRef:
        """The pipeline this session runs."""
        return self._pipeline

    def doctor(self) -> dict[str, Any]:
        """What ``skipprd doctor --output json`` reports for this pipeline: ``{"ok", "checks"}``."""
        return self._session.doctor()

    def discover(self) -> dict[str, Any]:
        """Samples the source and saves the inferred schema (``skipprd discover``)."""
        return self._session.discover()

    def sync(self, once: bool = True) -> dict[str, Any]:
        """Reads the source, commits every batch to the WAL, and lands it (``skipprd sync``).

        ``once=True`` runs one pass; ``once=False`` runs one every ``sync_frequency_seconds``
        (a change stream is followed between them) until interrupted. The GIL is released while
        it runs. Ctrl-C (KeyboardInterrupt) stops it as SIGTERM stops ``skipprd sync``: what was
        read is committed, the pass ends cleanly, then the KeyboardInterrupt is raised. Returns
        the last pass's figures (rows committed, landed, aggregated, ...).
        """
        return self._session.sync(once)

    def query(self, sql: str) -> Result:
        """Runs SQL over the pipeline's tables, ``<pipeline>.<namespace>`` — the landed rows plus
        those still in the WAL, as ``skipprd query`` reads them — and streams its result."""
        try:
            sql.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate: no UTF-8 text to hand DuckDB
            raise _engine.InvalidArgumentError(
                f"the SQL holds a character that is not Unicode text at offset {error.start} "
                f"({sql[error.start]!r})") from None
        return Result(self._session.query(sql))

    def df(self, namespace: Optional[str] = None) -> Result:
        """Every row of one namespace (``"orders"`` or ``"<pipeline>.orders"``), or with no
        argument of all the pipeline's namespaces, which must have the same columns."""
        pipeline = self._pipeline.name
        if namespace is None:
            names = self._session.namespaces()
        else:
            prefix, dot, name = namespace.rpartition(".")
            if (dot and prefix != pipeline) or not name:
                raise ValueError("df name must be namespace or pipeline.namespace")
            names = [name]
        if not names:
            raise _engine.NotFoundError(f"pipeline '{pipeline}' has no namespaces yet; run "
                                        "discover or sync first")
        tables = [f"{_quote(pipeline)}.{_quote(name)}" for name in names]
        if len(tables) > 1:
            self._check_same_columns(names, tables)
        return self.query(" UNION ALL ".join(f"SELECT * FROM {table}" for table in tables))

    def aggregates(self, aggregate_id: str) -> Result:
        """A materialised view's rows (``skipprd aggregates show``): its key fields as the
        store keeps them, then its measures — sums as exact ``decimal.Decimal``, counts as
        ``int``."""
        measures = self._session.aggregate_measures(aggregate_id)
        result = self._session.aggregates(aggregate_id)
        keys = len(result.columns) - len(measures)
        converters = {keys + position: _decimal_or_none
                      for position, (_, kind) in enumerate(measures) if kind == "sum"}
        return Result(result, converters)

    def _check_same_columns(self, names: Sequence[str], tables: Sequence[str]) -> None:
        columns = {name: self.query(f"SELECT * FROM {table} LIMIT 0").columns
                   for name, table in zip(names, tables)}
        first = columns[names[0]]
        differing = [name for name in names if columns[name] != first]
        if differing:
            described = "; ".join(f"{name}: {', '.join(columns[name])}" for name in names)
            raise ValueError("df() concatenates the pipeline's namespaces, whose columns differ "
                             f"({described}); name one namespace")

    def __repr__(self) -> str:
        return f"<skippr.Session pipeline={self._pipeline.name!r}>"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
