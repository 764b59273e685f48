"""``python -m spark_ingest`` without the ``spark`` extra says what to install, in one line.

Each case runs the command in a fresh interpreter in which the named modules cannot be
imported (an import hook refuses them, as if they were not installed).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.broker_process import REPO_ROOT

# Runs `python -m spark_ingest ARGS` with the modules named in argv[1] (comma list) missing.
WITHOUT_MODULES = """
import runpy, sys
blocked = set(sys.argv[1].split(","))

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv = ["spark_ingest", *sys.argv[2:]]
runpy.run_module("spark_ingest", run_name="__main__", alter_sys=True)
"""

# Nothing listens there: the job must stop before it tries the broker.
JOB_ARGS = ["--url", "http://127.0.0.1:9", "--topic", "orders", "--output", "/nonexistent/out"]


def run_without(modules: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_MODULES, modules, *args],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False,
    )


@pytest.mark.parametrize("missing", ["pyspark", "pyarrow", "pyspark,pyarrow"])
def test_a_missing_spark_module_is_one_line_naming_the_extra(missing: str) -> None:
    done = run_without(missing, *JOB_ARGS)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install 'halfmq[spark]'" in lines[0]
    for module in missing.split(","):
        assert module in lines[0]


def test_help_works_without_spark() -> None:
    done = run_without("pyspark,pyarrow", "--help")
    assert done.returncode == 0, done.stderr
    assert "--output" in done.stdout
