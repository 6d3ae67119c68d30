"""The memory a workload's clients take on this machine, against what it has: a message size
times the clients that hold it must fit, or the run would swap or be killed part-way.

What a client holds at least is the AMQP driver's (``drivers/amqp``): a sender keeps its
message template and the batch being written (one message each, for a large message); a
receiver holds the message it is reading. (What a connection has queued besides, up to
``drivers.amqp.driver.MAX_BUFFERED_BYTES``, is not counted: a small message at a moderate rate
never queues that much.)
"""

from __future__ import annotations

import psutil

from orchestrator.specs.base import Loc
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.units import format_size

SENDER_COPIES = 2
"""Messages a sender holds whatever its rate: the template and the batch being written."""
RECEIVER_COPIES = 1
"""Messages a receiver holds: the one it is reading."""
SHARE = 0.5
"""Share of this machine's memory the clients may take; the rest is the system's and, on a
local topology, the brokers'."""


def client_bytes(scenario: ScenarioSpec) -> int:
    """Bytes the workload's clients hold at least, all agents together (every local agent
    process is on this machine, so how senders are shared among them does not matter)."""
    workload = scenario.workload
    size = workload.message.largest
    reply = max(size, workload.reply_size or 0)  # a responder reads a request, sends a reply
    return workload.senders * SENDER_COPIES * size + workload.receivers * RECEIVER_COPIES * reply


def memory_problems(scenario: ScenarioSpec, memory_bytes: int | None = None
                    ) -> list[tuple[Loc, str]]:
    """Whether the clients fit in :data:`SHARE` of this machine's memory (``memory_bytes``:
    its total, default psutil's); agents on load hosts or in pods are not checked here."""
    if scenario.agents_on.senders or scenario.agents_on.pods:
        return []
    total = psutil.virtual_memory().total if memory_bytes is None else memory_bytes
    need = client_bytes(scenario)
    if need <= total * SHARE:
        return []
    workload = scenario.workload
    return [(("workload", "message", "size"),
             f"{format_size(workload.message.largest)} messages from {workload.senders} senders "
             f"and {workload.receivers} receivers take about {_gib(need)} of client memory "
             f"(a sender holds {SENDER_COPIES} messages, a receiver {RECEIVER_COPIES}); "
             f"this machine has {_gib(total)} and the clients may take half: send smaller "
             f"messages, use fewer clients or run the agents on load hosts (agents_on)")]


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 1024**3:,.1f} GiB"
