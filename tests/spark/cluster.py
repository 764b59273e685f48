"""A standalone Spark cluster for tests, from the pyspark package's own ``bin/spark-class``.

The pip package has no ``sbin/start-master.sh``; ``bin/spark-class`` runs the master and
worker classes directly, which is all those scripts do. Everything binds to 127.0.0.1
and lives in a temporary directory (logs, worker and scratch directories, an empty
configuration directory so no stray ``spark-defaults.conf`` applies). Jobs go in
through ``bin/spark-submit`` the way ``docs/spark.md`` shows: the package zipped and
shipped with ``--py-files``, this interpreter as the executors' Python.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx

from tests.support.broker_process import REPO_ROOT, free_port

# Small enough for a 2-core CI machine: daemons of 256 MB, one worker of 2 cores and 1 GB
# that runs one executor of 512 MB, a driver of 512 MB.
DAEMON_MEMORY = "256m"
WORKER_MEMORY = "1g"
WORKER_CORES = 2
APP_MEMORY = "512m"
# Short-lived JVMs: the C1 compiler only, and one GC thread.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    """The pyspark package directory: its ``bin/`` and ``jars/`` are a Spark distribution."""
    import pyspark

    return Path(pyspark.__file__).parent


def package_zip(directory: Path) -> Path:
    """``spark_ingest`` zipped as ``--py-files`` wants it (the package only, no caches)."""
    target = directory / "spark_ingest.zip"
    with zipfile.ZipFile(target, "w") as archive:
        for source in sorted((REPO_ROOT / "spark_ingest").glob("*.py")):
            archive.write(source, f"spark_ingest/{source.name}")
    return target


class StandaloneCluster:
    """One master and one worker, started with ``spark-class`` and stopped with their process groups."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.home = spark_home()
        self.port = free_port()
        self.ui_port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        for name in ("conf", "logs", "work", "local"):
            (directory / name).mkdir(exist_ok=True)
        self.py_files = package_zip(directory)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The test's environment without its PYTHONPATH: the shipped zip must be enough."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON")}
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_CONF_DIR=str(self.directory / "conf"),
            SPARK_LOG_DIR=str(self.directory / "logs"),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.directory / "local"),
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
            SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
        )
        return env

    def _daemon(self, name: str, *arguments: str) -> None:
        with open(self.directory / "logs" / f"{name}.log", "ab") as log:
            self.processes.append(
                subprocess.Popen(
                    [str(self.home / "bin" / "spark-class"), *arguments],
                    env=self.environment(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: stopping it takes the executors along
                )
            )

    def start(self, timeout: float = 120) -> StandaloneCluster:
        """Start the master, then the worker; return once the worker is registered and alive."""
        self._daemon(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
        )
        self._daemon(
            "worker", "org.apache.spark.deploy.worker.Worker", self.master_url,
            "--host", "127.0.0.1", "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
            "--webui-port", "0", "--work-dir", str(self.directory / "work"),
        )
        deadline = time.monotonic() + timeout
        while self.state().get("aliveworkers", 0) < 1:
            for process in self.processes:
                assert process.poll() is None, f"a Spark daemon exited: {self.log_tail()}"
            assert time.monotonic() < deadline, f"no live worker after {timeout} s: {self.log_tail()}"
            time.sleep(0.25)
        return self

    def state(self) -> dict[str, Any]:
        """The master's own view (its web UI's JSON): workers, running and finished applications."""
        try:
            return dict(httpx.get(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2).json())
        except (httpx.HTTPError, ValueError):
            return {}

    def submit(self, *job_arguments: str) -> subprocess.Popen[str]:
        """``spark-submit`` the ingest job (``spark_ingest/__main__.py``) to this cluster."""
        command = [
            str(self.home / "bin" / "spark-submit"),
            "--master", self.master_url,
            "--driver-memory", APP_MEMORY,
            "--executor-memory", APP_MEMORY,
            "--total-executor-cores", str(WORKER_CORES),
            "--py-files", str(self.py_files),
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.driver.extraJavaOptions={QUICK_JVM}",
            "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
            "--conf", f"spark.local.dir={self.directory / 'local'}",
            str(REPO_ROOT / "spark_ingest" / "__main__.py"),
            *job_arguments,
        ]
        return subprocess.Popen(
            command,
            cwd=self.directory,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own group: a SIGKILL takes the driver's JVM and Python down together
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-chars:]}"
            for log in sorted((self.directory / "logs").glob("*.log"))
        )
