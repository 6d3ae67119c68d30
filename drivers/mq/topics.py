"""MQSUB of a topology's durable subscriptions (:mod:`orchestrator.specs.mqtopics`) on a queue
manager surge did not start, through a connection the controller made."""

from __future__ import annotations

import contextlib
from typing import Any

from orchestrator.specs.mqtopics import Subscription


def subscribe(mqi: Any, qm: Any, subscriptions: list[Subscription]) -> list[str]:
    """MQSUB each durable subscription on connection ``qm`` (made, or resumed as it is), its
    publications put to its queue; then MQCLOSE, keeping it. Returns the names of those whose
    queue does not exist there."""
    C = mqi.CMQC
    error_type = getattr(mqi, "Error", mqi.MQMIError)
    missing = []
    for sub in subscriptions:
        try:
            queue = mqi.Queue(qm, sub.queue, C.MQOO_OUTPUT | C.MQOO_FAIL_IF_QUIESCING)
        except error_type as error:
            if getattr(error, "reason", None) == C.MQRC_UNKNOWN_OBJECT_NAME:
                missing.append(f"{sub.name} (queue {sub.queue})")
                continue
            raise
        try:
            desc = mqi.SD()
            desc.Options = (C.MQSO_CREATE | C.MQSO_RESUME | C.MQSO_DURABLE
                            | C.MQSO_FAIL_IF_QUIESCING)
            desc.set_vs("SubName", sub.name)
            desc.set_vs("ObjectString", sub.topic)
            handle = mqi.Subscription(qm)
            handle.sub(sub_desc=desc, sub_queue=queue)
            handle.close(sub_close_options=C.MQCO_KEEP_SUB)
        finally:
            with contextlib.suppress(Exception):
                queue.close()
    return missing
