"""The documented install: `pip install --no-build-isolation ./python` after `make`, offline,
into a virtual environment, and the installed module runs the engine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]


def test_pip_installs_the_built_module_offline(tmp_path: Path) -> None:
    build_dir = os.environ.get("SKIPPR_BUILD_DIR")
    if not build_dir:
        pytest.skip("SKIPPR_BUILD_DIR is not set (ctest sets it)")
    # A copy, so that pip's build files stay out of the checkout.
    source = tmp_path / "python"
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                      "__pycache__", "tests"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environment["SKIPPR_BUILD_DIR"] = build_dir
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-index",
                    "--no-build-isolation", str(source)], check=True, env=environment)

    project = tmp_path / "project"
    project.mkdir()
    (project / "skippr.yml").write_text(
        "data_sources:\n  s:\n    Sample: {rows: 100}\npipelines:\n  p:\n    data_source: data_sources.s\n")
    script = ("import skippr, sys\n"
              "assert 'site-packages' in skippr.__file__, skippr.__file__\n"
              "s = skippr.Session(skippr.Config.load('skippr.yml').get_pipeline('p'))\n"
              "s.sync()\n"
              "print(s.query('SELECT count(*) FROM p.p').fetchone()[0])\n")
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=project, env=environment,
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "100"
