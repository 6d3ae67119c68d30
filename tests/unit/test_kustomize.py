"""The kustomize deploy package (``k8s/base``, the overlay ``k8s/overlays/example``) rendered by
``kubectl kustomize`` as a user deploys it: well-formed objects, all in one namespace that
enforces the ``restricted`` Pod Security Standard, every pod passing it (tests/pss.py), only
surge's images, and a Role that grants every Kubernetes call the agent pods' code makes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.pss import pod_of, violations
from topologies.assets import asset

K8S = Path(asset("k8s"))
REPO = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
SURGE_IMAGE = re.compile(r"^([^/]+/)*surge-(agent|analysis)(:[\w.-]+)?$")
PACKAGES = [("base", "surge", "surge-analysis:latest"),
            ("overlays/example", "perf", "registry.example.com/perf/surge-analysis:0.1.0")]
VERBS = {"create": "create", "replace": "update", "patch": "patch", "delete": "delete",
         "list": "list", "read": "get"}

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="no kubectl on PATH (`make deps` installs Debian's kubernetes-client, "
                            "whose kubectl has kustomize built in)")


def kustomize(directory: Path) -> list[dict]:
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def by_kind(objects: list[dict]) -> dict[str, dict]:
    kinds = [o["kind"] for o in objects]
    assert len(kinds) == len(set(kinds)), kinds
    return {o["kind"]: o for o in objects}


@pytest.mark.parametrize(("directory", "namespace", "analysis_image"), PACKAGES)
def test_the_package_renders_well_formed_objects_in_a_restricted_namespace(
        directory, namespace, analysis_image):
    objects = kustomize(K8S / directory)
    for o in objects:
        assert o.get("apiVersion") and o.get("kind") and (o.get("metadata") or {}).get("name"), o
    kinds = by_kind(objects)
    assert set(kinds) == {"Namespace", "ServiceAccount", "Role", "RoleBinding",
                          "PersistentVolumeClaim", "CronJob"}
    ns = kinds.pop("Namespace")
    assert ns["metadata"]["name"] == namespace
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {o["metadata"].get("namespace") for o in kinds.values()} == {namespace}
    binding = kinds["RoleBinding"]
    assert binding["roleRef"]["name"] == kinds["Role"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "namespace": namespace,
                                    "name": kinds["ServiceAccount"]["metadata"]["name"]}]
    _, pod = pod_of(kinds["CronJob"])
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
              if "persistentVolumeClaim" in v]
    assert claims == [kinds["PersistentVolumeClaim"]["metadata"]["name"]]


@pytest.mark.parametrize(("directory", "namespace", "analysis_image"), PACKAGES)
def test_every_pod_passes_restricted_and_runs_a_surge_image(directory, namespace,
                                                            analysis_image):
    pods = [o for o in kustomize(K8S / directory) if pod_of(o)]
    assert pods
    for o in pods:
        assert violations(o) == []
        images = [c["image"] for kind in ("initContainers", "containers")
                  for c in pod_of(o)[1].get(kind) or []]
        assert images and all(SURGE_IMAGE.match(i) for i in images), images
    assert [c["image"] for c in pod_of(by_kind(pods)["CronJob"])[1]["containers"]] == \
        [analysis_image]


def granted(role: dict) -> set[tuple[str, str]]:
    """(resource, verb) pairs the Role grants."""
    return {(resource, verb) for rule in role["rules"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def test_the_role_grants_every_call_the_agent_pods_code_makes():
    source = (REPO / "orchestrator" / "agents" / "pods.py").read_text()
    calls = set(re.findall(r"\b(?:core|batch)\.(create|replace|patch|delete|list|read)"
                           r"_namespaced_(\w+?)\b", source))
    needed = {(f"{resource}s", VERBS[action]) for action, resource in calls}
    assert {("secrets", "create"), ("jobs", "create"), ("pods", "list")} <= needed, needed
    if "open_portforward" in source:
        needed.add(("pods/portforward", "create"))
    role = by_kind(kustomize(K8S / "base"))["Role"]
    assert needed - granted(role) == set()
