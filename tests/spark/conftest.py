"""Fixtures for the Spark tests: one local Spark session per run, one broker per module.

The session is ``local[2]`` with the UI off and tiny shuffle partitions so the
whole suite stays within a few minutes on two cores. Brokers are real
``python -m app`` processes on a temporary SQLite database; test data goes in
through the broker's HTTP API with httpx (the SDK is not used on purpose).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.cluster import StandaloneCluster
from tests.spark.helpers import BrokerApi
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test run, with the ``halfmq`` format registered."""
    # Python workers must use this interpreter (the venv with pyarrow, httpx and the repo).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_ingest

    session = (
        SparkSession.builder.master("local[2]")
        .appName("halfmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.minBatchesToRetain", "10")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    spark_ingest.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A real broker process for the module, on its own SQLite database."""
    directory = tmp_path_factory.mktemp("broker")
    with BrokerProcess(f"sqlite:///{directory}/broker.db", log_path=directory / "broker.log") as process:
        yield process


@pytest.fixture(scope="module")
def api(broker: BrokerProcess) -> Iterator[BrokerApi]:
    """HTTP helpers bound to the module's broker."""
    client = BrokerApi(broker.url)
    yield client
    client.http.close()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A standalone Spark master and worker on 127.0.0.1, one for the whole run."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
