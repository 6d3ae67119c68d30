"""The Spark session surge's analysis jobs run in: ``local[*]`` unless a master is given."""

from __future__ import annotations

import os
from functools import cache

DEFAULT_MASTER = "local[*]"


@cache
def session(master: str | None = None):
    """One SparkSession per process, on ``master``, ``$SURGE_SPARK_MASTER`` or ``local[*]``.

    Small shuffles (a run is thousands of rows, not billions), no UI, quiet logs.
    """
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder
             .appName("surge-analyze")
             .master(master or os.environ.get("SURGE_SPARK_MASTER", DEFAULT_MASTER))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", os.environ.get("SURGE_SPARK_DRIVER_MEMORY", "2g"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
