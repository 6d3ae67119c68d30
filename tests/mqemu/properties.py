"""Message handles and message properties of the emulated queue manager (tests only; NOT IBM MQ):
the verbs MQCRTMH, MQDLTMH, MQSETMP, MQINQMP and MQDLTMP, and the properties a message carries
from MQPMO.OriginalMsgHandle/NewMsgHandle (MQPMO Version >= 3) on MQPUT/MQPUT1 to MQGMO.MsgHandle
(MQGMO Version >= 4) on MQGET. :class:`PropertyVerbs` is a mixin of ``qmgr.QueueManager``; what
it follows of the MQ reference and where it differs: README.md.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import mqi
from mqi import GMO, IMPO, PMO, SMPO, get, put

Reply = tuple[int, int, list[bytes]]

# The value of each fixed-size type as the caller's native (x86_64) encoding holds it.
FORMATS = {mqi.MQTYPE_BOOLEAN: "<i", mqi.MQTYPE_INT8: "<b", mqi.MQTYPE_INT16: "<h",
           mqi.MQTYPE_INT32: "<i", mqi.MQTYPE_INT64: "<q", mqi.MQTYPE_FLOAT32: "<f",
           mqi.MQTYPE_FLOAT64: "<d"}
TYPES = set(FORMATS) | {mqi.MQTYPE_NULL, mqi.MQTYPE_BYTE_STRING, mqi.MQTYPE_STRING}
INTEGERS = (mqi.MQTYPE_INT8, mqi.MQTYPE_INT16, mqi.MQTYPE_INT32, mqi.MQTYPE_INT64)
FLOATS = (mqi.MQTYPE_FLOAT32, mqi.MQTYPE_FLOAT64)
MQENC_NATIVE = 0x222
# "Property name restrictions": reserved words, and the JMS names an MQI program may set.
KEYWORDS = {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
SETTABLE_JMS = {"JMSCorrelationID", "JMSReplyTo", "JMSType", "JMSXGroupID", "JMSXGroupSeq"}
OTHER_FOLDERS = ("mq", "jms", "mcd", "root", "body")  # names starting so are not usr.


@dataclass
class Property:
    """One property: its MQTYPE_*, value bytes (native encoding; strings UTF-8) and MQPD."""

    type: int
    value: bytes
    pd: bytes


@dataclass
class MessageHandle:
    """What an hmsg names: ordered properties and the property cursor of MQINQMP."""

    properties: dict[str, Property] = field(default_factory=dict)
    validate: bool = True
    cursor: str | None = None  # name of the property last inquired
    cursor_pattern: str | None = None  # the name it was inquired with (for MQIMPO_INQ_NEXT)

    def reset_cursor(self) -> None:
        self.cursor = self.cursor_pattern = None


def canonical(name: str) -> str:
    """A property name without its ``usr.`` folder (MQINQMP returns ``usr.`` ones without it)."""
    return name[4:] if name.startswith("usr.") else name


def name_error(name: str) -> bool:
    """Whether MQSETMP refuses ``name`` (MQRC_PROPERTY_NAME_ERROR, "Property name
    restrictions"): characters outside Java identifiers and '.', an empty level, reserved
    words, JMS names an MQI program cannot set, Body/Root, two levels after an 'mq' prefix."""
    bare = canonical(name)
    levels = bare.split(".")
    if not all(level.replace("$", "_").isidentifier() for level in levels):
        return True
    if bare.upper() in KEYWORDS or (bare.startswith("JMS") and bare not in SETTABLE_JMS):
        return True
    if name.startswith(("Body", "Root")) and not name.startswith("Root.MQMD."):
        return True
    return bare.lower().startswith("mq") and not bare.lower().startswith("mq_usr") \
        and len(levels) > 2


def matches(pattern: str, name: str) -> bool:
    """MQINQMP's name: exact, or a trailing '%' matching zero or more characters (the period
    too); ``usr.%`` only the user properties."""
    if not pattern.endswith("%"):
        return canonical(pattern) == name
    if pattern.startswith("usr.") and name.lower().startswith(OTHER_FOLDERS):
        return False
    return name.startswith(canonical(pattern[:-1]))


def decode(prop: Property):
    """The Python value of a property."""
    if prop.type in FORMATS:
        return struct.unpack(FORMATS[prop.type], prop.value)[0]
    if prop.type == mqi.MQTYPE_STRING:
        return prop.value.decode("utf-8", "replace")
    return prop.value if prop.type == mqi.MQTYPE_BYTE_STRING else None


def convert(prop: Property, wanted: int) -> tuple[bytes, int]:
    """``prop``'s value as type ``wanted`` (MQIMPO_CONVERT_TYPE): (bytes, 0) or (b"", reason)."""
    value = decode(prop)
    if wanted == mqi.MQTYPE_STRING and prop.type != mqi.MQTYPE_BYTE_STRING:
        if prop.type == mqi.MQTYPE_BOOLEAN:
            value = "TRUE" if value else "FALSE"
        return ("" if value is None else str(value)).encode(), 0
    if prop.type == mqi.MQTYPE_STRING and wanted in (*INTEGERS, *FLOATS, mqi.MQTYPE_BOOLEAN):
        text = value.strip()
        try:
            if wanted == mqi.MQTYPE_BOOLEAN:
                value = {"TRUE": 1, "FALSE": 0, "1": 1, "0": 0}[text.upper()]
            else:
                value = int(text) if wanted in INTEGERS else float(text)
        except (KeyError, ValueError):
            return b"", mqi.MQRC_PROP_NUMBER_FORMAT_ERROR
    elif not (prop.type in (*INTEGERS, *FLOATS) and wanted in (*INTEGERS, *FLOATS)):
        return b"", mqi.MQRC_PROP_CONV_NOT_SUPPORTED
    if wanted in INTEGERS:
        if isinstance(value, float) and not math.isfinite(value):
            return b"", mqi.MQRC_PROP_VALUE_NOT_CONVERTED
        value = int(value)
    try:
        return struct.pack(FORMATS[wanted], value), 0
    except (struct.error, OverflowError):
        return b"", mqi.MQRC_PROP_VALUE_NOT_CONVERTED


def unpack_long(data: bytes) -> int:
    return struct.unpack("<i", data)[0]


def unpack_hmsg(data: bytes) -> int:
    return struct.unpack("<q", data)[0]


class PropertyVerbs:
    """The message-handle verbs and the property side of MQPUT/MQGET, for ``QueueManager``
    (whose ``Connection`` keeps its handles in ``msg_handles``, hmsg -> :class:`MessageHandle`,
    numbered from its ``ids`` counter)."""

    # -- MQCRTMH / MQDLTMH -----------------------------------------------------------------

    def verb_crtmh(self, conn, f: list[bytes]) -> Reply:
        cmho = f[0]
        options = get(mqi.CMHO, cmho, "Options") or 0
        hmsg = next(self.ids)  # unique in the queue manager: a deleted handle is never reused
        conn.msg_handles[hmsg] = MessageHandle(validate=not options & mqi.MQCMHO_NO_VALIDATION)
        return mqi.MQCC_OK, 0, [struct.pack("<q", hmsg)]

    def verb_dltmh(self, conn, f: list[bytes]) -> Reply:
        if conn.msg_handles.pop(unpack_hmsg(f[0]), None) is None:
            return mqi.MQCC_FAILED, mqi.MQRC_HMSG_ERROR, []
        return mqi.MQCC_OK, 0, []

    # -- MQSETMP / MQDLTMP -----------------------------------------------------------------

    def verb_setmp(self, conn, f: list[bytes]) -> Reply:
        smpo, name_bytes, pd, value = f[1], f[2], f[3], f[6]
        handle = conn.msg_handles.get(unpack_hmsg(f[0]))
        kind, length = unpack_long(f[4]), unpack_long(f[5])
        if handle is None:
            return mqi.MQCC_FAILED, mqi.MQRC_HMSG_ERROR, []
        if get(SMPO, smpo, "Options") != mqi.MQSMPO_SET_FIRST:
            return mqi.MQCC_FAILED, mqi.MQRC_FUNCTION_NOT_SUPPORTED, []  # cursor positions
        name = name_bytes.decode("utf-8", "replace")
        if len(name) > mqi.MQ_MAX_PROPERTY_NAME_LENGTH:
            return mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NAME_LENGTH_ERR, []
        if not name or "%" in name or (handle.validate and name_error(name)):
            return mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NAME_ERROR, []
        if kind not in TYPES:
            return mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_TYPE_ERROR, []
        if kind in FORMATS:
            good = length == struct.calcsize(FORMATS[kind])
        elif kind == mqi.MQTYPE_STRING:
            good = length >= 0 or length == mqi.MQVL_NULL_TERMINATED
        else:
            good = length >= 0
        if not good:
            return mqi.MQCC_FAILED, mqi.MQRC_BUFFER_LENGTH_ERROR, []
        if kind == mqi.MQTYPE_BOOLEAN:
            value = struct.pack("<i", 1 if unpack_long(value) else 0)
        if kind == mqi.MQTYPE_STRING:
            value = value.split(b"\0", 1)[0] if length == mqi.MQVL_NULL_TERMINATED else value
        handle.properties.pop(canonical(name), None)
        handle.properties[canonical(name)] = Property(kind, bytes(value), bytes(pd))
        return mqi.MQCC_OK, 0, []

    def verb_dltmp(self, conn, f: list[bytes]) -> Reply:
        handle = conn.msg_handles.get(unpack_hmsg(f[0]))
        if handle is None:
            return mqi.MQCC_FAILED, mqi.MQRC_HMSG_ERROR, []
        name = f[2].decode("utf-8", "replace")
        if get(mqi.DMPO, f[1], "Options") & mqi.MQDMPO_DEL_PROP_UNDER_CURSOR:
            if handle.cursor not in handle.properties:
                return mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NOT_AVAILABLE, []
            del handle.properties[handle.cursor]
            return mqi.MQCC_OK, 0, []
        if not name or "%" in name:
            return mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NAME_ERROR, []  # no wildcards here
        if handle.properties.pop(canonical(name), None) is None:
            return mqi.MQCC_WARNING, mqi.MQRC_PROPERTY_NOT_AVAILABLE, []
        return mqi.MQCC_OK, 0, []

    # -- MQINQMP ---------------------------------------------------------------------------

    def verb_inqmp(self, conn, f: list[bytes]) -> Reply:
        impo, pd = bytearray(f[1]), f[3]
        wanted, room = unpack_long(f[4]), unpack_long(f[5])
        handle = conn.msg_handles.get(unpack_hmsg(f[0]))

        def reply(cc: int, rc: int, kind: int = wanted, value: bytes = b"", length: int = 0,
                  name: bytes = b"", desc: bytes = pd) -> Reply:
            return cc, rc, [bytes(impo), name, desc, struct.pack("<i", kind), value,
                            struct.pack("<i", length)]
        if handle is None:
            return reply(mqi.MQCC_FAILED, mqi.MQRC_HMSG_ERROR)
        pattern = f[2].decode("utf-8", "replace")
        options = get(IMPO, impo, "Options")
        if "%" in pattern[:-1] or not pattern:
            return reply(mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NAME_ERROR)
        if wanted not in TYPES | {mqi.MQTYPE_AS_SET}:
            return reply(mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_TYPE_ERROR)
        names = list(handle.properties)
        if options & mqi.MQIMPO_INQ_PROP_UNDER_CURSOR:
            found = handle.cursor if handle.cursor in handle.properties else None
        else:
            start = 0
            if options & mqi.MQIMPO_INQ_NEXT and handle.cursor_pattern == pattern \
                    and handle.cursor in handle.properties:
                start = names.index(handle.cursor) + 1
            found = next((n for n in names[start:] if matches(pattern, n)), None)
        if found is None:
            return reply(mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NOT_AVAILABLE)
        handle.cursor, handle.cursor_pattern = found, (
            handle.cursor_pattern if options & mqi.MQIMPO_INQ_PROP_UNDER_CURSOR else pattern)
        prop = handle.properties[found]
        kind, value = prop.type, prop.value
        if wanted not in (mqi.MQTYPE_AS_SET, prop.type):
            if not options & mqi.MQIMPO_CONVERT_TYPE:
                return reply(mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_TYPE_ERROR)
            value, reason = convert(prop, wanted)
            if reason:
                return reply(mqi.MQCC_FAILED, reason)
            kind = wanted
        name = found.encode("utf-8")
        if get(IMPO, impo, "ReturnedNameVSPtr") and get(IMPO, impo, "ReturnedNameVSBufSize") > 0:
            if len(name) > get(IMPO, impo, "ReturnedNameVSBufSize"):
                return reply(mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_NAME_TOO_BIG, kind,
                             length=len(value))
            put(IMPO, impo, "ReturnedNameVSLength", len(name))
        put(IMPO, impo, "ReturnedEncoding", MQENC_NATIVE)
        if kind == mqi.MQTYPE_STRING:
            put(IMPO, impo, "ReturnedCCSID", mqi.UTF8_CCSID)
        if options & mqi.MQIMPO_QUERY_LENGTH:
            return reply(mqi.MQCC_OK, 0, kind, b"", len(value), name, prop.pd)
        if len(value) > room:
            return reply(mqi.MQCC_FAILED, mqi.MQRC_PROPERTY_VALUE_TOO_BIG, kind,
                         value[:max(room, 0)], len(value), name, prop.pd)
        return reply(mqi.MQCC_OK, 0, kind, value, len(value), name, prop.pd)

    # -- the properties of a message put and got -------------------------------------------

    def properties_to_put(self, conn, pmo: bytes) -> tuple[dict[str, Property], int]:
        """The properties an MQPUT's MQPMO (Version >= 3) gives its message: those of
        OriginalMsgHandle, overridden by those of NewMsgHandle; and a reason (0: fine)."""
        if (get(PMO, pmo, "Version") or 1) < 3:
            return {}, 0
        if get(PMO, pmo, "Action") not in (mqi.MQACTP_NEW, mqi.MQACTP_FORWARD, mqi.MQACTP_REPLY,
                                           mqi.MQACTP_REPORT):
            return {}, mqi.MQRC_ACTION_ERROR
        properties: dict[str, Property] = {}
        for field_name in ("OriginalMsgHandle", "NewMsgHandle"):
            hmsg = get(PMO, pmo, field_name)
            if hmsg == mqi.MQHM_NONE:
                continue
            handle = conn.msg_handles.get(hmsg)
            if handle is None:
                return {}, mqi.MQRC_HMSG_ERROR
            handle.reset_cursor()
            properties.update(handle.properties)
        return properties, 0

    def after_put(self, conn, pmo: bytes, properties: dict[str, Property]) -> None:
        """NewMsgHandle, on return, holds the properties of the message actually put."""
        if (get(PMO, pmo, "Version") or 1) >= 3 and get(PMO, pmo, "NewMsgHandle"):
            conn.msg_handles[get(PMO, pmo, "NewMsgHandle")].properties = dict(properties)

    def get_handle(self, conn, gmo: bytes) -> tuple[MessageHandle | None, int]:
        """The message handle an MQGET returns the properties in (MQGMO Version >= 4 MsgHandle
        with MQGMO_PROPERTIES_IN_HANDLE or _AS_Q_DEF), or None; and a reason (0: fine)."""
        if (get(GMO, gmo, "Version") or 1) < 4 or get(GMO, gmo, "MsgHandle") == mqi.MQHM_NONE:
            return None, 0
        handle = conn.msg_handles.get(get(GMO, gmo, "MsgHandle"))
        if handle is None:
            return None, mqi.MQRC_HMSG_ERROR
        if get(GMO, gmo, "Options") & (mqi.MQGMO_NO_PROPERTIES | mqi.MQGMO_PROPERTIES_FORCE_MQRFH2
                                       | mqi.MQGMO_PROPERTIES_COMPATIBILITY):
            return None, 0
        return handle, 0

    @staticmethod
    def deliver_properties(handle: MessageHandle | None, properties: dict[str, Property]) -> None:
        """Replace the handle's properties with the message's (the handle is reused)."""
        if handle is not None:
            handle.properties = dict(properties)
            handle.reset_cursor()
