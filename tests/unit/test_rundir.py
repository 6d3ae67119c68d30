import json

import pyarrow.parquet as pq

from results.rundir.manifest import FORMAT_VERSION, RunManifest
from results.rundir.tables import RunWriter, read_table


def member_row(i):
    return {"t": float(i), "elapsed_s": float(i), "member": "m0", "running": True,
            "cpu_percent": None if i == 0 else 10.0, "cpu_quota_cores": 0.5, "connections": 3}


def test_parts_are_complete_files_and_manifest_is_versioned(tmp_path):
    writer = RunWriter(tmp_path, flush_every_s=3600)
    writer.write_manifest(RunManifest(run_id="r1", outcome="running",
                                      scenario={"name": "s"}))
    for i in range(3):
        writer.row("members", member_row(i))
    writer.flush()
    writer.row("members", member_row(3))
    writer.event("step", step=2)
    # Mid-run (no close): what was flushed is readable, the event is on disk already.
    parts = sorted((tmp_path / "metrics" / "members").glob("*.parquet"))
    assert len(parts) == 1 and pq.read_table(parts[0]).num_rows == 3
    assert json.loads((tmp_path / "events.jsonl").read_text())["step"] == 2
    assert json.loads((tmp_path / "run.json").read_text())["format_version"] == FORMAT_VERSION
    writer.close()
    assert read_table(tmp_path, "members").num_rows == 4


def test_unreadable_part_is_skipped(tmp_path):
    writer = RunWriter(tmp_path)
    writer.row("members", member_row(1))
    writer.close()
    (tmp_path / "metrics" / "members" / "part-00009.parquet").write_bytes(b"not parquet")
    assert read_table(tmp_path, "members").num_rows == 1
    assert read_table(tmp_path, "ticks").num_rows == 0
