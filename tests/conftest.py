"""The whole suite: Spark drivers it starts neither read nor write the user's class-data archive
(``tests/spark/test_quiet_console.py`` checks the archive in a directory of its own)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("SURGE_SPARK_CLASS_CACHE", "off")

# The MQI emulator's fixtures (emulated_ibmmq, qmgrs): built and started only where a test asks.
pytest_plugins = ["tests.mqemu.fixtures"]

# Topology leases, member records and discovery files go to a directory of the suite's own, never
# into the user's ~/.local/state/surge (tests that need another set SURGE_STATE_DIR themselves).
if "SURGE_STATE_DIR" not in os.environ:
    os.environ["SURGE_STATE_DIR"] = tempfile.mkdtemp(prefix="surge-test-state-")
    atexit.register(shutil.rmtree, os.environ["SURGE_STATE_DIR"], True)
