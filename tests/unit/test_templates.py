"""The Jinja2 manifest templates of ``k8s/``: every one renders with example values, no value can
change a manifest's structure, and every problem names the template file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import ProvisionError
from topologies.assets import asset
from topologies.templates import fill_template, render_file, to_yaml

K8S = asset("k8s")

# Example values per template, as the renderers pass them (topologies/rabbitmq/manifests.py,
# topologies/mq/manifests.py, orchestrator/agents/pods.py).
AGENTS = {"name": "surge-agents-run1", "namespace": "perf", "secret": "surge-agents-run1-token",
          "run_label": "run1", "run_id": "20260101T120000Z-run1", "count": 3,
          "image": "surge-agent:latest", "port": 7070, "max_lifetime": 600, "deadline": 660,
          "token": "A" * 24, "cpu": "500m", "memory": "512Mi", "cpu_limit": True}
EXAMPLES: dict[str, dict[str, object]] = {
    **{f"base/{name}.yaml": {} for name in (  # the kustomize base: plain YAML, no values
        "kustomization", "namespace", "serviceaccount", "role", "rolebinding", "runs-pvc",
        "analyze-cronjob")},
    "overlays/example/kustomization.yaml": {},
    "agents/job.yaml": AGENTS,
    "agents/secret.yaml": AGENTS,
    "agents/service.yaml": AGENTS,
    "rabbitmq/rabbitmqcluster.yaml": {
        "name": "rmq", "namespace": "perf", "topology": "rmq", "replicas": 3,
        "image": "rabbitmq:4.1-management", "cpu": "500m", "memory": "2Gi", "storage": "10Gi",
        "storage_class": "fast-ssd", "plugins": ["rabbitmq_top", "rabbitmq_shovel"],
        "additional_config": "collect_statistics_interval = 1000\nchannel_max = 1050\n"},
    "mq/configmap-mqsc-ini.yaml": {
        "configmap": "perf-mqsc-ini", "namespace": "mq", "topology": "mq-native-ha",
        "max_message_length": 104857600, "channel": "SYSTEM.DEF.SVRCONN", "sharecnv": 1,
        "image_log_length": 25000,
        "queue_definitions": "define qlocal(q1) maxdepth(5000) replace\n",
        "ini_stanzas": "Channels:\n   MQIBindType=FASTPATH\n"},
    "mq/queuemanager.yaml": {
        "name": "perf0", "namespace": "mq", "topology": "mq-native-ha", "version": "9.3.3.0-r2",
        "license": "L-YBXJ-ADJNSM", "use": "Production", "tls": True, "tls_secret": "mqcert",
        "qm_name": "PERF0", "storage_class": "san", "configmap": "perf-mqsc-ini",
        "channel_mqsc": "disable-tls.mqsc", "log_file_pages": 16384, "memory": "16Gi",
        "cpu": "32"},
}
HOSTILE = 'x": [y], #z {a}: \'b\' \\ é & *c'  # quotes, flow and comment characters, escapes


def _leaves(node: object) -> list[object]:
    if isinstance(node, dict):
        return [leaf for value in node.values() for leaf in _leaves(value)]
    if isinstance(node, list):
        return [leaf for value in node for leaf in _leaves(value)]
    return [node]


def test_every_template_under_k8s_has_examples():
    found = {str(p.relative_to(K8S)) for p in Path(K8S).rglob("*.yaml")}
    assert found == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_template_renders_with_example_values(name):
    text = fill_template(K8S / name, EXAMPLES[name])
    assert "{{" not in text and "{%" not in text and "\n#%" not in text
    document = yaml.safe_load(text)
    assert document["apiVersion"] and document["kind"]
    leaves = _leaves(document)
    for key in _used(name):
        assert any(isinstance(leaf, str) and EXAMPLES[name][key] in leaf for leaf in leaves), key


def _shape(node: object) -> object:
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return None


def _used(name: str) -> list[str]:
    """The string values the template puts in (its example keys that it names)."""
    source = (K8S / name).read_text()
    return [k for k, v in EXAMPLES[name].items()
            if isinstance(v, str) and re.search(rf"{{{{ \(?{k}\b", source)]


@pytest.mark.parametrize(("name", "key"), [(n, k) for n in sorted(EXAMPLES) for k in _used(n)])
def test_no_value_changes_a_manifests_structure(name, key):
    """One value replaced by a string full of YAML syntax: the manifest still parses, with the
    same keys, and holds the string as it was given."""
    plain = yaml.safe_load(fill_template(K8S / name, EXAMPLES[name]))
    document = yaml.safe_load(fill_template(K8S / name, {**EXAMPLES[name], key: HOSTILE}))
    assert _shape(document) == _shape(plain)
    assert any(isinstance(leaf, str) and HOSTILE in leaf for leaf in _leaves(document))


@pytest.mark.parametrize("value", ["plain", "", "a\nb\n", 'q"uote\\', "tab\tnul\x00",
                                   "x\u2028y", "😀 é", "null", "yes", "0x1F", "- item",
                                   3, 0.5, True, None])
def test_the_yaml_filter_gives_one_line_that_reads_back_as_the_value(value):
    text = to_yaml(value)
    assert "\n" not in text
    assert yaml.safe_load(f"key: {text}\n") == {"key": value}


def test_a_missing_value_names_the_template_and_line(tmp_path):
    template = tmp_path / "t.yaml"
    template.write_text("kind: X\n#% if on\nname: {{ name | yaml }}\n#% endif\n")
    with pytest.raises(ProvisionError, match=rf"template {template}, line 3: 'name' is undefined"):
        render_file(template, {"on": True})
    with pytest.raises(ProvisionError, match=rf"template {template}, line 2: 'on' is undefined"):
        render_file(template, {"name": "x"})
    assert render_file(template, {"on": False}) == {"kind": "X"}


def test_a_template_error_names_the_template_and_line(tmp_path):
    template = tmp_path / "t.yaml"
    template.write_text("kind: X\n#% if on\nname: {{ name | yaml }}\n")
    with pytest.raises(ProvisionError, match=rf"template {template}, line \d+: .*endif"):
        render_file(template, {"on": True, "name": "x"})
    template.write_text("kind: X\nname: {{ name | nosuchfilter }}\n")
    with pytest.raises(ProvisionError, match=rf"template {template}, line 2: .*nosuchfilter"):
        render_file(template, {"name": "x"})
    with pytest.raises(ProvisionError, match="does not exist"):
        render_file(tmp_path / "missing.yaml", {})


def test_a_line_break_outside_the_yaml_filter_is_refused(tmp_path):
    template = tmp_path / "t.yaml"
    template.write_text("kind: X\ndata: |\n  alter channel({{ channel }})\n")
    assert render_file(template, {"channel": "A.B"}) == {"kind": "X",
                                                         "data": "alter channel(A.B)\n"}
    with pytest.raises(ProvisionError, match=rf"template {template}, line 3: .*line break"):
        render_file(template, {"channel": "A)\nrefresh security"})


def test_rendered_text_that_is_not_yaml_is_a_provision_error(tmp_path):
    template = tmp_path / "t.yaml"
    template.write_text("kind: X\nname: {{ name }}\n")
    with pytest.raises(ProvisionError, match=rf"template {template} rendered no valid YAML"):
        render_file(template, {"name": "a: b: c"})
