"""The Spark session surge's analysis jobs run in: ``local[*]`` unless a master is given."""

from __future__ import annotations

import os
from functools import cache

DEFAULT_MASTER = "local[*]"


@cache
def session(master: str | None = None):
    """One SparkSession per process. The master is ``master``, else ``$SURGE_SPARK_MASTER``,
    else the one ``spark-submit --master`` set, else ``local[*]``.

    Small shuffles (a run is thousands of rows, not billions), no UI, quiet logs.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession
    chosen = master or os.environ.get("SURGE_SPARK_MASTER")
    builder = (SparkSession.builder
               .appName("surge-analyze")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC"))
    if chosen or not SparkConf().contains("spark.master"):
        builder = builder.master(chosen or DEFAULT_MASTER).config(
            "spark.driver.memory", os.environ.get("SURGE_SPARK_DRIVER_MEMORY", "2g"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
