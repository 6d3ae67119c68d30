"""Local agents: started side by side, each its own process, token and port; when one fails to
start, none is left running."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from orchestrator.agents import local
from orchestrator.agents.launcher import Fleet, LocalLauncher
from orchestrator.errors import AgentError
from orchestrator.run.crew import Crew
from tests.fakes import FakeClock, MemoryLauncher


def alive(process) -> bool:
    return process.poll() is None and psutil.pid_exists(process.pid)


@pytest.fixture
def started(monkeypatch):
    """The processes :func:`local.spawn_local_agents` starts, in order; the agent numbered
    ``started.failing`` says something else than a hello, and then sleeps."""
    processes = []
    original = local._start

    def start(index, log_dir, max_lifetime_s, hide, broker):
        if index == started.failing:
            process = subprocess.Popen(
                [sys.executable, "-c", "import time; print('not a hello', flush=True); "
                 "time.sleep(60)"], stdout=subprocess.PIPE, start_new_session=True)
            result = (index, "token", process)
        else:
            result = original(index, log_dir, max_lifetime_s, hide, broker)
        processes.append(result[2])
        return result

    monkeypatch.setattr(local, "_start", start)
    started.failing = None
    started.processes = processes
    return started


def test_every_agent_is_started_before_the_first_is_waited_for(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(local, "_start", lambda index, *_: calls.append(("start", index)) or
                        (index, f"token-{index}", None))
    monkeypatch.setattr(local, "_await", lambda index, token, process, log_dir: calls.append(
        ("await", index)) or index)
    assert local.spawn_local_agents(3, tmp_path, 60) == [0, 1, 2]
    assert calls == [("start", 0), ("start", 1), ("start", 2),
                     ("await", 0), ("await", 1), ("await", 2)]


def test_agents_start_each_with_its_own_token_and_port_and_stop(tmp_path, started):
    agents = local.spawn_local_agents(3, tmp_path, 60)
    try:
        assert [a.index for a in agents] == [0, 1, 2]
        assert len({a.port for a in agents}) == len({a.token for a in agents}) == 3
        assert all(a.hello().pid == a.process.pid for a in agents)
        assert all("drivers.agent" in " ".join(psutil.Process(a.process.pid).cmdline())
                   for a in agents)
    finally:
        for agent in agents:
            agent.stop()
    assert not any(alive(p) for p in started.processes)


def test_one_agent_failing_to_start_leaves_none_running(tmp_path, started):
    started.failing = 1
    with pytest.raises(AgentError, match=r"agent 1 \(log: .*agent-1.log\) did not start"):
        local.spawn_local_agents(3, tmp_path, 60)
    assert len(started.processes) == 3  # all were started before the failure was seen
    assert not any(alive(p) for p in started.processes)


def test_agents_begun_start_beside_the_run_and_are_stopped_if_never_started(tmp_path, started):
    launcher = LocalLauncher(2, tmp_path / "agents")
    assert launcher.begin(60) is True
    assert len(started.processes) == 2 and all(alive(p) for p in started.processes)
    launcher.stop(Fleet([], [], []))
    assert not any(alive(p) for p in started.processes)
    assert not (tmp_path / "agents").exists()  # their empty logs gone with them


def test_agents_begun_are_the_ones_started(tmp_path, started):
    launcher = LocalLauncher(2, tmp_path)
    launcher.begin(60)
    fleet = launcher.start(60)
    try:
        assert [a.process for a in fleet.agents] == started.processes  # none started twice
    finally:
        launcher.stop(fleet)
    assert not any(alive(p) for p in started.processes)


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


def test_an_agent_is_told_the_driver_to_load_once_it_has_said_its_first_line(tmp_path, started):
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
        assert len(started.processes) == 2, "the agents begin before the controller loads"
        assert all(alive(p) for p in started.processes)
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
    assert not any(alive(p) for p in started.processes)
    assert not (tmp_path / "runs").exists()  # made for the agents' logs, and removed
