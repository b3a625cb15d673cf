"""Session: the engine run from Python — the same figures as the CLI, streamed results, errors
with the CLI's messages, and Ctrl-C that stops a sync cleanly."""

from __future__ import annotations

import decimal
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import skippr
from conftest import SEED_EXAMPLE, PostgresServer, cli_query, run_skipprd

SAMPLE_CONFIG = """\
# A sample source kept in the WAL, with a materialised view.
data_sources:
  sample:
    Sample:
      rows: {rows}
      seed: 7
pipelines:
  rides:
    data_source: data_sources.sample
    sync_frequency_seconds: 3600
    transform:
      aggregates:
        - id: by_rider_type
          key_fields: [rider_type]
          measures:
            ride_count: {{ count: "*" }}
            total_amount: {{ sum: amount }}
"""


def write_sample_project(project: Path, rows: int = 20000) -> skippr.PipelineRef:
    (project / "skippr.yml").write_text(SAMPLE_CONFIG.format(rows=rows))
    return skippr.Config.load("skippr.yml").get_pipeline("rides")


def test_sync_query_df_and_aggregates_give_the_cli_figures(project: Path) -> None:
    session = skippr.Session(write_sample_project(project))
    assert session.doctor()["ok"]
    summary = session.sync(once=True)
    assert summary["rows_committed"] == 20000
    assert summary["rows_aggregated"] == 20000

    sql = ("SELECT rider_type, count(*) AS rides, sum(amount) AS total, min(started_at) AS first "
           "FROM rides.rides GROUP BY 1 ORDER BY 1")
    result = session.query(sql)
    assert result.columns == ["rider_type", "rides", "total", "first"]
    assert result.column_types[:2] == ["VARCHAR", "BIGINT"]
    rows = result.fetchall()
    cli_rows = cli_query(sql, project)
    assert [[row[0], str(row[1]), str(row[2])] for row in rows] == [r[:3] for r in cli_rows]
    assert all(isinstance(row[2], decimal.Decimal) for row in rows)
    assert [row[3].isoformat(sep=" ") for row in rows] == [r[3] for r in cli_rows]

    frame = session.df().to_pandas()
    assert len(frame) == 20000 and frame["ride_id"].is_unique
    assert list(frame.columns) == session.df("rides").columns == session.df("rides.rides").columns
    assert str(frame["started_at"].dtype) == "datetime64[ns]"
    assert frame["amount"].sum() == sum(row[2] for row in rows)  # decimals, exactly

    aggregates = session.aggregates("by_rider_type").fetchall()
    shown = cli_query("SELECT rider_type, count(*), sum(amount) FROM rides.rides GROUP BY 1 "
                      "ORDER BY 1", project)
    assert sorted(aggregates) == [(r[0], int(r[1]), decimal.Decimal(r[2])) for r in shown]


def test_results_stream_once_as_rows_or_columns(project: Path) -> None:
    session = skippr.Session(write_sample_project(project, rows=5000))
    session.sync()
    result = session.query("SELECT ride_id, rating FROM rides.rides ORDER BY ride_id")
    first = result.fetchone()
    assert first is not None and first[0] == 1
    assert len(result.fetchmany(10)) == 10
    rest = result.to_pandas()  # the rows not read yet
    assert len(rest) == 5000 - 11 and rest["ride_id"].iloc[0] == 12
    assert str(rest["rating"].dtype) == "Int64" and rest["rating"].isna().any()
    assert result.fetchall() == []
    with pytest.raises(skippr.InvalidArgumentError, match="already read"):
        result.to_pandas()
    assert sum(1 for _ in session.query("SELECT * FROM rides.rides")) == 5000
    with session.query("SELECT * FROM rides.rides") as early:
        assert len(early.fetchmany(3)) == 3
    with pytest.raises(skippr.InvalidArgumentError, match="closed"):
        early.fetchmany(3)


def test_values_keep_their_types(project: Path) -> None:
    session = skippr.Session(write_sample_project(project, rows=10))
    with pytest.raises(skippr.NotFoundError, match="no namespaces yet; run discover or sync"):
        session.df()
    session.sync()
    row = session.query(
        "SELECT 12345678901234567890::HUGEINT AS big, INTERVAL 2 DAY AS span, [1, NULL] AS list, "
        "{'a': 'x'} AS struct, MAP {'k': 1.5} AS map, 1.25::DECIMAL(38, 10) AS exact, "
        "TIME '23:59:59.5' AS at, DATE '0044-03-15' AS ides, "
        "TIMESTAMPTZ '2024-02-29 12:00:00+00' AS leap, '\\x00\\xff'::BLOB AS raw, "
        "'1a5ab6c2-9d5d-4f5e-8a3f-6b7c8d9e0f10'::UUID AS id, 'ünï' AS text").fetchone()
    assert row is not None
    big, span, values, struct, mapping, exact, at, ides, leap, raw, uuid_value, text = row
    assert big == "12345678901234567890" and span == "2 days"  # no column type: DuckDB's text
    assert values == [1, None] and struct == {"a": "x"} and mapping == {"k": decimal.Decimal("1.5")}
    assert exact == decimal.Decimal("1.2500000000")
    assert at.isoformat() == "23:59:59.500000" and ides.isoformat() == "0044-03-15"
    assert leap.isoformat() == "2024-02-29T12:00:00+00:00"
    assert raw == b"\x00\xff" and str(uuid_value) == "1a5ab6c2-9d5d-4f5e-8a3f-6b7c8d9e0f10"
    assert text == "ünï"
    frame = session.query("SELECT TIMESTAMPTZ '2024-01-01 00:00:00+00' AS t, "
                          "TIMESTAMP '3000-01-01' AS far, NULL::BOOLEAN AS flag").to_pandas()
    assert str(frame["t"].dtype) == "datetime64[ns, UTC]"
    assert frame["far"].iloc[0].year == 3000  # beyond nanoseconds: a Python datetime
    assert str(frame["flag"].dtype) == "boolean"


def test_errors_carry_the_cli_messages(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "skippr.yml").write_text(textwrap.dedent("""\
        data_sources:
          sample:
            Sample: {rows: 10}
          # The app database; its password comes from the environment.
          pg:
            Postgres:
              host: 127.0.0.1
              database: app
              password: ${SKIPPR_TEST_UNSET_PASSWORD}
        pipelines:
          rides:
            data_source: data_sources.sample
          orders:
            data_source: data_sources.pg
        """))
    text = (project / "skippr.yml").read_text()
    monkeypatch.delenv("SKIPPR_TEST_UNSET_PASSWORD", raising=False)
    config = skippr.Config.load("skippr.yml")
    with pytest.raises(skippr.ConfigError) as raised:
        skippr.Session(config.get_pipeline("orders"))
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    line = next(number for number, text_line in enumerate(text.splitlines(), 1)
                if "SKIPPR_TEST_UNSET_PASSWORD" in text_line)
    assert message.startswith(f"skippr.yml:{line}:")  # the file's own line
    assert "SKIPPR_TEST_UNSET_PASSWORD" in message and "is not set" in message
    cli = run_skipprd("doctor", cwd=project, check=False)
    assert cli.returncode == 1 and message in cli.stderr
    # Another pipeline of the file does not need that variable.
    skippr.Session(config.get_pipeline("rides")).sync()

    session = skippr.Session(write_sample_project(project, rows=10))
    with pytest.raises(skippr.NotFoundError, match="no aggregate with id 'nope'"):
        session.aggregates("nope")
    session.sync()
    with pytest.raises(skippr.InvalidArgumentError, match="unknown table 'rides.nope'"):
        session.query("SELECT * FROM rides.nope")
    with pytest.raises(ValueError, match="df name must be namespace or pipeline.namespace"):
        session.df("other.rides")
    with pytest.raises(skippr.InvalidArgumentError, match="NUL character at byte 8"):
        session.query("SELECT '\x00'")
    with pytest.raises(skippr.InvalidArgumentError, match="not Unicode text at offset 8"):
        session.query("SELECT '\udcff'")
    with pytest.raises(TypeError, match="PipelineRef"):
        skippr.Session("rides")  # type: ignore[arg-type]


INTERRUPTED_SYNC = """
import os, sys
sys.path.insert(0, {tests!r})
import skippr
session = skippr.Session(skippr.Config.load("skippr.yml").get_pipeline("rides"))
print("syncing", flush=True)
try:
    session.sync(once=False)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_stops_a_sync_cleanly_and_loses_nothing(project: Path) -> None:
    rows = 1_500_000
    write_sample_project(project, rows=rows)
    with open("skippr.yml", "a") as config:
        config.write("    buffer_threshold_bytes: 1000000\n")
    child = subprocess.Popen([sys.executable, "-c", INTERRUPTED_SYNC.format(
        tests=str(Path(__file__).parent))], cwd=project, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "syncing"
    segments = project / "data" / "rides" / "wal"
    while not any(segments.glob("*.seg")) and child.poll() is None:
        time.sleep(0.05)  # the first commit: the pass is under way
    child.send_signal(signal.SIGINT)
    output, _ = child.communicate()
    assert child.returncode == 0 and output.strip() == "interrupted"

    # The lease is free, what was committed stays, and the next run finishes the source.
    run_skipprd("sync", "--once", cwd=project)
    assert cli_query("SELECT count(*), count(DISTINCT ride_id) FROM rides.rides",
                     project) == [[str(rows), str(rows)]]



INVOICES_CONFIG = """\
# Invoices from the app database into the lake.
data_sources:
  pg:
    Postgres:
      host: 127.0.0.1   # the app's primary
      port: {port}
      user: skippr
      database: {database}
      tables: [invoices]

data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{warehouse}

pipelines:
  invoices:
    data_source: data_sources.pg  # filled in by the Python example below
"""


def test_the_seed_python_example_runs_verbatim(project: Path, postgres: PostgresServer) -> None:
    database = "seed_example"
    postgres.psql(f"CREATE DATABASE {database}")
    postgres.psql("CREATE TABLE invoices (id int PRIMARY KEY, customer_id int NOT NULL, "
                  "amount numeric(12, 2) NOT NULL); "
                  "INSERT INTO invoices SELECT i, i % 37, (i * 7919 % 100000) / 100.0 "
                  "FROM generate_series(1, 5000) i", database)
    original = INVOICES_CONFIG.format(port=postgres.port, database=database,
                                      warehouse=project / "lake")
    (project / "skippr.yml").write_text(original)

    subprocess.run([sys.executable, "-c", SEED_EXAMPLE], cwd=project, check=True)

    saved = (project / "skippr.yml").read_text()
    for comment in ("# Invoices from the app database into the lake.", "# the app's primary",
                    "# filled in by the Python example below"):
        assert comment in saved
    assert saved.startswith(original.split("pipelines:")[0])  # entries Python did not touch
    assert "customer_invoice_totals" in saved
    run_skipprd("doctor", cwd=project)
    run_skipprd("sync", "--once", cwd=project)

    expected = sorted((int(c), decimal.Decimal(total), int(count)) for c, total, count in
                      postgres.psql("SELECT customer_id, sum(amount), count(*) FROM invoices "
                                    "GROUP BY 1", database))
    session = skippr.Session(skippr.Config.load("skippr.yml").get_pipeline("invoices"))
    totals = session.aggregates("customer_invoice_totals")
    assert totals.columns == ["customer_id", "invoice_count", "invoice_total"]  # measures by name
    assert sorted((int(key), total, count) for key, count, total in totals.fetchall()) == expected
    landed = session.query("SELECT customer_id, sum(amount), count(*) FROM invoices.postgres_invoices "
                           "GROUP BY 1 ORDER BY 1").fetchall()
    assert landed == expected
    shown = run_skipprd("aggregates", "verify", "--pipeline", "invoices", cwd=project)
    assert shown.returncode == 0
