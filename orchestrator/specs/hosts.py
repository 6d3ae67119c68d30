"""Typed models of where things run beyond this machine: SSH access, hosts with roles (broker
members, load agents), and RabbitMQ on Kubernetes through its cluster operator."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from orchestrator.specs.base import Seconds, Spec


class SshSpec(Spec):
    """How to reach a host over SSH."""

    port: int = Field(22, ge=1, le=65535, description="SSH port")
    user: str = Field("mqm", min_length=1, description="login user")
    key_file: str | None = Field(None, description="private key; default: the SSH agent and "
                                                   "~/.ssh keys")
    known_hosts: Literal["strict", "accept-new", "ignore"] = Field(
        "strict", description="strict: the host key must be in known_hosts_file (or "
                              "~/.ssh/known_hosts); accept-new: unknown keys are added; ignore: "
                              "any key (test hosts only)")
    known_hosts_file: str | None = Field(
        None, description="known hosts file; default ~/.ssh/known_hosts")
    connect_timeout: Seconds = Field(10.0, gt=0, description="longest wait for a connection")
    command_timeout: Seconds = Field(600.0, gt=0, description="longest a remote command may run")
    retries: int = Field(2, ge=0, le=10, description="connection attempts after the first")


class HostSpec(Spec):
    """A machine surge reaches over SSH, and what it runs there: broker members, load agents."""

    name: str = Field(
        min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="the host's name in runs and reports; where SSH connects unless address")
    address: str | None = Field(None, description="where SSH connects; default the name")
    roles: list[Literal["broker", "load"]] = Field(
        min_length=1, description="broker: runs members; load: runs surge agents")
    members: int = Field(0, ge=0, le=64, description="broker members on this host")
    agents: int = Field(1, ge=0, le=64, description="surge agents on this host (role load)")
    ssh: SshSpec = Field(
        default_factory=lambda: SshSpec(user="root"),
        description="how surge reaches the host (user root unless given)")
    work_dir: str = Field("/var/tmp/surge", description="where members' data and agents' logs "
                                                       "go on the host")
    python: str = Field("python3", description="the interpreter with surge installed (agents; "
                                                "the core install, without extras, is enough)")
    forward: bool = Field(True, description="agents listen on the host's loopback only and are "
                                            "reached through SSH port forwarding, the one way "
                                            "(false is refused: their control API is plain "
                                            "HTTP with a bearer token)")

    @field_validator("forward")
    @classmethod
    def _forwarded(cls, forward: bool) -> bool:
        if not forward:
            raise ValueError("agents are reached only through SSH port forwarding: without it "
                             "their plain-HTTP control API and its token would cross the "
                             "network in clear (remove forward: false)")
        return forward

    @property
    def target(self) -> str:
        """The address SSH and clients use."""
        return self.address or self.name


class RabbitKubernetesSpec(Spec):
    """A RabbitMQ cluster run by the RabbitMQ cluster operator (``RabbitmqCluster``)."""

    namespace: str = Field(
        "surge", description="Kubernetes namespace of the RabbitmqCluster and the agents")
    image: str | None = Field(None, description="RabbitMQ image; default the operator's")
    memory: str = Field("2Gi", description="memory request and limit per member")
    storage: str = Field("10Gi", description="persistent volume size per member")
    storage_class: str | None = Field(
        None, description="storage class of the volumes; default the cluster's")
    additional_config: dict[str, str] = Field(
        default_factory=dict, description="rabbitmq.additionalConfig lines (key = value)")
    agent_image: str = Field("surge-agent:latest", description="image with surge for agent pods "
                             "(the Containerfile's agent target)")
    ready_timeout: Seconds = Field(600.0, gt=0, description="longest wait for AllReplicasReady")
