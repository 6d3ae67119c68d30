"""``surge perftest`` runs a PerfTest command line for real: a local member, the load its
options describe, and a run directory whose accounting balances."""

import json

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("line", [
    ["-x", "2", "-y", "2", "-u", "pt-orders", "-r", "50", "-z", "3", "-qq", "-c", "100",
     "-f", "persistent", "-s", "512"],
    ["bin/runjava", "com.rabbitmq.perf.PerfTest", "-e", "pt-fan", "-t", "fanout", "-u", "pt-sub",
     "-x", "1", "-y", "1", "-r", "100", "-z", "3"],
    ["-sq", "-u", "pt-stream", "-x", "1", "-y", "2", "-r", "100", "-z", "3", "-c", "50",
     "-ca", "x-stream-offset=first", "-vs", "100:2", "-vs", "4000:2", "-jb"],
    ["-u", "pt-tx", "-x", "1", "-y", "1", "-r", "100", "-z", "3", "-m", "10", "-n", "4",
     "-mp", "contentType=text/plain,kind=order"],
    ["-x", "1", "-y", "2", "-r", "100", "-z", "3", "-E"],
], ids=["quorum-persistent", "fanout", "stream-variable-sizes", "transactions",
        "queue-per-consumer"])
def test_a_perftest_command_line_runs_and_balances(line, tmp_path):
    runs = tmp_path / "runs"
    done = CliRunner().invoke(app, ["perftest", "--out", str(tmp_path / "pt"), "--runs-dir",
                                    str(runs), "--no-live", "--set", "topology.port_base=8760",
                                    "--", *line])
    assert done.exit_code == 0, done.output
    (run_dir,) = runs.iterdir()
    manifest = json.loads((run_dir / "run.json").read_text())
    books = manifest["accounting"]
    assert manifest["outcome"] == "completed" and books["balanced"], books["explain"]
    assert books["sent"] > 0 and books["lost"] == 0
    assert manifest["scenario"]["name"] == "perftest"
    if "-sq" in line:  # each of the two readers of the stream is a subscription
        assert books["sent"] == 2 * books["published"] == books["received"]
        assert set(books["subscriptions"]) == {"pt-stream~1", "pt-stream~2"}
    if "-E" in line:  # no -u: each consumer a server-named queue of its own, every message
        assert books["received"] == 2 * books["published"]
        assert set(books["subscriptions"]) == {"perf-test~1", "perf-test~2"}
    if "-m" in line:
        assert manifest["accounting_details"]["committed"] == books["sent"]
    if "-e" in line:  # published to the exchange, the queue its one subscription
        assert books["published"] == books["sent"]
        assert set(books["subscriptions"]) == {"pt-sub"}
