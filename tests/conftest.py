"""The whole suite: Spark drivers it starts neither read nor write the user's class-data archive
(``tests/spark/test_quiet_console.py`` checks the archive in a directory of its own); the Python
processes it starts write and read compiled bytecode."""

import atexit
import os
import shutil
import sys
import tempfile

from tests.xdist_worker import worker_count, worker_share

os.environ.setdefault("SURGE_SPARK_CLASS_CACHE", "off")

# The suite starts hundreds of Python processes (runs, agents, command lines): each reads surge's
# bytecode cached, as an installed surge's is (pip compiles it), rather than compiling its sources
# again where the environment says not to write the cache (PYTHONDONTWRITEBYTECODE).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Workers of pytest-xdist (make test JOBS=2) split the MQI emulator's free-port range between
# them: a queue manager one worker starts must never be the one another worker's client finds.
if worker_count() > 1 and "MQEMU_PORTS" not in os.environ:
    _share = worker_share(range(9400, 9500))
    os.environ["MQEMU_PORTS"] = f"{_share.start}-{_share.stop - 1}"

# The MQI emulator's fixtures (emulated_ibmmq, qmgrs): built and started only where a test asks.
pytest_plugins = ["tests.mqemu.fixtures"]

# Topology leases, member records and discovery files go to a directory of the suite's own, never
# into the user's ~/.local/state/surge (tests that need another set SURGE_STATE_DIR themselves).
if "SURGE_STATE_DIR" not in os.environ:
    os.environ["SURGE_STATE_DIR"] = tempfile.mkdtemp(prefix="surge-test-state-")
    atexit.register(shutil.rmtree, os.environ["SURGE_STATE_DIR"], True)
