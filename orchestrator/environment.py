"""Every ``SURGE_*`` environment variable surge reads, and what it does: the one list that
``surge --help`` shows and the table of docs/guide/command-line.md repeats (a test checks both
against the code)."""

from __future__ import annotations

import textwrap

#: name -> (what it sets, its default)
VARIABLES: dict[str, tuple[str, str]] = {
    "SURGE_STATE_DIR": (
        "where surge keeps what it started: members' PIDs, data and logs, Ansible's private "
        "data, the Prometheus targets files of running runs", "~/.local/state/surge"),
    "SURGE_RABBITMQ_BIN": (
        "directory of rabbitmq-server and rabbitmqctl, here and on SSH broker hosts",
        "/usr/lib/rabbitmq/bin"),
    "SURGE_CGROUP_ROOT": (
        "where the cgroup hierarchies are mounted, for members' CPU quotas and accounting",
        "/sys/fs/cgroup"),
    "SURGE_CGROUP_PARENT": (
        "on cgroup v2, the subtree (relative to the root) members' groups go under: a "
        "delegated one on systemd hosts", "surge"),
    "SURGE_ANSIBLE_DIR": (
        "playbooks and roles for surge up --via ansible", "the ones shipped with surge"),
    "SURGE_SPARK_MASTER": (
        "Spark master of surge analyze (--spark-master wins)", "local[*]"),
    "SURGE_SPARK_DRIVER_MEMORY": (
        "memory of the Spark driver surge starts", "2g"),
    "SURGE_SPARK_JAVA_OPTIONS": (
        "JVM options of the Spark driver surge starts (replace the default)",
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"),
    "SURGE_SPARK_CLASS_CACHE": (
        "directory of the class-data archive that shortens the Spark driver's start (written "
        "by the first analysis, about 200 MB; off for none)", "~/.cache/surge"),
    "SURGE_MQ_USER": (
        "user the MQ driver presents where the channel asks for credentials (MQCSP); read in "
        "the agents' environment (local agents inherit surge's)", "none: no credentials"),
    "SURGE_MQ_PASSWORD": (
        "that user's password, read like SURGE_MQ_USER; never in specs or run records",
        "empty"),
    "SURGE_AMQP_FAST_PATH": (
        "0 makes the AMQP driver publish and consume through pika's public API only, instead "
        "of its own frame encoding and decoding (also off by itself on a pika version it was "
        "not checked against); read by the agents, whose state run.json records (fast_path) "
        "and the step table shows", "1"),
    "SURGE_SPEEDUPS": (
        "0 runs the pure-Python hot path (frame decoding, header stamping, sequence tracking, "
        "latency records) instead of its compiled twin; pure is also what a wheel built "
        "without a C compiler runs. Read by the agents; run.json (hot_path) and the step "
        "table say which ran", "1"),
    "SURGE_LOOP_LINGER_US": (
        "microseconds an agent's AMQP event loop sleeps after a turn once three turns in a "
        "row found sockets ready at once (it then reads many messages a turn instead of a "
        "few: less CPU a message under unlimited load); never with a timer due sooner, never "
        "in a run that keeps up, never with a requester or responder. 0: never. Read by the "
        "agents", "200"),
    "SURGE_PERFTEST_PASSWORD": (
        "the password of the broker a surge perftest command line names with -h/-H; surge "
        "perftest sets it for its run from the URI (its topology file names the variable, "
        "never the password)", "set by surge perftest"),
    "SURGE_AGENT_TOKEN": (
        "bearer token of an agent's control API; surge sets it for the agents it starts (set "
        "it yourself only for a surge agent started by hand)", "a new one per run"),
}


def help_text(width: int = 78) -> str:
    """The variables as a help section that is not rewrapped (click's ``\\b``): each name,
    then what it sets and its default, indented and wrapped to ``width``."""
    lines = ["\b", "Environment variables:"]
    for name, (what, default) in VARIABLES.items():
        lines.append(f"  {name}")
        lines += textwrap.wrap(f"{what} (default: {default})", width,
                               initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


def markdown_table() -> str:
    """The variables as the guide's Markdown table."""
    rows = ["| Variable | What it sets | Default |", "|---|---|---|"]
    rows += [f"| `{name}` | {what} | {default} |" for name, (what, default) in VARIABLES.items()]
    return "\n".join(rows)
