"""Spark ingestion for halfmq: the ``halfmq`` data source and the ``python -m spark_ingest`` job.

>>> import spark_ingest
>>> spark_ingest.register(spark)
>>> spark.read.format("halfmq").option("url", "http://127.0.0.1:8080").option("topic", "orders").load()

Only committed messages are read (``read_committed``). The source talks to the
broker over HTTP like any client; see ``docs/spark.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "register"]

FORMAT = "halfmq"


def register(spark: SparkSession) -> None:
    """Register the ``halfmq`` format with ``spark`` (once per session; repeating is harmless)."""
    # Imported here so ``import spark_ingest`` works (e.g. for the CLI's --help) before pyspark loads.
    from spark_ingest.datasource import HalfmqDataSource

    spark.dataSource.register(HalfmqDataSource)
