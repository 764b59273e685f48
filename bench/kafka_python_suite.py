"""kafka-python's own integration suite against halfmq: its ``test/integration`` pointed at a broker process.

1. Takes kafka-python's source distribution (which carries ``test/``) of the installed
   version from the package registry (``pip download --no-binary :all: --no-deps``), or
   ``--sdist PATH``, and unpacks it.
2. Starts one halfmq broker (SQLite, or ``--database-url``) with the Kafka listener,
   auto-created topics with 4 partitions (what the suite's own broker fixture configures).
3. Runs ``pytest test/integration`` there with ``KAFKA_VERSION`` (the Kafka release the
   suite should assume, ``--kafka-version``) and ``KAFKA_URI`` (the external broker), and
   prints the score (passed / failed / errors / skipped) and each failure's first line.

The suite's SASL and SSL modules start brokers of their own with those listeners; with an
external broker they are skipped or fail at setup, and are counted as they end.

``python -m bench.kafka_python_suite [--kafka-version 3.9.0] [-k EXPR] [--database-url URL]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.broker_process import BrokerProcess, free_port  # noqa: E402


def fetch_sdist(directory: Path) -> Path:
    """The installed kafka-python's sdist, from the package registry."""
    from importlib.metadata import version

    wanted = f"kafka-python=={version('kafka-python')}"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", wanted, "-d", str(directory)],
        check=True,
    )
    return next(directory.glob("kafka_python-*.tar.gz"))


def unpack(sdist: Path, directory: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(directory, filter="data")
    source = next(p for p in directory.iterdir() if p.is_dir() and (p / "test" / "integration").is_dir())
    # The suite imports ``test.testutil``; without an __init__.py its ``test`` is a namespace
    # package, which Python's own ``test`` package shadows.
    (source / "test" / "__init__.py").touch()
    # The sdist leaves out ``test/service.py`` (the broker process wrappers its fixtures import);
    # against an external broker only ExternalService is used, and it does nothing.
    if not (source / "test" / "service.py").exists():
        (source / "test" / "service.py").write_text(_SERVICE_STANDIN)
    return source


_SERVICE_STANDIN = '''"""Stand-in for kafka-python's test/service.py (not in its sdist), by halfmq's bench."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService(ExternalService):
    def __init__(self, args=None, env=None):
        raise RuntimeError("this run uses an external broker (halfmq): no Kafka or ZooKeeper process is spawned")
'''


def outcomes(report: Path) -> tuple[Counter[str], list[tuple[str, str]]]:
    """Counts by outcome, and (test, first line of the message) for each failure or error."""
    counts: Counter[str] = Counter()
    failures: list[tuple[str, str]] = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        kind = kinds[0] if kinds else "passed"
        counts[kind] += 1
        if kind in ("failure", "error"):
            found = case.find(kind)
            message = (found.get("message") or found.text or "") if found is not None else ""
            failures.append((name, message.strip().splitlines()[0][:160] if message.strip() else ""))
    return counts, failures


def run(kafka_version: str, selection: str | None, database_url: str | None, sdist: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="kafka-python-suite-") as scratch:
        work = Path(scratch)
        source = unpack(sdist or fetch_sdist(work), work)
        port = free_port()
        broker = BrokerProcess(
            database_url or f"sqlite:///{work}/broker.db", log_path=work / "broker.log", kafka_port=port,
            kafka_auto_create_topics="true", kafka_default_partitions=4, group_min_session_timeout_ms=1000,
            group_heartbeat_interval_ms=500,
        )
        with broker:
            env = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
            # KAFKA_ROOT: the fixtures check that a Kafka installation is there, even for an external broker.
            (work / "kafka-bin").mkdir()
            env.update(KAFKA_VERSION=kafka_version, KAFKA_URI=f"PLAINTEXT://127.0.0.1:{port}", PYTHONPATH=str(source),
                       KAFKA_ROOT=str(work / "kafka-bin"))
            report = work / "report.xml"
            command = [sys.executable, "-m", "pytest", "test/integration", "-q", "-p", "no:cacheprovider",
                       "-o", "addopts=", "--timeout=120", f"--junitxml={report}"]
            if selection:
                command += ["-k", selection]
            subprocess.run(command, cwd=source, env=env, check=False)
        if not report.exists():
            print("the suite did not run (see above)")
            return 1
        counts, failures = outcomes(report)
        ran = counts["passed"] + counts["failure"] + counts["error"]
        print(f"\nkafka-python {source.name} integration suite against halfmq (KAFKA_VERSION={kafka_version}):")
        print(f"  {counts['passed']}/{ran} passed, {counts['failure']} failed, {counts['error']} errors, "
              f"{counts['skipped']} skipped")
        for name, message in failures:
            print(f"  FAIL {name}: {message}")
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka-version", default="3.9.0", help="the Kafka release the suite assumes (KAFKA_VERSION)")
    parser.add_argument("-k", dest="selection", help="pytest -k expression: run only these tests")
    parser.add_argument("--database-url", help="the broker's database (default: a temporary SQLite file)")
    parser.add_argument("--sdist", type=Path, help="a kafka-python sdist to use instead of downloading one")
    args = parser.parse_args()
    return run(args.kafka_version, args.selection, args.database_url, args.sdist)


if __name__ == "__main__":
    raise SystemExit(main())
