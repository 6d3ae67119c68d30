"""Provisioning document 000's uniform cluster over SSH, against a real sshd on loopback (two
hosts: 127.0.0.1 and 127.0.1.2, one server).

IBM MQ cannot be installed here, so the MQ control commands are stand-ins
(tests/integration/mq_standin_bin, clearly named) that drive emulated queue managers
(tests/mqemu, NOT IBM MQ) and log their command lines: strmqm starts one listening on its
CONNAME, running the -ic file; runmqsc, dspmq and endmqm talk to it. Everything else is real:
the SSH layer, uploads, the command sequence, the parsing of dspmq and runmqsc output, error
reporting, the record of every remote command, and IBM's ibmmq package putting the messages
whose depths runmqsc then reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import SurgeError
from orchestrator.specs.topology import TopologySpec
from tests.mqemu import end_all, install_standins
from tests.sshd import missing, running_sshd
from topologies.mq import uniform
from topologies.mq.provision import UniformClusterProvisioner

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

HOST_B = "127.0.1.2"
PORT_BASE = 9510  # each host's first queue manager listens here (no free port the emulator picks)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with running_sshd(tmp_path_factory.mktemp("sshd"), also=(HOST_B,)) as server:
        yield server


def topology(sshd, root: Path, **changes) -> TopologySpec:
    ssh = {"port": sshd.port, "user": sshd.user, "key_file": str(sshd.key_file),
           "known_hosts": "strict", "known_hosts_file": str(sshd.known_hosts_file),
           "connect_timeout": 5, "command_timeout": 30, "retries": 0}
    spec = {
        "name": "mq-it", "broker": "ibmmq", "placement": "ssh", "members": 4, "start": 1,
        "queues": [{"name": "request%d", "count": 2}],
        "ibmmq": {"hosts": [{"name": "QMHostA", "address": "127.0.0.1", "members": 2},
                            {"name": "QMHostB", "address": HOST_B, "members": 2}],
                  "port_base": PORT_BASE,
                  "bin_dir": str(root / "bin"), "files_dir": str(root / "nfs1"), "ssh": ssh},
        **changes}
    return TopologySpec.model_validate(spec)


@pytest.fixture
def standins(tmp_path) -> Iterator[Path]:
    install_standins(tmp_path / "bin")
    yield tmp_path
    assert end_all(tmp_path / "bin") == []  # the test's down() ended every one it started


def put(ibmmq, qm: uniform.QueueManager, queue: str, count: int) -> None:
    """``count`` messages on ``queue`` of ``qm``, through IBM's ibmmq over the emulator."""
    C = ibmmq.CMQC
    where = f"{qm.address}({qm.port})"  # its CONNAME names the host, which no DNS resolves here
    cd = ibmmq.CD(ChannelName=b"PERF.APP.CHL", ConnectionName=where.encode(),
                  ChannelType=ibmmq.CMQXC.MQCHT_CLNTCONN, TransportType=ibmmq.CMQXC.MQXPT_TCP)
    connection = ibmmq.QueueManager(None)
    connection.connect_with_options(qm.name, cd=cd)
    target = ibmmq.Queue(connection, queue, C.MQOO_OUTPUT)
    for n in range(count):
        target.put(f"m{n}".encode())
    target.close()
    connection.disconnect()


def calls(root: Path) -> list[str]:
    log = root / "bin" / "state" / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_up_scale_out_scale_in_depths_and_down_over_ssh(sshd, standins, emulated_ibmmq):
    spec = topology(sshd, standins)
    recorded = []
    provisioner = UniformClusterProvisioner(spec, record=recorded.append)
    try:
        members = provisioner.up()
        files = uniform.file_paths(spec)
        assert Path(files["ini"]).read_text() == uniform.ini_text(spec)
        assert Path(files["mqsc"]).read_text() == uniform.mqsc_text(spec)
        assert Path(files["ccdt"]).read_text() == uniform.ccdt_text(spec)
        created = [c for c in calls(standins) if c.startswith("crtmqm")]
        assert created == [uniform.crtmqm(spec, qm) for qm in uniform.queue_managers(spec)]
        assert [m.running for m in members] == [True, False, False, False]
        assert {m.endpoint for m in members} == {"*UC01QM"}  # the QM group, via the CCDT

        assert provisioner.up()[0].running  # idempotent: nothing created twice
        assert len([c for c in calls(standins) if c.startswith("crtmqm")]) == 4

        started = provisioner.start_member()
        assert (started.name, started.running) == ("UC01QM02", True)
        qms = uniform.queue_managers(spec)
        put(emulated_ibmmq, qms[0], "request1", 3)  # the -ic file defined it at strmqm
        put(emulated_ibmmq, qms[1], "request1", 2)
        put(emulated_ibmmq, qms[1], "request2", 4)
        assert provisioner.settled_queue_depths() == {"request1": 5, "request2": 4}
        provisioner.stop_member(1)
        assert "endmqm -r UC01QM02" in calls(standins)
        assert [m.running for m in provisioner.status()] == [True, False, False, False]
        assert provisioner.settled_queue_depths() == {"request1": 3, "request2": 0}
        sample = provisioner.sample()
        assert [m.running for m in sample.members] == [True, False, False, False]

        commands = [r.command for r in recorded]
        assert all(r.status is not None for r in recorded)
        assert {r.host for r in recorded} == {"127.0.0.1", HOST_B}  # QMHostA, QMHostB
        assert any(c.endswith("strmqm UC01QM01") for c in commands)
        assert any(c.endswith("dspmq -m UC01QM04") for c in commands)
    finally:
        said = provisioner.down()
    assert said == [f"deleted UC01QM0{i} on QMHost{'AABB'[i - 1]}" for i in range(1, 5)]
    assert not [c for c in (standins / "bin" / "state").iterdir() if c.name.startswith("UC01")]


def test_a_failing_command_stops_provisioning_with_host_command_and_stderr(sshd, standins):
    spec = topology(sshd, standins)
    (standins / "bin" / "state").mkdir()
    (standins / "bin" / "state" / "fail-crtmqm").write_text("UC01QM03\n")
    provisioner = UniformClusterProvisioner(spec)
    try:
        with pytest.raises(SurgeError) as caught:
            provisioner.up()
        message = str(caught.value)
        assert HOST_B in message and "UC01QM03" in message and "crtmqm" in message
        assert "no space left on device" in message
        assert not [c for c in calls(standins) if c.startswith(("crtmqm", "strmqm"))
                    and "UC01QM04" in c]  # nothing after the failure
    finally:
        provisioner.down()


def test_with_sudo_queue_managers_start_in_their_slices_as_root(sshd, standins):
    spec = topology(sshd, standins, cpu_per_member=2,
                    ibmmq={**topology(sshd, standins).ibmmq.model_dump(exclude_none=True),
                           "sudo": True, "mq_user": "mqm"})
    recorded = []
    provisioner = UniformClusterProvisioner(spec, record=recorded.append)
    try:
        provisioner.up()
        provisioner.start_member()
        lines = calls(standins)
        assert [c for c in lines if c.startswith(("sudo", "systemctl", "systemd-run",
                                                  "strmqm"))] == [
            "sudo -n systemctl set-property --runtime mq-UC01QM01.slice CPUQuota=200%",
            "systemctl set-property --runtime mq-UC01QM01.slice CPUQuota=200%",
            "sudo -n systemd-run --scope --slice=mq-UC01QM01.slice --unit=UC01QM01-start "
            "--uid=mqm strmqm UC01QM01",
            "systemd-run --scope --slice=mq-UC01QM01.slice --unit=UC01QM01-start --uid=mqm "
            "strmqm UC01QM01",
            "strmqm UC01QM01",
            "sudo -n systemctl set-property --runtime mq-UC01QM02.slice CPUQuota=200%",
            "systemctl set-property --runtime mq-UC01QM02.slice CPUQuota=200%",
            "sudo -n systemd-run --scope --slice=mq-UC01QM02.slice --unit=UC01QM02-start "
            "--uid=mqm strmqm UC01QM02",
            "systemd-run --scope --slice=mq-UC01QM02.slice --unit=UC01QM02-start --uid=mqm "
            "strmqm UC01QM02",
            "strmqm UC01QM02"]
        assert [m.running for m in provisioner.status()] == [True, True, False, False]
        assert any(r.command.endswith("--uid=mqm strmqm UC01QM02") and r.status == 0
                   for r in recorded)
        ini = Path(uniform.file_paths(spec)["ini"]).read_text()
        assert "TuningParameters:\n   MonitorPublishHeartBeat=10\n" in ini
    finally:
        provisioner.down()
