"""The Prometheus file_sd document of a run: its shape, and the file's life."""

import json

from orchestrator.run.discovery import (
    default_sd_dir,
    remove_service_discovery,
    target,
    targets_document,
    write_service_discovery,
)


def test_the_document_is_what_file_sd_configs_reads():
    document = targets_document("127.0.0.1:19420", ["127.0.0.1:40001", "load-1:40002"],
                                "20260101-120000-quickstart", "quickstart")
    labels = {"run_id": "20260101-120000-quickstart", "scenario": "quickstart"}
    assert document == [
        {"targets": ["127.0.0.1:19420"], "labels": {**labels, "role": "controller"}},
        {"targets": ["127.0.0.1:40001", "load-1:40002"], "labels": {**labels, "role": "agent"}}]


def test_without_agents_there_is_only_the_controllers_group():
    document = targets_document("127.0.0.1:19421", [], "r1", "s")
    assert [group["labels"]["role"] for group in document] == ["controller"]


def test_targets_are_host_colon_port_with_ipv6_in_brackets():
    assert target("10.0.0.5", 9100) == "10.0.0.5:9100"
    assert target("load-1.example", 9100) == "load-1.example:9100"
    assert target("::1", 9100) == "[::1]:9100"
    assert target("[fe80::1]", 9100) == "[fe80::1]:9100"


def test_the_file_is_written_replaced_and_removed(tmp_path):
    path = write_service_discovery(tmp_path, "r1", "quickstart", "127.0.0.1:19420", [])
    assert path == tmp_path / "r1.json"
    path = write_service_discovery(tmp_path, "r1", "quickstart", "127.0.0.1:19420",
                                   ["127.0.0.1:40001"])
    assert json.loads(path.read_text())[1]["targets"] == ["127.0.0.1:40001"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1.json"]  # no partial file left
    remove_service_discovery(tmp_path, "r1")
    remove_service_discovery(tmp_path, "r1")  # gone already: no error
    assert list(tmp_path.iterdir()) == []


def test_every_run_on_the_machine_writes_into_the_state_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("SURGE_STATE_DIR", str(tmp_path))
    assert default_sd_dir() == tmp_path / "prometheus"


def test_each_broker_member_is_a_target_of_its_own_with_its_name():
    document = targets_document("127.0.0.1:19420", [], "r1", "s",
                                {"rabbit-0": "127.0.0.1:15692", "rabbit-1": "127.0.0.1:15693"})
    brokers = [g for g in document if g["labels"]["role"] == "broker"]
    assert [(g["targets"], g["labels"]["member"]) for g in brokers] == [
        (["127.0.0.1:15692"], "rabbit-0"), (["127.0.0.1:15693"], "rabbit-1")]
    assert all(g["labels"]["run_id"] == "r1" for g in brokers)
