"""The whole suite: Spark drivers it starts neither read nor write the user's class-data archive
(``tests/spark/test_quiet_console.py`` checks the archive in a directory of its own)."""

import os

os.environ.setdefault("SURGE_SPARK_CLASS_CACHE", "off")
