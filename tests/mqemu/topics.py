"""Administrative topic objects of an EMULATED queue manager (tests only; NOT IBM MQ):
``DEFINE TOPIC(name) TOPICSTR('string')``, ``DELETE TOPIC``, ``DISPLAY TOPIC``, and the topic
string an MQOPEN (MQOD) or MQSUB (MQSD) names with a topic object and/or an ObjectString, as
MQ combines them ("Combining topic strings": the object's TOPICSTR, a ``/``, then the
ObjectString; either alone as it is)."""

from __future__ import annotations

import mqi
from mqsc import Command, command, not_found, wanted


class TopicObjects:
    """Topic objects (a mixin of ``QueueManager``; ``self.topic_objects``: name -> string)."""

    topic_objects: dict[str, str]

    def topic_string(self, object_name: str, object_string: str) -> tuple[str | None, int]:
        """The full topic string of an open or subscription, or ``(None, reason)``:
        MQRC_UNKNOWN_OBJECT_NAME for a topic object that does not exist or nothing named,
        MQRC_TOPIC_STRING_ERROR for an empty combination."""
        if not object_name:
            return (object_string, 0) if object_string else (None, mqi.MQRC_UNKNOWN_OBJECT_NAME)
        base = self.topic_objects.get(object_name)
        if base is None:
            return None, mqi.MQRC_UNKNOWN_OBJECT_NAME
        full = "/".join(part for part in (base, object_string) if part)
        return (full, 0) if full else (None, mqi.MQRC_TOPIC_STRING_ERROR)

    @command("DEFINE", "TOPIC")
    def _define_topic(self, cmd: Command) -> list[str]:
        string = cmd.attrs.get("TOPICSTR")
        if string is None:
            return ["AMQ8405E: TOPICSTR is required."]
        if cmd.name in self.topic_objects and "REPLACE" not in cmd.attrs:
            return [f"AMQ8150E: object {cmd.name} already exists."]
        self.topic_objects[cmd.name] = string
        return [f"AMQ8690I: IBM MQ topic created: {cmd.name}."]

    @command("DELETE", "TOPIC")
    def _delete_topic(self, cmd: Command) -> list[str]:
        if self.topic_objects.pop(cmd.name, None) is None:
            return not_found(cmd.name)
        return [f"AMQ8691I: IBM MQ topic deleted: {cmd.name}."]

    @command("DISPLAY", "TOPIC")
    def _display_topics(self, cmd: Command) -> list[str]:
        found = [f"TOPIC({name}) TYPE(LOCAL) TOPICSTR({string})"
                 for name, string in self.topic_objects.items() if wanted(cmd.name, name)]
        return found or not_found(cmd.name)
