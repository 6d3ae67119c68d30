"""``surge prometheus-config``: a scrape job whose file_sd pattern is where runs write their
targets, and that directory made, so a Prometheus started before any run can watch it."""

import yaml
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.run.discovery import sd_file, write_service_discovery


def test_the_job_reads_where_runs_write_and_the_directory_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("SURGE_STATE_DIR", str(tmp_path / "state"))
    done = CliRunner().invoke(app, ["prometheus-config", "--interval", "2s"])
    assert done.exit_code == 0, done.output
    (job,) = yaml.safe_load(done.stdout)["scrape_configs"]
    assert job["scrape_interval"] == "2s" and job["honor_labels"] is True
    (files,) = job["file_sd_configs"]
    directory = tmp_path / "state" / "prometheus"
    assert directory.is_dir() and files["files"] == [str(directory / "*.json")]
    written = write_service_discovery(directory, "r1", "s", "127.0.0.1:9", [])
    assert written == sd_file(directory, "r1") and written.match(files["files"][0])
    bad = CliRunner().invoke(app, ["prometheus-config", "--interval", "soon"])
    assert bad.exit_code == 2 and "--interval" in bad.output
