"""``surge run --no-live`` says the few lines that matter (the live page's URL, errors) and
progress lines, not the events of each step, on a fake clock with in-memory agents."""

from orchestrator.run.controller import Controller
from orchestrator.run.liveview import LiveView
from tests.fakes import FakeClock, MemoryLauncher, ScriptedProvisioner, idle_host, no_probe
from tests.unit.test_controller import scenario, topology


def test_no_live_says_the_page_url_and_not_the_steps(tmp_path, capsys):
    spec = scenario([{"rate_per_sender": 10, "hold": "2s"}, {"rate_per_sender": 20, "hold": "2s"}])
    topo, clock = topology(), FakeClock()
    controller = Controller(spec, topo, tmp_path, live=False, web="127.0.0.1:0",
                            provisioner=ScriptedProvisioner(topo, clock, 0.5),
                            launcher=MemoryLauncher(2, clock), clock=clock, host_cpu=idle_host,
                            probes=no_probe, preflights=no_probe, background=False,
                            sd_dir=tmp_path / "sd")
    assert controller.run().outcome == "completed"
    lines = capsys.readouterr().err.splitlines()
    pages = [line for line in lines if "web: live page: http://127.0.0.1:" in line]
    assert len(pages) == 1, lines
    assert not [line for line in lines if " step: " in line or " provision: " in line], lines
    progress = [line for line in lines if line.startswith("[") and " step " in line]
    assert progress and "msg/s" in progress[0], lines  # a progress line, with units


def test_no_live_says_lines_of_no_event_and_what_went_wrong_only(capsys):
    view = LiveView(enabled=False)
    view.say("metrics: port 9 is in use")
    view.say("12:00:00 step: 2", event="step")
    view.say("12:00:01 agent_lost: agent 1 lost", event="agent_lost")
    view.say("12:00:02 error: broker gone", event="error")  # the command's own last line says it
    assert capsys.readouterr().err.splitlines() == ["metrics: port 9 is in use",
                                                    "12:00:01 agent_lost: agent 1 lost"]
