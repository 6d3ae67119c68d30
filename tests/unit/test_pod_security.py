"""Every pod surge ships passes the ``restricted`` Pod Security Standard (tests/pss.py): the
agent Job as surge renders it, the analysis CronJob and any other pod-bearing manifest under
``k8s/``; and the checker itself rejects each kind of violation, so the pass means something."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from orchestrator.agents.pods import render_agents
from orchestrator.specs.loader import load_topology
from tests.pss import pod_of, violations
from tests.unit.test_templates import EXAMPLES, K8S
from topologies.templates import fill_template

REPO = Path(__file__).resolve().parents[2]
POD_BEARING = {"agents/job.yaml", "base/analyze-cronjob.yaml"}


def agent_job() -> dict:
    """The agent Job as ``surge run`` renders it for the shipped Kubernetes topology."""
    topology = load_topology(REPO / "topologies" / "k8s-rabbitmq-3.yaml")
    return render_agents(3, topology, "20260101T120000Z-run1", "t" * 24, 600, cpu_limit=True)["job"]


def shipped() -> dict[str, dict]:
    """Every manifest under ``k8s/`` rendered with its example values."""
    return {name: yaml.safe_load(fill_template(K8S / name, values))
            for name, values in EXAMPLES.items()}


def image_user() -> int:
    """The numeric user the Containerfile's images run as (its one USER that is not root)."""
    users = set(re.findall(r"^USER +(\S+)", (REPO / "Containerfile").read_text(), re.MULTILINE))
    [user] = users - {"root"}
    return int(user)


def test_the_agent_job_passes_restricted():
    assert violations(agent_job()) == []


def test_every_pod_bearing_manifest_under_k8s_passes_restricted():
    manifests = shipped()
    assert {name for name, m in manifests.items() if pod_of(m)} == POD_BEARING
    for name, manifest in manifests.items():
        assert violations(manifest) == [], name


@pytest.mark.parametrize("manifest", [agent_job(), shipped()["base/analyze-cronjob.yaml"]],
                         ids=["agent-job", "analyze-cronjob"])
def test_the_pods_run_as_the_images_user_on_a_read_only_root_with_a_writable_tmp(manifest):
    _, spec = pod_of(manifest)
    assert spec["securityContext"]["runAsUser"] == image_user() != 0
    assert spec["securityContext"]["runAsGroup"] == image_user()
    volumes = {v["name"]: v for v in spec["volumes"]}
    for container in spec["containers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
        assert "emptyDir" in mounts["/tmp"] and "emptyDir" in mounts["/home/surge"]


# -- the checker rejects what it should -----------------------------------------------------------

def _pod(manifest: dict) -> dict:
    return pod_of(manifest)[1]


def _container(manifest: dict) -> dict:
    return _pod(manifest)["containers"][0]


def _context(manifest: dict) -> dict:
    return _container(manifest)["securityContext"]


RESTRICTED_BREAKS = {  # change -> the field its violation names
    "host network": (lambda m: _pod(m).update(hostNetwork=True), "spec.hostNetwork"),
    "host PID": (lambda m: _pod(m).update(hostPID=True), "spec.hostPID"),
    "host IPC": (lambda m: _pod(m).update(hostIPC=True), "spec.hostIPC"),
    "privileged": (lambda m: _context(m).update(privileged=True), "privileged is true"),
    "host process": (lambda m: _context(m).update(windowsOptions={"hostProcess": True}),
                     "hostProcess"),
    "capability beyond baseline": (
        lambda m: _context(m)["capabilities"].update(add=["SYS_ADMIN"]), "SYS_ADMIN"),
    "capability beyond restricted": (
        lambda m: _context(m)["capabilities"].update(add=["CHOWN"]), "CHOWN"),
    "no drop ALL": (lambda m: _context(m)["capabilities"].update(drop=["NET_RAW"]),
                    "drop does not have ALL"),
    "hostPath volume": (lambda m: _pod(m)["volumes"].append(
        {"name": "host", "hostPath": {"path": "/"}}), "hostPath"),
    "nfs volume": (lambda m: _pod(m)["volumes"].append(
        {"name": "share", "nfs": {"server": "nas", "path": "/x"}}), "['nfs']"),
    "host port": (lambda m: _container(m).setdefault("ports", []).append(
        {"containerPort": 80, "hostPort": 80}), "hostPort 80"),
    "AppArmor unconfined annotation": (lambda m: pod_of(m)[0].setdefault("annotations", {})
                                       .update({"container.apparmor.security.beta.kubernetes.io/"
                                                "agent": "unconfined"}), "apparmor"),
    "AppArmor unconfined field": (lambda m: _context(m).update(
        appArmorProfile={"type": "Unconfined"}), "appArmorProfile"),
    "SELinux type": (lambda m: _context(m).update(seLinuxOptions={"type": "spc_t"}), "spc_t"),
    "SELinux user": (lambda m: _pod(m)["securityContext"].update(
        seLinuxOptions={"user": "system_u"}), "seLinuxOptions.user"),
    "unmasked /proc": (lambda m: _context(m).update(procMount="Unmasked"), "procMount"),
    "unsafe sysctl": (lambda m: _pod(m)["securityContext"].update(
        sysctls=[{"name": "kernel.msgmax", "value": "65536"}]), "kernel.msgmax"),
    "seccomp unconfined": (lambda m: _context(m).update(seccompProfile={"type": "Unconfined"}),
                           "Unconfined"),
    "seccomp unset": (lambda m: _pod(m)["securityContext"].pop("seccompProfile"),
                      "seccompProfile.type is None"),
    "runAsNonRoot unset": (lambda m: _pod(m)["securityContext"].pop("runAsNonRoot"),
                           "runAsNonRoot is not true"),
    "container runAsNonRoot false": (lambda m: _context(m).update(runAsNonRoot=False),
                                     "runAsNonRoot is not true"),
    "pod runAsNonRoot false": (lambda m: _pod(m)["securityContext"].update(runAsNonRoot=False),
                               "spec.securityContext.runAsNonRoot is false"),
    "root user": (lambda m: _context(m).update(runAsUser=0), "runAsUser is 0"),
    "escalation allowed": (lambda m: _context(m).update(allowPrivilegeEscalation=True),
                           "allowPrivilegeEscalation"),
    "escalation unset": (lambda m: _context(m).pop("allowPrivilegeEscalation"),
                         "allowPrivilegeEscalation"),
    "init container without a context": (lambda m: _pod(m).update(initContainers=[
        {"name": "init", "image": "busybox"}]), "spec.initContainers[init]"),
}
BASELINE_ONLY_BREAKS = {"capability beyond restricted", "no drop ALL", "nfs volume",
                        "seccomp unset", "runAsNonRoot unset", "container runAsNonRoot false",
                        "pod runAsNonRoot false", "root user", "escalation allowed",
                        "escalation unset", "init container without a context"}


@pytest.mark.parametrize("case", sorted(RESTRICTED_BREAKS))
@pytest.mark.parametrize("make", [agent_job, lambda: shipped()["base/analyze-cronjob.yaml"]],
                         ids=["agent-job", "analyze-cronjob"])
def test_the_checker_rejects_each_violation(make, case):
    change, named = RESTRICTED_BREAKS[case]
    manifest = copy.deepcopy(make())
    change(manifest)
    found = violations(manifest)
    assert found and any(named in line for line in found), found
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    assert all(line.startswith(f"{kind} {name}: ") for line in found)
    at_baseline = violations(manifest, "baseline")
    assert bool(at_baseline) == (case not in BASELINE_ONLY_BREAKS), at_baseline


def test_the_checker_finds_the_pod_of_every_workload_kind():
    pod = {"metadata": {}, "spec": {"hostPID": True, "containers": [{"name": "c"}]}}
    wrapped = {
        "Pod": pod, "PodTemplate": {"template": pod},
        "Deployment": {"spec": {"template": pod}}, "StatefulSet": {"spec": {"template": pod}},
        "DaemonSet": {"spec": {"template": pod}}, "ReplicaSet": {"spec": {"template": pod}},
        "ReplicationController": {"spec": {"template": pod}}, "Job": {"spec": {"template": pod}},
        "CronJob": {"spec": {"jobTemplate": {"spec": {"template": pod}}}},
    }
    for kind, body in wrapped.items():
        manifest = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}, **body}
        assert any("hostPID" in line for line in violations(manifest, "baseline")), kind
    assert violations({"kind": "ConfigMap", "metadata": {"name": "x"}}) == []
