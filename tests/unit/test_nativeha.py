"""Document 003's Native HA queue manager: the rendered ConfigMap and QueueManager against a golden
file written by hand from Appendix B, against JSON schemas of the two APIs, and the provisioner
against a fake Kubernetes API (no cluster, no ``kubernetes`` package needed)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from orchestrator.errors import ProvisionError, SpecError
from orchestrator.specs.loader import load_topology
from orchestrator.specs.topology import TopologySpec
from tests.kube import FakeApiError, FakeClock
from topologies.mq import manifests, nativeha

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "topologies" / "mq-native-ha.yaml"
GOLDEN = ROOT / "tests" / "golden" / "mq-native-ha.yaml"
SCHEMAS = ROOT / "tests" / "schemas"
SURGE_LABELS = {"app.kubernetes.io/managed-by": "surge",
                "app.kubernetes.io/part-of": "mq-native-ha"}


def topology(*overrides: str) -> TopologySpec:
    return load_topology(TOPOLOGY, list(overrides))


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def without_surge_metadata(document: dict) -> dict:
    """The rendered object minus what surge adds and the document does not have."""
    document = copy.deepcopy(document)
    metadata = document["metadata"]
    assert metadata.pop("namespace") == "mq"
    assert metadata.pop("labels") == SURGE_LABELS
    return document


# -- rendering against the document ----------------------------------------------------------

def test_render_equals_the_documents_appendix_b():
    rendered = manifests.render(topology())
    golden = list(yaml.safe_load_all(GOLDEN.read_text()))
    assert [d["kind"] for d in rendered] == ["ConfigMap", "QueueManager"]  # start: 1
    for mine, theirs in zip(rendered, golden):
        mine = without_surge_metadata(mine)
        assert mine["metadata"] == theirs["metadata"]
        assert mine.get("spec") == theirs.get("spec")
        # file by file, so a difference names the file
        for key in theirs.get("data", {}):
            assert mine["data"][key] == theirs["data"][key], key
        assert mine == theirs


def test_queue_manager_carries_what_appendix_b_sets():
    qm = manifests.render(topology())[1]
    spec = qm["spec"]
    assert qm["apiVersion"] == "mq.ibm.com/v1beta1" and qm["kind"] == "QueueManager"
    assert qm["metadata"]["name"] == "perf0"
    assert spec["version"] == "9.3.3.0-r2"
    assert spec["license"] == {"accept": True, "license": "L-YBXJ-ADJNSM", "use": "Production"}
    assert spec["pki"]["keys"][0]["secret"] == {"secretName": "mqcert",
                                                "items": ["tls.key", "tls.crt"]}
    assert spec["pki"]["trust"][0]["secret"] == {"secretName": "mqcert", "items": ["app.crt"]}
    assert spec["web"] == {"enabled": False}
    qmgr = spec["queueManager"]
    assert qmgr["name"] == "PERF0"
    assert qmgr["availability"] == {"type": "NativeHA", "tls": {
        "secretName": "mqcert-internal", "cipherSpec": "ANY_TLS12"}}
    assert qmgr["storage"] == {"defaultClass": "san"}
    assert qmgr["mqsc"] == [{"configMap": {"name": "perf-mqsc-ini", "items": [
        "disable-tls.mqsc", "nha.mqsc", "queues.mqsc"]}}]
    assert qmgr["ini"] == [{"configMap": {"name": "perf-mqsc-ini", "items": ["fastpath.ini"]}}]
    assert qmgr["recoveryLogs"] == {"logFilePages": 16384}
    assert qmgr["resources"] == {"limits": {"cpu": "32", "memory": "16Gi"},
                                 "requests": {"cpu": "32", "memory": "16Gi"}}
    assert spec["securityContext"] == {"initVolumeAsRoot": True}
    assert spec["template"]["pod"]["containers"] == [
        {"name": "qmgr", "env": [{"name": "MQSNOAUT", "value": "yes"}]}]
    assert "annotations" not in qm["metadata"]  # Multus networks are site-specific


def test_configmap_defines_every_queue_of_the_topology_and_the_ini_stanzas():
    spec = topology()
    data = manifests.render(spec)[0]["data"]
    names = [name for queue in spec.queues for name in queue.names]
    assert len(names) == 43
    assert data["queues.mqsc"].splitlines() == [
        f"define qlocal('{name}') maxdepth(5000) replace" for name in names]
    assert data["nha.mqsc"] == "alter qmgr IMGLOGLN(25000)\n"
    assert data["fastpath.ini"].startswith("Channels:\n   MQIBindType=FASTPATH\n")
    assert "Log:\n   LogPrimaryFiles=16\n   LogSecondaryFiles=2\n   LogBufferPages=4096\n" \
        in data["fastpath.ini"]
    for name in ("disable.mqsc", "disable-tls.mqsc"):
        assert data[name].startswith("alter qmgr chlauth(disabled)\nalter qmgr maxmsgl(104857600)")


def test_topology_values_reach_the_files():
    spec = topology("ibmmq.native_ha.max_depth=100", "ibmmq.native_ha.image_log_length=0",
                    "ibmmq.native_ha.max_message_length=4194304", "ibmmq.channel=PERF.CHL",
                    "ibmmq.sharecnv=10", "ibmmq.ini={Channels: {MQIBindType: STANDARD}}")
    data = manifests.render(spec)[0]["data"]
    assert "define qlocal('reply20') maxdepth(100) replace\n" in data["queues.mqsc"]
    assert data["nha.mqsc"] == "alter qmgr IMGLOGLN(0)\n"
    assert "alter channel(PERF.CHL) chltype(SVRCONN) sharecnv(10) mcauser('mqm') " \
           "maxmsgl(4194304) SSLCAUTH(OPTIONAL) SSLCIPH('')\n" in data["disable.mqsc"]
    assert data["fastpath.ini"] == "Channels:\n   MQIBindType=STANDARD\n"


# -- schemas ------------------------------------------------------------------------------------

def test_configmap_is_a_valid_core_v1_configmap():
    configmap = manifests.render(topology())[0]
    validator("configmap-v1.json").validate(configmap)
    broken = copy.deepcopy(configmap)
    broken["data"]["queues.mqsc"] = 42
    broken["spec"] = {}
    messages = sorted(e.message for e in validator("configmap-v1.json").iter_errors(broken))
    assert any("42 is not of type 'string'" in m for m in messages)
    assert any("'spec' was unexpected" in m for m in messages)


def test_queue_managers_are_valid_for_the_operator_schema():
    spec = topology("start=2")
    check = validator("queuemanager-v1beta1.json")
    for qm in manifests.render(spec)[1:]:
        check.validate(qm)
    broken = manifests.render_member(spec, 0)
    broken["spec"]["queueManager"]["availablity"] = {"type": "NativeHA"}  # misspelt
    broken["spec"]["license"]["accept"] = "yes"
    messages = [e.message for e in check.iter_errors(broken)]
    assert any("'availablity' was unexpected" in m for m in messages)
    assert any("'yes' is not of type 'boolean'" in m for m in messages)


def test_golden_file_is_valid_for_both_schemas():
    configmap, qm = yaml.safe_load_all(GOLDEN.read_text())
    validator("configmap-v1.json").validate(configmap)
    validator("queuemanager-v1beta1.json").validate(qm)


# -- variants -----------------------------------------------------------------------------------

def test_scale_out_renders_the_next_queue_manager():
    spec = topology()
    qm = manifests.render_member(spec, 1)
    assert qm["metadata"]["name"] == "perf1"
    assert qm["spec"]["queueManager"]["name"] == "PERF1"
    assert [d["metadata"]["name"] for d in manifests.render(topology("start=2"))] == [
        "perf-mqsc-ini", "perf0", "perf1"]
    with pytest.raises(ProvisionError, match="member 2 does not exist.*members 0 to 1"):
        manifests.render_member(spec, 2)


def test_without_a_tls_secret_there_is_no_pki_and_the_channel_needs_no_tls():
    qm = manifests.render(topology("ibmmq.native_ha.tls_secret=null"))[1]
    assert "pki" not in qm["spec"]
    assert qm["spec"]["queueManager"]["availability"] == {"type": "NativeHA"}
    assert qm["spec"]["queueManager"]["mqsc"][0]["configMap"]["items"][0] == "disable.mqsc"
    validator("queuemanager-v1beta1.json").validate(qm)


@pytest.mark.parametrize(("cpu", "quantity"), [("32", "32"), ("0.5", "500m"), ("1.25", "1250m")])
def test_cpu_per_member_becomes_the_cpu_limit_and_request(cpu, quantity):
    resources = manifests.render(topology(f"cpu_per_member={cpu}"))[1]["spec"]["queueManager"][
        "resources"]
    assert resources["limits"]["cpu"] == resources["requests"]["cpu"] == quantity


def test_unlimited_cpu_leaves_only_memory():
    resources = manifests.render(topology("cpu_per_member=null"))[1]["spec"]["queueManager"][
        "resources"]
    assert resources == {"limits": {"memory": "16Gi"}, "requests": {"memory": "16Gi"}}


def test_object_names_are_kubernetes_names():
    assert manifests.k8s_name("PERF0") == "perf0"
    assert manifests.k8s_name("UC01QM01") == "uc01qm01"
    assert manifests.k8s_name("QM_A.B%1") == "qm-a-b-1"
    assert manifests.k8s_name("0QM") == "qm-0qm"


# -- bad topologies ------------------------------------------------------------------------------

def test_placement_kubernetes_without_native_ha_is_refused_when_loading(tmp_path):
    text = TOPOLOGY.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text[:text.index("  native_ha:")])
    with pytest.raises(SpecError, match="placement kubernetes needs ibmmq.native_ha"):
        load_topology(bad)


def test_a_topology_that_is_not_native_ha_is_refused_by_the_renderer():
    rabbit = TopologySpec(name="r", broker="rabbitmq", members=1, start=1)
    with pytest.raises(ProvisionError, match="not an IBM MQ topology.*broker rabbitmq"):
        manifests.render(rabbit)
    uniform = load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml")
    with pytest.raises(ProvisionError, match="needs placement kubernetes.*placement ssh"):
        manifests.render(uniform)


@pytest.mark.parametrize(("override", "complaint"), [
    ("queues=[{name: 'bad name'}]", r"queue names \['bad name'\] are not MQ object names"),
    ("ibmmq.native_ha.memory=lots", "memory 'lots' is not a Kubernetes quantity"),
    ("ibmmq.native_ha.namespace=My_NS", "namespace 'My_NS' is not a Kubernetes namespace"),
    ("ibmmq.native_ha.storage_class='fast disk'", "storage_class 'fast disk'"),
])
def test_values_that_would_break_a_manifest_are_refused(override, complaint):
    with pytest.raises(ProvisionError, match=complaint):
        manifests.render(topology(override))


# -- the provisioner against a fake API -----------------------------------------------------------

class FakeCustomObjects:
    """QueueManagers in one namespace; each reports the phases in ``script`` in turn on reads
    (then stays at the last one)."""

    def __init__(self, script: list[str] | None = None):
        self.objects: dict[str, dict] = {}
        self.script = script or ["Pending", "Running"]
        self.reads: dict[str, int] = {}
        self.calls: list[tuple] = []

    def _phase(self, name: str) -> str:
        count = self.reads.get(name, 0)
        self.reads[name] = count + 1
        return self.script[min(count, len(self.script) - 1)]

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.calls.append(("create", body["metadata"]["name"]))
        assert (group, version, plural) == ("mq.ibm.com", "v1beta1", "queuemanagers")
        name = body["metadata"]["name"]
        if name in self.objects:
            raise FakeApiError(409, "Conflict")
        self.objects[name] = {**body, "metadata": {**body["metadata"], "resourceVersion": "7"}}
        return body

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        if name not in self.objects:
            raise FakeApiError(404, "Not Found")
        return {**self.objects[name], "status": {"phase": self._phase(name)}}

    def replace_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.calls.append(("replace", name, body["metadata"].get("resourceVersion")))
        self.objects[name] = body
        return body

    def list_namespaced_custom_object(self, group, version, namespace, plural, label_selector):
        assert label_selector == ("app.kubernetes.io/managed-by=surge,"
                                  "app.kubernetes.io/part-of=mq-native-ha")
        return {"items": [{"metadata": o["metadata"], "status": {"phase": self._phase(n)}}
                          for n, o in self.objects.items()]}

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **kwargs):
        self.calls.append(("delete", name, kwargs))
        if self.objects.pop(name, None) is None:
            raise FakeApiError(404, "Not Found")


class FakeCore:
    def __init__(self) -> None:
        self.configmaps: dict[str, dict] = {}
        self.calls: list[tuple] = []

    def create_namespaced_config_map(self, namespace, body):
        self.calls.append(("create", body["metadata"]["name"]))
        if body["metadata"]["name"] in self.configmaps:
            raise FakeApiError(409, "AlreadyExists")
        self.configmaps[body["metadata"]["name"]] = body

    def replace_namespaced_config_map(self, name, namespace, body):
        self.calls.append(("replace", name))
        self.configmaps[name] = body

    def delete_namespaced_config_map(self, name, namespace):
        self.calls.append(("delete", name))
        if self.configmaps.pop(name, None) is None:
            raise FakeApiError(404, "Not Found")

    def delete_collection_namespaced_pod(self, namespace, **kwargs):
        self.calls.append(("delete pods", namespace, kwargs))


def provisioner(custom=None, core=None, *overrides: str):
    clock = FakeClock()
    return nativeha.NativeHaProvisioner(topology(*overrides), custom=custom or FakeCustomObjects(),
                                        core=core or FakeCore(), clock=clock, sleep=clock.sleep)


def test_the_controller_outside_the_cluster_does_not_check_the_queues(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert "only inside the cluster" in provisioner().unreachable_from_controller()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert provisioner().unreachable_from_controller() is None


def test_member_is_the_operators_service_on_1414():
    member = provisioner().member(1)
    assert (member.name, member.host, member.port) == ("PERF1", "perf1-ibm-mq.mq.svc", 1414)
    assert member.endpoint == "mq://perf1-ibm-mq.mq.svc(1414)/PERF1?channel=SYSTEM.DEF.SVRCONN"


def test_up_applies_configmap_and_start_members_and_waits_for_running():
    custom, core = FakeCustomObjects(["Pending", "Pending", "Running"]), FakeCore()
    prov = provisioner(custom, core)
    members = prov.up()
    assert core.calls == [("create", "perf-mqsc-ini")]
    assert ("create", "perf0") in custom.calls and "perf1" not in custom.objects
    assert custom.objects["perf0"]["spec"]["queueManager"]["name"] == "PERF0"
    assert [(m.name, m.running) for m in members] == [("PERF0", True), ("PERF1", False)]
    assert prov._clock() == 2 * nativeha.POLL_INTERVAL_S


def test_up_again_replaces_what_exists():
    custom, core = FakeCustomObjects(["Running"]), FakeCore()
    prov = provisioner(custom, core)
    prov.up()
    prov.up()
    assert core.calls[-1] == ("replace", "perf-mqsc-ini")
    assert custom.calls[-1] == ("replace", "perf0", "7")  # with the current resourceVersion


def test_a_queue_manager_that_never_runs_times_out_naming_it_and_its_phase():
    prov = provisioner(FakeCustomObjects(["Pending", "Failed"]), None,
                       "ibmmq.native_ha.ready_timeout=30")
    with pytest.raises(ProvisionError, match=r"QueueManager perf0 \(last phase: Failed\) in "
                                             r"namespace mq not Running after 30s") as caught:
        prov.up()
    assert caught.value.temporary


def test_scale_out_and_in():
    custom = FakeCustomObjects(["Running"])
    prov = provisioner(custom)
    prov.up()
    added = prov.start_member()
    assert (added.index, added.name, added.running) == (1, "PERF1", True)
    with pytest.raises(ProvisionError, match="all 2 queue managers of mq-native-ha exist"):
        prov.start_member()
    prov.stop_member(1)
    assert custom.calls[-1] == ("delete", "perf1", {"propagation_policy": "Background"})
    assert [m.running for m in prov.status()] == [True, False]


def test_kill_deletes_with_no_grace_period_including_the_pods():
    custom, core = FakeCustomObjects(["Running"]), FakeCore()
    prov = provisioner(custom, core)
    prov.up()
    prov.stop_member(0, kill=True)
    assert custom.calls[-1] == ("delete", "perf0", {"grace_period_seconds": 0,
                                                    "propagation_policy": "Background"})
    assert core.calls[-1] == ("delete pods", "mq", {
        "label_selector": "app.kubernetes.io/instance=perf0", "grace_period_seconds": 0})


def test_sample_has_running_flags_and_no_figures_of_its_own():
    prov = provisioner(FakeCustomObjects(["Running"]))
    prov.up()
    sample = prov.sample()
    assert [(m.name, m.running, m.cpu, m.cpu_quota_cores) for m in sample.members] == [
        ("PERF0", True, None, 32.0), ("PERF1", False, None, 32.0)]
    # unknown, never empty: the final accounting must not call queued messages lost
    assert sample.queue_depths is None and prov.settled_queue_depths() is None


def test_down_deletes_what_it_created():
    custom, core = FakeCustomObjects(["Running"]), FakeCore()
    prov = provisioner(custom, core)
    prov.up()
    prov.start_member(1)
    assert prov.down() == ["deleted QueueManager mq/perf0", "deleted QueueManager mq/perf1",
                           "deleted ConfigMap mq/perf-mqsc-ini"]
    assert custom.objects == {} and core.configmaps == {}
    assert prov.down() == []


def test_api_errors_say_what_failed_and_whether_to_retry():
    class Forbidden(FakeCore):
        def create_namespaced_config_map(self, namespace, body):
            raise FakeApiError(403, "Forbidden")

    with pytest.raises(ProvisionError, match="create_namespaced_config_map failed: 403 "
                                             "Forbidden.*may not do this") as caught:
        provisioner(None, Forbidden()).up()
    assert not caught.value.temporary


def test_no_kubeconfig_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    prov = nativeha.NativeHaProvisioner(topology())
    with pytest.raises(ProvisionError, match="no Kubernetes configuration|needs the kubernetes "
                                             "package"):
        prov.status()
