"""Local agents: one process started, the others forked from it, each with its own token, port
and log; one that fails to start, or a run that ends before they do, leaves none running; one
lost does not take the others with it; all go with the process that started them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from drivers import protocol
from orchestrator.agents import local
from orchestrator.agents.launcher import Fleet, LocalLauncher
from orchestrator.errors import AgentError
from orchestrator.run.crew import Crew
from tests.fakes import FakeClock, MemoryLauncher
from tests.polling import eventually


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and alive(process.pid):
                found.append(process.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


@pytest.fixture
def started(monkeypatch):
    """The processes :func:`local._start` starts, in order (each carries all the agents); with
    ``started.failing`` set to N, the one started says a hello for each agent before N, then
    something else, and then sleeps."""
    processes = []
    original = local._start

    def start(tokens, log_dir, max_lifetime_s, hide, broker):
        if started.failing is not None:
            hellos = [json.dumps({"port": 1, "pid": os.getpid(),
                                  "protocol": protocol.PROTOCOL_VERSION})
                      for _ in range(started.failing)]
            script = "".join(f"print({h!r}, flush=True); " for h in hellos)
            process = subprocess.Popen(
                [sys.executable, "-c", script + "print('not a hello', flush=True); "
                 "import time; time.sleep(60)"], stdout=subprocess.PIPE, start_new_session=True)
        else:
            process = original(tokens, log_dir, max_lifetime_s, hide, broker)
        processes.append(process)
        return process

    monkeypatch.setattr(local, "_start", start)
    started.failing = None
    started.processes = processes
    return started


def test_one_process_starts_and_the_other_agents_are_forked_from_it(tmp_path, started):
    logs = tmp_path / "001-scen-rate_per_sender=50,size=256-r1"  # a campaign cell's name
    agents = local.spawn_local_agents(3, logs, 60)
    (first,) = started.processes
    try:
        assert [a.index for a in agents] == [0, 1, 2]
        assert len({a.port for a in agents}) == len({a.token for a in agents}) == 3
        assert agents[0].process is first
        assert all(a.hello().pid == a.process.pid for a in agents)
        assert len({a.process.pid for a in agents}) == 3
        assert all(psutil.Process(a.process.pid).ppid() == first.pid for a in agents[1:])
        assert sorted(group(first.pid)) == sorted(a.process.pid for a in agents)
        assert all("drivers.agent" in " ".join(psutil.Process(a.process.pid).cmdline())
                   for a in agents)
        assert all(a.process.poll() is None for a in agents)
    finally:
        for agent in agents:
            agent.stop()
    assert all(a.process.poll() is not None for a in agents)
    assert group(first.pid) == []
    assert sorted(p.name for p in logs.iterdir()) == [f"agent-{i}.log" for i in range(3)]


def test_one_agent_failing_to_start_leaves_none_running(tmp_path, started):
    started.failing = 1
    with pytest.raises(AgentError, match=r"agent 1 \(log: .*agent-1.log\) did not start"):
        local.spawn_local_agents(3, tmp_path, 60)
    (process,) = started.processes
    assert process.poll() is not None and group(process.pid) == []


def test_agents_begun_start_beside_the_run_and_are_stopped_if_never_started(tmp_path, started):
    launcher = LocalLauncher(2, tmp_path / "agents")
    assert launcher.begin(60) is True
    (process,) = started.processes
    assert alive(process.pid)
    assert eventually(lambda: len(group(process.pid)) == 2)  # the copy is forked, unannounced
    launcher.stop(Fleet([], [], []))
    assert group(process.pid) == []
    assert not (tmp_path / "agents").exists()  # their empty logs gone with them


def test_agents_begun_are_the_ones_started(tmp_path, started):
    launcher = LocalLauncher(2, tmp_path)
    launcher.begin(60)
    fleet = launcher.start(60)
    try:
        assert len(started.processes) == 1 and fleet.agents[0].process is started.processes[0]
    finally:
        launcher.stop(fleet)
    assert group(started.processes[0].pid) == []
    # stopped together, and gone: not even a zombie of a copy is left to reap
    assert not [a.process.pid for a in fleet.agents if psutil.pid_exists(a.process.pid)]


def test_an_agent_lost_takes_no_other_with_it(tmp_path, started):
    agents = local.spawn_local_agents(3, tmp_path, 60)
    try:
        os.kill(agents[0].process.pid, signal.SIGKILL)  # the one the others were forked from
        assert agents[0].process.wait(10) == -signal.SIGKILL
        os.kill(agents[2].process.pid, signal.SIGKILL)
        assert agents[2].process.wait(10) == -1  # not this process's child: no status
        assert agents[1].hello().pid == agents[1].process.pid  # still serving
        agents[1].stop()
        assert agents[1].process.poll() is not None
    finally:
        for agent in agents:
            agent.stop()
    assert group(started.processes[0].pid) == []


def test_every_agent_exits_with_the_process_that_started_them(tmp_path):
    starter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from orchestrator.agents.local import spawn_local_agents
        agents = spawn_local_agents(2, Path({str(tmp_path)!r}), 60)
        print(" ".join(str(a.process.pid) for a in agents), flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pids = [int(pid) for pid in starter.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
    finally:
        starter.kill()
        starter.wait()
    assert eventually(lambda: not any(alive(pid) for pid in pids), 5.0), \
        "the agents outlived their controller"


@pytest.mark.parametrize("started_too", [False, True])
def test_a_crew_stops_the_agents_it_began_whether_or_not_they_started(started_too):
    events = []
    launcher = MemoryLauncher(2, FakeClock())
    crew = Crew(launcher, None, lambda kind, **fields: events.append(kind), FakeClock())
    crew.begin(60)
    if started_too:
        crew.start(60)
        crew.stop()
    crew.abandon()  # what a run's teardown does last
    assert launcher.stopped and all(a.stopped == started_too for a in launcher.agents)
    assert events == (["agents_up", "agents_down"] if started_too else [])  # none said unstarted


def test_the_agents_are_told_the_driver_to_load_before_the_copies_are_forked(tmp_path, started):
    launcher = LocalLauncher(1, tmp_path, broker="rabbitmq")
    fleet = launcher.start(60)
    try:
        command = psutil.Process(fleet.agents[0].process.pid).cmdline()
        assert command[command.index("--broker") + 1] == "rabbitmq"
    finally:
        launcher.stop(fleet)


def test_a_driver_that_cannot_load_is_left_for_configure_to_report(monkeypatch):
    from drivers import agent
    monkeypatch.setitem(agent.DRIVERS, "rabbitmq", "drivers.no_such_driver")
    agent.preload("rabbitmq")  # nothing raised: /configure says what is missing


TOPOLOGY = """\
name: head-start
placement: existing
cpu_per_member: 2
existing:
  members: [{uri: "amqp://127.0.0.1:1"}]
  credentials: {user: perf, password_env: HEAD_START_PASSWORD}
queues: [{name: q}]
"""
SCENARIO = """\
name: head-start
topology: topology.yaml
agents: 2
workload: {queue: q, senders: 1, receivers: 1}
plan: ["100:2s"]
"""


def test_a_run_that_ends_before_its_agents_start_leaves_neither_them_nor_a_directory(
        tmp_path, started, monkeypatch):
    from orchestrator.errors import SurgeError
    from orchestrator.run import controller, entry
    from orchestrator.run.lines import Lines

    def refused(self):
        assert len(started.processes) == 1, "the agents begin before the controller loads"
        assert alive(started.processes[0].pid)
        assert list((tmp_path / "runs" / self.run_id / "agents").iterdir())
        raise SurgeError("topology head-start is in use by another run")

    monkeypatch.setattr(controller.Controller, "run", refused)
    monkeypatch.setenv("HEAD_START_PASSWORD", "secret")
    (tmp_path / "topology.yaml").write_text(TOPOLOGY)
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    said = []
    with pytest.raises(SurgeError, match="in use"):
        entry.run_file(tmp_path / "scenario.yaml", [],
                       entry.RunOptions(runs_dir=tmp_path / "runs", live=False, web="off"),
                       Lines(said.append, said.append, said.append, said.append))
    assert group(started.processes[0].pid) == []
    assert not (tmp_path / "runs").exists()  # made for the agents' logs, and removed
