"""Fixtures the Python module's tests share: the skipprd binary of this build, and a real
PostgreSQL server (Debian's) started for the tests that need one and stopped after them."""

from __future__ import annotations

import glob
import json
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]


# The Python example of seeds/materialised-views.txt, verbatim.
SEED_EXAMPLE = '''\
from skippr import (
    AggregateMeasure,
    Config,
    Pipeline,
    Transform,
    TransformAggregate,
)

cfg = Config.load("skippr.yml")
cfg.pipeline(
    "invoices",
    Pipeline(
        data_source=cfg.get_data_source("pg"),
        data_sink=cfg.get_data_sink("lake"),
        transform=Transform(
            aggregates=[
                TransformAggregate(
                    id="customer_invoice_totals",
                    key_fields=["customer_id"],
                    measures={
                        "invoice_total": AggregateMeasure(sum="amount"),
                        "invoice_count": AggregateMeasure(count="*"),
                    },
                )
            ],
        ),
    ),
)
cfg.save()
'''


# ----- skipprd --------------------------------------------------------------------------------------

def skipprd_path() -> str:
    path = os.environ.get("SKIPPRD", str(REPO / "build" / "src" / "skipprd"))
    if not os.path.exists(path):
        pytest.skip(f"skipprd is not built at {path}; run make")
    return path


def run_skipprd(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs the CLI of this build in `cwd` (its skippr.yml and ./data)."""
    completed = subprocess.run([skipprd_path(), *args], cwd=cwd, capture_output=True, text=True)
    if check and completed.returncode != 0:
        raise AssertionError(f"skipprd {' '.join(args)} exited {completed.returncode}:\n"
                             f"{completed.stdout}\n{completed.stderr}")
    return completed


def cli_query(sql: str, cwd: Path) -> list[list[str | None]]:
    """`skipprd query --plain --sql`: every value as the CLI's text."""
    return json.loads(run_skipprd("query", "--plain", "--sql", sql, cwd=cwd).stdout)["rows"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory (skippr.yml and ./data go there), as the CLI would run in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATA_DIR", raising=False)
    return tmp_path


# ----- PostgreSQL -----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """A throwaway server: trusted superuser `skippr`, wal_level=logical, data in a temp dir."""

    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin): run scripts/setup.sh")
        self.bin = os.path.dirname(bins[-1])
        self.dir = tempfile.mkdtemp(prefix="skippr-pytest-pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = _free_port()
        self.run_as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as postgres
            postgres = pwd.getpwnam("postgres")
            os.chown(self.dir, postgres.pw_uid, postgres.pw_gid)
            self.run_as = ["runuser", "-u", "postgres", "--"]
        self._run(f"{self.bin}/initdb", "-D", self.data, "-U", "skippr", "-A", "trust", "-E",
                  "UTF8", "--no-sync")
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10")
        self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-l", f"{self.dir}/server.log", "-w",
                  "-t", "60", "-o", options, "start")

    def _run(self, *command: str) -> str:
        completed = subprocess.run([*self.run_as, *command], cwd=self.dir, capture_output=True,
                                   text=True)
        if completed.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed:\n{completed.stdout}{completed.stderr}")
        return completed.stdout

    def psql(self, sql: str, database: str = "postgres") -> list[list[str]]:
        """Runs SQL over the Unix socket; rows of text, fields split on '|'."""
        output = self._run(f"{self.bin}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-A", "-t",
                           "-h", self.dir, "-p", str(self.port), "-U", "skippr", "-d", database,
                           "-c", sql)
        return [line.split("|") for line in output.splitlines() if line]

    def stop(self) -> None:
        subprocess.run([*self.run_as, f"{self.bin}/pg_ctl", "-D", self.data, "-m", "immediate",
                        "-w", "stop"], cwd=self.dir, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()
