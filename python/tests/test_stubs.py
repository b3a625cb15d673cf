"""The type stubs: checked against the module by mypy's stubtest, and used by mypy on a script
as a user would write it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import skippr

PACKAGE_ROOT = str(Path(skippr.__file__).resolve().parents[1])  # the directory holding skippr/

TYPED_SCRIPT = """\
from skippr import (AggregateMeasure, Config, DataSinkSkipprLake, DataSourceSample, Pipeline,
                    Result, Session, Transform, TransformAggregate)

cfg = Config()
source = cfg.data_source("sample", DataSourceSample(rows=10))
sink = cfg.data_sink("lake", DataSinkSkipprLake(warehouse="file:///tmp/lake"))
pipeline = cfg.pipeline("p", Pipeline(data_source=source, data_sink=sink, transform=Transform(
    aggregates=[TransformAggregate(id="a", key_fields=["k"],
                                   measures={"n": AggregateMeasure(count="*")})])))
session = Session(pipeline)
result: Result = session.query("SELECT 1")
rows: list[tuple[object, ...]] = result.fetchall()
"""


def run_mypy_tool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MYPYPATH": PACKAGE_ROOT, "PYTHONPATH": PACKAGE_ROOT}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True)


def test_stubs_match_the_module(tmp_path: Path) -> None:
    allowlist = Path(__file__).with_name("stubtest_allowlist.txt")
    checked = run_mypy_tool("mypy.stubtest", "skippr", "--allowlist", str(allowlist),
                            cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_script_type_checks_and_a_wrong_argument_does_not(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(TYPED_SCRIPT)
    good = run_mypy_tool("mypy", "--strict", "--no-incremental", "good.py", cwd=tmp_path)
    assert good.returncode == 0, good.stdout

    (tmp_path / "bad.py").write_text(TYPED_SCRIPT + 'DataSourceSample(rows="ten")\n'
                                     'DataSinkSkipprLake(table_namespace="x")\n')
    bad = run_mypy_tool("mypy", "--strict", "--no-incremental", "bad.py", cwd=tmp_path)
    assert 'Argument "rows" to "DataSourceSample" has incompatible type "str"' in bad.stdout
    assert 'Missing named argument "warehouse" for "DataSinkSkipprLake"' in bad.stdout
