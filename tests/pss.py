"""A checker of the Kubernetes Pod Security Standards, ``baseline`` and ``restricted``, for the
manifests surge ships: every rule of the standards' documentation that a manifest can break,
each violation one line naming the object and the field.

The pod spec is found in every kind that carries one (Pod, the workload controllers' templates,
a CronJob's job template). What the API server's admission adds (defaults, a namespace's
exemptions) is not modelled: a manifest passes here only on what it says itself.
"""

from __future__ import annotations

from typing import Any

#: Where each kind keeps its pod (metadata and spec), as a path of keys.
POD_PATHS = {
    "Pod": (),
    "PodTemplate": ("template",),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}
RESTRICTED_CAPABILITIES = {"NET_BIND_SERVICE"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}
PROFILES = {"RuntimeDefault", "Localhost"}  # the seccomp and AppArmor types both allow
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def pod_of(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The pod's metadata and spec in ``manifest``, or None for a kind without a pod."""
    path = POD_PATHS.get(manifest.get("kind", ""))
    if path is None:
        return None
    node: Any = manifest
    for key in path:
        node = (node or {}).get(key)
    node = node or {}
    return node.get("metadata") or {}, node.get("spec") or {}


def violations(manifest: dict[str, Any], level: str = "restricted") -> list[str]:
    """Every rule of ``level`` (``baseline`` or ``restricted``, which includes baseline) that
    the pod of ``manifest`` breaks; empty for a manifest without a pod."""
    assert level in ("baseline", "restricted"), level
    pod = pod_of(manifest)
    if pod is None:
        return []
    metadata, spec = pod
    name = f"{manifest.get('kind')} {(manifest.get('metadata') or {}).get('name')}"
    found = _baseline(metadata, spec)
    if level == "restricted":
        found += _restricted(spec)
    return [f"{name}: {problem}" for problem in found]


def _containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"spec.{kind}[{c.get('name', i)}]", c) for kind in CONTAINER_LISTS
            for i, c in enumerate(spec.get(kind) or [])]


def _contexts(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The pod's securityContext and every container's, with where each is."""
    return [("spec.securityContext", spec.get("securityContext") or {})] + [
        (f"{where}.securityContext", c.get("securityContext") or {})
        for where, c in _containers(spec)]


def _baseline(metadata: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    found = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(f"spec.{field} is {spec[field]!r}; baseline allows false or unset")
    for where, context in _contexts(spec):
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{where}.windowsOptions.hostProcess is true")
        if context.get("privileged"):
            found.append(f"{where}.privileged is true")
        added = set((context.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            found.append(f"{where}.capabilities.add has {sorted(added - BASELINE_CAPABILITIES)}"
                         f", beyond baseline's default set")
        selinux = context.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES:
            found.append(f"{where}.seLinuxOptions.type is {selinux['type']!r}")
        for field in ("user", "role"):
            if selinux.get(field):
                found.append(f"{where}.seLinuxOptions.{field} is set")
        if context.get("procMount", "Default") != "Default":
            found.append(f"{where}.procMount is {context['procMount']!r}; only Default")
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{where}.seccompProfile.type is Unconfined")
        apparmor = (context.get("appArmorProfile") or {}).get("type")
        if apparmor is not None and apparmor not in PROFILES:
            found.append(f"{where}.appArmorProfile.type is {apparmor!r}")
    for key, value in (metadata.get("annotations") or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and value != "runtime/default" \
                and not str(value).startswith("localhost/"):
            found.append(f"metadata.annotations[{key}] is {value!r}")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            found.append(f"spec.volumes[{volume.get('name')}] is a hostPath volume")
    for where, container in _containers(spec):
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"{where}.ports hostPort {port['hostPort']}; only 0 or unset")
    for sysctl in (spec.get("securityContext") or {}).get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"spec.securityContext.sysctls has {sysctl.get('name')!r}, not a safe "
                         f"sysctl")
    return found


def _restricted(spec: dict[str, Any]) -> list[str]:
    found = []
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if kinds - RESTRICTED_VOLUMES:
            found.append(f"spec.volumes[{volume.get('name')}] is of type "
                         f"{sorted(kinds - RESTRICTED_VOLUMES)}, not one restricted allows")
    pod_context = spec.get("securityContext") or {}
    pod_non_root = pod_context.get("runAsNonRoot") is True
    pod_seccomp = (pod_context.get("seccompProfile") or {}).get("type") in PROFILES
    if pod_context.get("runAsNonRoot") is False:
        found.append("spec.securityContext.runAsNonRoot is false")
    for where, context in _contexts(spec):
        if context.get("runAsUser") == 0:
            found.append(f"{where}.runAsUser is 0")
    for where, container in _containers(spec):
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{where}.securityContext.allowPrivilegeEscalation is not false")
        non_root = context.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            found.append(f"{where}.securityContext.runAsNonRoot is not true (nor the pod's)")
        seccomp = (context.get("seccompProfile") or {}).get("type")
        if seccomp not in PROFILES and not (seccomp is None and pod_seccomp):
            found.append(f"{where}.securityContext.seccompProfile.type is {seccomp!r}, and the "
                         f"pod's is not RuntimeDefault or Localhost either")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{where}.securityContext.capabilities.drop does not have ALL")
        added = set(capabilities.get("add") or [])
        if added - RESTRICTED_CAPABILITIES:
            found.append(f"{where}.securityContext.capabilities.add has "
                         f"{sorted(added - RESTRICTED_CAPABILITIES)}; only NET_BIND_SERVICE")
    return found
