"""The fault schedule's timing: when faults start, when load faults end, what they impose."""

import threading

from orchestrator.errors import ProvisionError
from orchestrator.run.faults import FaultInjector
from orchestrator.specs.plan import expand
from orchestrator.specs.scenario import FaultSpec, StepSpec
from tests.fakes import FakeClock
from topologies.base import Member, Provisioner


def injector(*faults):
    phases = expand([StepSpec(rate_per_sender=10, hold=30), StepSpec(rate_per_sender=20,
                                                                     hold=30)])
    events = []
    schedule = FaultInjector([FaultSpec.model_validate(f) for f in faults], phases, None,
                             lambda kind, **fields: events.append((kind, fields)),
                             threading.Event())
    return schedule, events


def test_spike_and_slowdown_apply_for_their_duration_at_times_or_steps():
    schedule, events = injector(
        {"kind": "publish_spike", "at_step": 2, "duration": 10, "factor": 3},
        {"kind": "consumer_slowdown", "at": 5, "duration": 10, "delay": "30ms"})
    schedule.tick(4.9)
    assert schedule.spike_factor() == 1.0 and schedule.consumer_delay_s() is None
    schedule.tick(5.0)
    assert schedule.consumer_delay_s() == 0.03
    schedule.tick(15.0)
    assert schedule.consumer_delay_s() is None
    schedule.tick(30.0)
    assert schedule.spike_factor() == 3.0
    schedule.tick(40.0)
    assert schedule.spike_factor() == 1.0
    kinds = [(kind, fields.get("action")) for kind, fields in events]
    assert kinds == [("fault", "consumer_slowdown"), ("fault_cleared", "consumer_slowdown"),
                     ("fault", "publish_spike"), ("fault_cleared", "publish_spike")]
    assert events[2][1]["elapsed_s"] == 30.0


def test_overlapping_spikes_multiply():
    schedule, _ = injector({"kind": "publish_spike", "at": 1, "factor": 2},
                           {"kind": "publish_spike", "at": 2, "factor": 1.5})
    schedule.tick(2)
    assert schedule.spike_factor() == 3.0


class Cluster(Provisioner):
    """Members that record what is done to them; ``vm``: it can stop a member's VM and wait
    for the quorum queues, as the local RabbitMQ provisioner does."""

    def __init__(self, members: int = 3, vm: bool = True):
        self.pids = [100 + i for i in range(members)]
        self.calls: list[tuple] = []
        self.next_pid = 200
        if vm:
            self.stop_vm = lambda index: self._stop(index, "stop_vm")
            self.await_quorum = lambda stop=None: self.calls.append(("await_quorum",)) or 1.5

    def member(self, index):
        return Member(index, f"m{index}", "memory", 5672 + index, 0, 0,
                      running=self.pids[index] is not None, pid=self.pids[index])

    def status(self):
        return [self.member(i) for i in range(len(self.pids))]

    def _stop(self, index, how):
        self.calls.append((how, index))
        self.pids[index] = None

    def stop_member(self, index, kill=False):
        self._stop(index, "kill" if kill else "stop_member")

    def start_member(self, index=None):
        self.calls.append(("start", index))
        self.pids[index], self.next_pid = self.next_pid, self.next_pid + 1
        return self.member(index)


def run_member_faults(provisioner, *faults, stop=None):
    events = []
    schedule = FaultInjector([FaultSpec.model_validate(f) for f in faults],
                             expand([StepSpec(rate_per_sender=10, hold=60)]), provisioner,
                             lambda kind, **fields: events.append((kind, fields)),
                             stop or threading.Event(), FakeClock())
    schedule.tick(1)
    schedule.wait(5)
    return events


def test_a_rolling_restart_restarts_each_vm_and_waits_for_the_quorum_before_the_next():
    cluster = Cluster()
    events = run_member_faults(cluster, {"kind": "rolling_restart", "at": 0})
    assert cluster.calls == [call for i in range(3) for call in
                             (("stop_vm", i), ("start", i), ("await_quorum",))]
    restarted = [fields for kind, fields in events if kind == "member_restarted"]
    assert [(e["pid_before"], e["pid_after"]) for e in restarted] == [(100, 200), (101, 201),
                                                                      (102, 202)]
    assert [kind for kind, _ in events] == ["fault"] + [
        "member_stopped", "member_restarted", "quorum_restored"] * 3


def test_a_placement_without_vm_control_restarts_members_its_own_way():
    cluster = Cluster(2, vm=False)
    run_member_faults(cluster, {"kind": "rolling_restart", "at": 0})
    assert cluster.calls == [("stop_member", 0), ("start", 0), ("stop_member", 1), ("start", 1)]


class Alarms:
    """A member that takes memory alarms and queue deletions, or fails to set one."""

    def __init__(self, fail_on: int | None = None):
        self.calls, self.fail_on = [], fail_on

    def member(self, index):
        return Member(index, f"m{index}", "memory", 5672, 0, 0, running=True)

    def status(self):
        return [self.member(0), self.member(1)]

    def memory_alarm(self, index, on):
        if on and index == self.fail_on:
            raise ProvisionError(f"m{index} refused")
        self.calls.append(("alarm", index, on))

    def delete_queues(self):
        self.calls.append(("delete",))
        return ["q1", "q2"]

    def declare_queues(self):
        self.calls.append(("declare",))


def test_a_memory_alarm_is_set_for_its_duration_and_always_cleared():
    cluster = Alarms()
    events = run_member_faults(cluster, {"kind": "memory_alarm", "at": 0, "duration": 8})
    assert cluster.calls == [("alarm", 0, True), ("alarm", 1, True), ("alarm", 0, False),
                             ("alarm", 1, False)]
    assert [kind for kind, _ in events] == ["fault", "memory_alarm", "fault_cleared"]
    failing = Alarms(fail_on=1)
    events = run_member_faults(failing, {"kind": "memory_alarm", "at": 0, "member": None})
    assert failing.calls == [("alarm", 0, True), ("alarm", 0, False)]  # what was set, undone
    assert [kind for kind, _ in events] == ["fault", "fault_failed", "fault_cleared"]


def test_queues_are_deleted_then_declared_again_and_unsupported_faults_say_so():
    cluster = Alarms()
    events = run_member_faults(cluster, {"kind": "delete_queues", "at": 0, "restart_after": 3})
    assert cluster.calls == [("delete",), ("declare",)]
    assert [kind for kind, _ in events] == ["fault", "queues_deleted", "fault_cleared"]
    events = run_member_faults(Cluster(vm=False), {"kind": "memory_alarm", "at": 0})
    assert events[-1][0] == "fault_failed" and "not supported" in events[-1][1]["error"]


def test_a_stopped_run_takes_no_member_down():
    cluster, stop = Cluster(), threading.Event()
    stop.set()
    events = run_member_faults(cluster, {"kind": "rolling_restart", "at": 0}, stop=stop)
    assert cluster.calls == []
    assert [kind for kind, _ in events] == ["fault"] + ["fault_failed"] * 3
