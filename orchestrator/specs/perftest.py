"""PerfTest command lines as surge specs: ``surge perftest ARGS...`` and the option table of
the docs come from the one registry below, so the two cannot drift.

Each PerfTest 2.x option that matters to a test is listed once, with its status in surge
(``Y``: the same test; ``partial``: taken, with what differs said; ``N``: refused, with why) and,
for the options taken, how it changes the scenario and the topology. An option of the registry
marked ``N``, or one the registry does not know, is refused in one line naming it: none is
silently ignored.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

PASSWORD_ENV = "SURGE_PERFTEST_PASSWORD"
"""Where ``surge perftest`` puts the password of ``-h``/``-H`` URIs: never in a file."""


class PerfTestError(ValueError):
    """A command line surge cannot run as it is: the message names the option."""


@dataclass
class Draft:
    """The scenario and topology a command line builds, as plain mappings."""

    workload: dict[str, Any] = field(default_factory=lambda: {
        "queue": "perf-test", "senders": 1, "receivers": 1, "message": {"size": 28}})
    queue: dict[str, Any] = field(default_factory=lambda: {"name": "perf-test",
                                                           "type": "classic"})
    rate: float = 0.0
    steps: list[dict[str, Any]] = field(default_factory=list)
    delays: list[dict[str, Any]] = field(default_factory=list)
    seconds: float | None = None
    pattern: dict[str, int] = field(default_factory=dict)
    pattern_name: str | None = None
    limit: int | None = None
    receiver_limit: int | None = None
    nack: bool = False
    requeue: bool = True
    uris: list[str] = field(default_factory=list)
    exchange: str | None = None
    exchange_type: str = "direct"
    routing_key: str | None = None
    named: bool = False  # -u: a named queue; none: each consumer a server-named queue of its own
    channels: dict[str, int] = field(default_factory=dict)  # -X, -Y: per sender/receiver conn.
    exclusive: bool = False
    description: str = "translated from a PerfTest command line"

    def specs(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The scenario and the topology, as mappings ready to be written as YAML."""
        queue, workload = dict(self.queue), dict(self.workload)
        if self.pattern or self.pattern_name:
            if self.pattern_name is None:
                raise PerfTestError("--queue-pattern-from/--queue-pattern-to need "
                                    "--queue-pattern")
            first, last = self.pattern.get("from", 1), self.pattern.get("to", 1)
            if first != 1:
                raise PerfTestError(f"--queue-pattern-from {first}: surge numbers a pattern's "
                                    f"queues from 1")
            queue.update(name=self.pattern_name, count=last)
        exchange = self.exchange
        if not (self.named or self.pattern_name):
            queue, exchange = self._own_queues(queue)
        elif self.exclusive:
            raise PerfTestError("-E with -u or --queue-pattern: PerfTest shares an exclusive "
                                "queue among the consumers of one connection, and surge's "
                                "receivers each have a connection of their own; leave -u out "
                                "for an exclusive queue per consumer")
        workload["queue"] = queue["name"]
        for role, count in self.channels.items():  # PerfTest's -x connections of -X channels
            if count > 1:
                workload[role] = workload[role] * count
                workload[f"{role}_per_connection"] = count
        if self.nack:
            workload["nack"] = "requeue" if self.requeue else "drop"
        if exchange:
            workload.update(exchange=exchange, routing_key=self.routing_key or queue["name"])
        topology = self._topology(name, queue, exchange)
        plan = self.steps or [{"rate_per_sender": self.rate,
                               "hold": f"{self.seconds or 60:g}s"}]
        scenario: dict[str, Any] = {"name": name, "topology": "topology.yaml",
                                    "description": self.description,
                                    "workload": workload, "plan": plan}
        if self.delays:
            scenario["consumer_profile"] = self.delays
        limits = {name: value for name, value in (("messages_per_sender", self.limit),
                                                  ("messages_per_receiver",
                                                   self.receiver_limit)) if value is not None}
        if limits:
            scenario["exit"] = limits
        return scenario, topology

    def _own_queues(self, queue: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Without -u, every PerfTest consumer declares a server-named queue of its own, bound
        to the exchange (``direct`` unless -e says) with the routing key: a queue per
        receiver."""
        if queue.get("type", "classic") != "classic":
            raise PerfTestError(f"a {queue['type']} queue (-qq, -sq or -qa x-queue-type) needs "
                                f"a name: give -u or --queue-pattern")
        own = {k: v for k, v in queue.items() if k not in ("durable", "auto_delete")}
        return {**own, "per_receiver": True}, self.exchange or "direct"

    def _topology(self, name: str, queue: dict[str, Any], exchange: str | None
                  ) -> dict[str, Any]:
        topology: dict[str, Any] = {"name": name, "members": 1, "start": 1, "queues": [queue]}
        if exchange:
            topology["exchanges"] = [{"name": exchange, "type": self.exchange_type}]
            topology["bindings"] = [{"exchange": exchange, "queue": queue["name"],
                                     "routing_key": self.routing_key or queue["name"]}]
        if not self.uris:
            return topology
        members, users = [], set()
        for uri in self.uris:
            parts = urlsplit(uri)
            if parts.scheme not in ("amqp", "amqps") or not parts.hostname:
                raise PerfTestError(f"-h/-H {_hidden(uri)!r}: expected "
                                    f"amqp://USER:PASSWORD@HOST:PORT/VHOST")
            port = f":{parts.port}" if parts.port else ""
            members.append({"uri": f"{parts.scheme}://{parts.hostname}{port}"})
            users.add(unquote(parts.username or "guest"))
        if len(users) > 1:
            raise PerfTestError("-H: every URI must name the same user")
        vhost = unquote(urlsplit(self.uris[0]).path.lstrip("/")) or "/"
        topology.update(placement="existing", members=len(members), start=len(members),
                        existing={"members": members, "vhost": vhost,
                                  "credentials": {"user": users.pop(),
                                                  "password_env": PASSWORD_ENV}})
        return topology


Apply = Callable[[Draft, str], None]


@dataclass(frozen=True)
class Option:
    """One PerfTest option: its names, whether it takes a value, what surge does with it."""

    short: str | None
    long: str
    takes_value: bool
    status: str  # "Y" | "partial" | "N"
    surge: str  # the scenario or topology field, or why not
    apply: Apply | None = None


def _set(mapping: str, key: str, convert: Callable[[str], Any] = str) -> Apply:
    """Set ``key`` of the draft's ``mapping`` (workload or queue) to the converted value."""
    def apply(draft: Draft, value: str) -> None:
        getattr(draft, mapping)[key] = convert(value)
    return apply


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise PerfTestError(f"expected a number, got {value!r}") from None


def _count(value: str) -> int:
    number = _number(value)
    if number != int(number) or number < 0:
        raise PerfTestError(f"expected a whole number, got {value!r}")
    return int(number)


def _bytes(value: str) -> int:
    size = _count(value)
    if size < 28:
        raise PerfTestError(f"{size}: a surge message carries a 28-byte header (send time, "
                            f"producer, sequence number), so at least 28 bytes")
    return size


def _size(draft: Draft, value: str) -> None:
    size = _bytes(value)
    message = draft.workload["message"]
    if not ("size_steps" in message or "payload_files" in message):  # as PerfTest: -vs, -B win
        message["size"] = size


def _flag(draft: Draft, value: str) -> None:
    if value.lower() not in ("persistent", "mandatory"):
        raise PerfTestError(f"{value}: expected persistent or mandatory")
    draft.workload["message"][value.lower()] = True


def _size_step(draft: Draft, value: str) -> None:
    size, _, seconds = value.partition(":")
    if not seconds:
        raise PerfTestError(f"{value!r}: expected SIZE:SECONDS")
    message = draft.workload["message"]
    message.pop("size", None)
    message.setdefault("size_steps", []).append(f"{_bytes(size)}:{_number(seconds):g}s")


def _bodies(draft: Draft, value: str) -> None:
    message = draft.workload["message"]
    message.pop("size", None)
    message["payload_files"] = [str(Path(f).resolve()) for f in value.split(",") if f]


_PROPERTY_NAMES = {"contentType": "content_type", "contentEncoding": "content_encoding",
                   "priority": "priority", "expiration": "expiration", "type": "type",
                   "appId": "app_id"}


def _properties(draft: Draft, value: str) -> None:
    properties = draft.workload["message"].setdefault("properties", {})
    for pair in value.split(","):
        name, _, setting = pair.partition("=")
        name, setting = name.strip(), setting.strip()
        if name == "deliveryMode":
            draft.workload["message"]["persistent"] = setting == "2"
        elif name == "expiration":  # milliseconds in AMQP
            properties["expiration"] = f"{_number(setting):g}ms"
        elif name in _PROPERTY_NAMES:
            properties[_PROPERTY_NAMES[name]] = _typed(setting) if name == "priority" \
                else setting
        elif name in ("correlationId", "replyTo", "messageId", "timestamp", "userId",
                      "clusterId"):
            raise PerfTestError(f"{name}: not supported (surge sets what identifies a "
                                f"message in its header)")
        else:
            properties.setdefault("headers", {})[name] = _typed(setting)


def _consumer_args(draft: Draft, value: str) -> None:
    for pair in value.split(","):
        name, _, setting = pair.partition("=")
        if name.strip() == "x-stream-offset":
            draft.workload["stream_offset"] = _typed(setting.strip())
        else:
            draft.workload.setdefault("consumer_arguments", {})[name.strip()] = _typed(setting)


def _global_qos(draft: Draft, value: str) -> None:
    draft.workload.update(prefetch=_count(value), global_qos=True)


def _step(key: str, target: str) -> Apply:
    def apply(draft: Draft, value: str) -> None:
        amount, _, seconds = value.partition(":")
        if not seconds:
            raise PerfTestError(f"{value!r}: expected VALUE:SECONDS")
        # PerfTest's latencies are microseconds
        level = f"{_number(amount) / 1000:g}ms" if key == "delay" else _number(amount)
        getattr(draft, target).append({key: level, "hold": f"{_number(seconds):g}s"})
    return apply


def _latency(draft: Draft, value: str) -> None:
    draft.delays = [{"delay": f"{_number(value) / 1000:g}ms", "hold": "1s"}]


def _queue_args(draft: Draft, value: str) -> None:
    for pair in value.split(","):
        name, _, setting = pair.partition("=")
        name = name.strip()
        if name == "x-queue-type":
            if setting not in ("classic", "quorum", "stream"):
                raise PerfTestError(f"x-queue-type={setting}: classic, quorum or stream")
            draft.queue["type"] = setting
        elif name in ("durable", "auto-delete"):
            draft.queue[name.replace("-", "_")] = setting.strip().lower() == "true"
        else:
            draft.queue.setdefault("arguments", {})[name] = _typed(setting)


def _queue_name(draft: Draft, value: str) -> None:
    draft.queue["name"] = value
    draft.named = True


def _typed(value: str) -> Any:
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return value


def _uris(draft: Draft, value: str) -> None:
    draft.uris += [uri for uri in value.split(",") if uri]


def _exchange_type(draft: Draft, value: str) -> None:
    if value not in ("direct", "fanout", "topic", "headers"):
        raise PerfTestError(f"{value}: expected direct, fanout, topic or headers")
    draft.exchange_type = value


def _pattern(key: str) -> Apply:
    def apply(draft: Draft, value: str) -> None:
        if key == "name":
            if "%d" not in value:
                raise PerfTestError(f"{value!r}: needs %d")
            draft.pattern_name = value
        else:
            draft.pattern[key] = _count(value)
    return apply


def _nothing(draft: Draft, value: str) -> None:
    """An option that asks for surge's own behaviour."""


def _confirm_window(draft: Draft, value: str) -> None:
    window = _count(value)
    if window > 0:
        draft.workload.update(confirms=True, confirm_window=window)


OPTIONS: tuple[Option, ...] = (
    Option("x", "producers", True, "Y", "workload.senders", _set("workload", "senders",
                                                                  convert=_count)),
    Option("y", "consumers", True, "Y", "workload.receivers", _set("workload", "receivers",
                                                                    convert=_count)),
    Option("u", "queue", True, "Y", "workload.queue and the topology's queue; without -u "
                                    "(or --queue-pattern) a queue per receiver, as PerfTest's "
                                    "server-named queue per consumer", _queue_name),
    Option("s", "size", True, "Y", "workload.message.size (at least 28 bytes: surge's header)",
           _size),
    Option("r", "rate", True, "Y", "plan: rate_per_sender", lambda d, v: setattr(
        d, "rate", _number(v))),
    Option("vr", "variable-rate", True, "Y", "plan: one step per RATE:SECONDS",
           _step("rate_per_sender", "steps")),
    Option("z", "time", True, "Y", "plan: the step's hold (default 60 s here; PerfTest runs "
                                   "until stopped)", lambda d, v: setattr(d, "seconds",
                                                                           _number(v))),
    Option("C", "pmessages", True, "Y", "exit.messages_per_sender",
           lambda d, v: setattr(d, "limit", _count(v))),
    Option("f", "flag", True, "Y", "persistent: workload.message.persistent; mandatory: "
                                   "workload.message.mandatory (returns counted)", _flag),
    Option("a", "autoack", False, "Y", "workload.ack: auto", _set("workload", "ack",
                                                                   convert=lambda _: "auto")),
    Option("q", "qos", True, "Y", "workload.prefetch", _set("workload", "prefetch",
                                                             convert=_count)),
    Option("c", "confirm", True, "Y", "workload.confirms and workload.confirm_window",
           _confirm_window),
    Option("ct", "confirm-timeout", True, "partial", "taken: surge republishes what a lost "
                                                     "connection left unconfirmed, never "
                                                     "fails the run on a timeout", _nothing),
    Option("ad", "auto-delete", True, "partial", "the queue's auto_delete; a queue per "
                                                 "receiver (no -u) is deleted with its "
                                                 "receiver whatever -ad says",
           _set("queue", "auto_delete", convert=lambda v: v.lower() == "true")),
    Option("qa", "queue-args", True, "Y", "the queue's type, durable, auto_delete and "
                                          "x-arguments (x-queue-type: classic, quorum or stream)",
           _queue_args),
    Option("qq", "quorum-queue", False, "Y", "the queue's type: quorum",
           _set("queue", "type", convert=lambda _: "quorum")),
    Option(None, "queue-pattern", True, "Y", "a queue pattern with a count", _pattern("name")),
    Option(None, "queue-pattern-from", True, "partial", "must be 1 (surge numbers from 1)",
           _pattern("from")),
    Option(None, "queue-pattern-to", True, "Y", "the pattern's count", _pattern("to")),
    Option("P", "producer-random-start-delay", True, "Y", "workload.start_delay",
           _set("workload", "start_delay", convert=lambda v: f"{_number(v):g}s")),
    Option("L", "consumer-latency", True, "Y", "consumer_profile: one delay (µs in PerfTest)",
           _latency),
    Option("vl", "variable-latency", True, "Y", "consumer_profile: one step per "
                                               "MICROSECONDS:SECONDS", _step("delay", "delays")),
    Option("e", "exchange", True, "Y", "workload.exchange and the topology's exchange, the "
                                       "queue bound with the routing key",
           lambda d, v: setattr(d, "exchange", v)),
    Option("t", "type", True, "Y", "the exchange's type", _exchange_type),
    Option("k", "routing-key", True, "Y", "workload.routing_key and the binding's key",
           lambda d, v: setattr(d, "routing_key", v)),
    Option("d", "id", True, "Y", "the scenario's description",
           lambda d, v: setattr(d, "description", v)),
    Option("p", "predeclared", False, "partial", "taken: surge declares the queue (unchanged "
                                                 "if it exists with the same settings); on "
                                                 "an existing broker it must exist", _nothing),
    Option("i", "interval", True, "partial", "taken: surge samples every second", _nothing),
    Option("ms", "use-millis", False, "partial", "taken: surge stamps nanoseconds and reports "
                                                 "milliseconds always", _nothing),
    Option("o", "output-file", True, "N", "surge writes its run directory (--runs-dir)"),
    Option("h", "uri", True, "partial", "an existing broker (placement existing); its queues "
                                        "must exist (surge declares queues there through the "
                                        "management API, which a URI does not name)", _uris),
    Option("H", "uris", True, "partial", "the members of an existing cluster, as -h", _uris),
    Option("K", "random-routing-key", False, "N", "a random UUID per message reaches no "
                                                  "binding surge can account for; give keys in "
                                                  "routing_keys with key_order: random"),
    Option("A", "multi-ack-every", True, "Y", "workload.ack_every",
           _set("workload", "ack_every", convert=_count)),
    Option("Q", "global-qos", True, "Y", "workload.prefetch with workload.global_qos",
           _global_qos),
    Option("b", "heartbeat", True, "Y", "workload.heartbeat",
           _set("workload", "heartbeat", convert=lambda v: f"{_number(v):g}s")),
    Option("M", "framemax", True, "Y", "workload.frame_max",
           _set("workload", "frame_max", convert=_count)),
    Option("m", "ptxsize", True, "Y", "workload.publish_transaction",
           _set("workload", "publish_transaction", convert=_count)),
    Option("n", "ctxsize", True, "Y", "workload.consume_transaction",
           _set("workload", "consume_transaction", convert=_count)),
    Option("D", "cmessages", True, "Y", "exit.messages_per_receiver",
           lambda d, v: setattr(d, "receiver_limit", _count(v))),
    Option("R", "consumer-rate", True, "Y", "workload.consumer_rate",
           _set("workload", "consumer_rate", convert=_number)),
    Option("S", "slow-start", False, "Y", "workload.receiver_spacing: 1 s",
           _set("workload", "receiver_spacing", convert=lambda _: "1s")),
    Option("X", "producer-channel-count", True, "partial", "workload.senders_per_connection; "
                                                           "workload.senders is -x x -X (the "
                                                           "senders of different agents "
                                                           "never share a connection)",
           lambda d, v: d.channels.update(senders=_count(v))),
    Option("Y", "consumer-channel-count", True, "partial", "workload.receivers_per_connection; "
                                                           "workload.receivers is -y x -Y "
                                                           "(read by pika where shared)",
           lambda d, v: d.channels.update(receivers=_count(v))),
    Option("B", "body", True, "partial", "workload.message.payload_files (the 28-byte header "
                                         "precedes each file's bytes)", _bodies),
    Option("jb", "json-body", False, "partial", "workload.message.body: json (a JSON document "
                                                "after the 28-byte header)",
           lambda d, _: d.workload["message"].update(body="json")),
    Option("vs", "variable-size", True, "Y", "workload.message.size_steps: one per "
                                             "SIZE:SECONDS", _size_step),
    Option("mp", "message-properties", True, "partial", "workload.message.properties; other "
                                                        "names become headers; ids and "
                                                        "timestamps are refused (surge's "
                                                        "header carries them)", _properties),
    Option("ca", "consumer-args", True, "Y", "workload.consumer_arguments; x-stream-offset: "
                                             "workload.stream_offset", _consumer_args),
    Option("sq", "stream-queue", False, "Y", "the queue's type: stream (durable, not "
                                             "auto-deleted)",
           lambda d, _: d.queue.update(type="stream", durable=True, auto_delete=False)),
    Option("po", "polling", False, "Y", "workload.polling",
           _set("workload", "polling", convert=lambda _: True)),
    Option("pi", "polling-interval", True, "Y", "workload.polling_interval (ms in PerfTest)",
           _set("workload", "polling_interval", convert=lambda v: f"{_number(v):g}ms")),
    Option("na", "nack", False, "Y", "workload.nack: requeue (drop with -re false)",
           lambda d, _: setattr(d, "nack", True)),
    Option("re", "requeue", True, "Y", "with -na, workload.nack: requeue or drop",
           lambda d, v: setattr(d, "requeue", v.strip().lower() != "false")),
    Option("E", "exclusive", False, "partial", "without -u: the queue per receiver, exclusive "
                                               "to its connection (as surge's always are); "
                                               "with -u or --queue-pattern refused: PerfTest "
                                               "shares an exclusive queue among the consumers "
                                               "of one connection",
           lambda d, _: setattr(d, "exclusive", True)),
    Option("se", "sasl-external", False, "N", "PerfTest takes the client certificate from JVM "
                                              "keystore properties, which its command line "
                                              "does not carry: set existing.mechanism: "
                                              "EXTERNAL with existing.tls.cert_file and "
                                              "key_file in the topology"),
    Option("dcr", "disable-connection-recovery", False, "Y", "workload.reconnect: false",
           _set("workload", "reconnect", convert=lambda _: False)),
)
_BY_NAME = {**{f"-{o.short}": o for o in OPTIONS if o.short},
            **{f"--{o.long}": o for o in OPTIONS}}


@dataclass(frozen=True)
class Translation:
    """A command line as surge specs: the scenario, the topology, the password its URIs carry
    (``None``: a local run) and one note per option taken in part."""

    scenario: dict[str, Any]
    topology: dict[str, Any]
    password: str | None
    notes: list[str]


def translate(argv: Sequence[str], name: str = "perftest") -> Translation:
    """The scenario and topology of a PerfTest command line (the words after ``PerfTest``,
    ``perf-test`` or ``runjava com.rabbitmq.perf.PerfTest`` are skipped).
    :class:`PerfTestError` names the first option surge refuses."""
    words = _words(argv)
    draft = Draft()
    notes = []
    i = 0
    while i < len(words):
        word = words[i]
        spelled, _, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        option = _BY_NAME.get(spelled)
        if option is None:
            raise PerfTestError(f"{word}: not a PerfTest option surge knows")
        if option.status == "N" or option.apply is None:
            raise PerfTestError(f"{spelled}: not supported: {option.surge}")
        value = ""
        if option.takes_value:
            if inline:
                value = inline
            elif i + 1 < len(words):
                i += 1
                value = words[i]
            else:
                raise PerfTestError(f"{spelled}: needs a value")
        if option.status == "partial":
            notes.append(f"{spelled}: {option.surge}")
        try:
            option.apply(draft, value)
        except PerfTestError as error:
            raise PerfTestError(f"{spelled}: {error}") from None
        i += 1
    scenario, topology = draft.specs(name)
    passwords = {unquote(urlsplit(u).password or "guest") for u in draft.uris}
    if len(passwords) > 1:
        raise PerfTestError("-H: every URI must carry the same password")
    return Translation(scenario, topology, passwords.pop() if passwords else None, notes)


def write(argv: Sequence[str], directory: Path) -> Translation:
    """Write the scenario and topology of a command line into ``directory`` (``scenario.yaml``,
    ``topology.yaml``, headed by the command line; the password of its URIs is never written)
    and check them as ``surge validate`` does (:class:`SpecError` if surge cannot run them)."""
    done = translate(argv)
    directory.mkdir(parents=True, exist_ok=True)
    for kind, spec in (("scenario", done.scenario), ("topology", done.topology)):
        head = f"# {kind} of: surge perftest {_hidden(shlex.join(_words(argv)))}\n"
        (directory / f"{kind}.yaml").write_text(head + yaml.safe_dump(spec, sort_keys=False))
    from orchestrator.specs.loader import load_scenario  # the models check what was written
    load_scenario(directory / "scenario.yaml", need_plan=True)
    return done


def _hidden(text: str) -> str:
    """``text`` with the passwords of its URIs replaced by ``***``."""
    return re.sub(r"(amqps?://[^:/@\s,]*:)[^@\s,]*@", r"\1***@", text)


def _words(argv: Sequence[str]) -> list[str]:
    """The options of a command line given as words or as one string; the program's own
    name and a trailing backslash-newline are dropped."""
    words = list(argv)
    if len(words) == 1 and " " in words[0]:
        words = shlex.split(words[0].replace("\\\n", " "))
    for skip in (("bin/runjava", "com.rabbitmq.perf.PerfTest"), ("runjava",
                                                                 "com.rabbitmq.perf.PerfTest")):
        if words[:2] == list(skip):
            words = words[2:]
    if "-jar" in words[:3]:
        words = words[words.index("-jar") + 2:]  # java -jar perf-test.jar
    while words and not words[0].startswith("-"):
        words = words[1:]  # perf-test
    return words


def option_table() -> str:
    """PerfTest's options against surge, as a Markdown table (the docs include it)."""
    rows = ["| PerfTest option | in surge | what it becomes, or why not |", "|---|---|---|"]
    for option in OPTIONS:
        names = ", ".join(f"`{n}`" for n in ([f"-{option.short}"] if option.short else [])
                          + [f"--{option.long}"])
        rows.append(f"| {names} | {option.status} | {option.surge} |")
    counts = {s: sum(1 for o in OPTIONS if o.status == s) for s in ("Y", "partial", "N")}
    rows.append("")
    rows.append(f"{counts['Y']} taken as they are, {counts['partial']} in part, "
                f"{counts['N']} refused.")
    return "\n".join(rows) + "\n"
