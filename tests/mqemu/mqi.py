"""MQI facts the emulated queue manager needs: constants (values of IBM's cmqc.h, as the MQ
reference lists them; tests/unit/test_mqemu_basics.py checks them against ``ibmmq.CMQC``),
the x86_64 byte layouts of the structures it reads and writes, and the wire format shared with
libmqm.c. Tests only; NOT IBM MQ."""

from __future__ import annotations

import struct

# -- wire format (libmqm.c) ---------------------------------------------------------------------

VERBS = {1: "CONNX", 2: "DISC", 3: "OPEN", 4: "CLOSE", 5: "PUT", 6: "PUT1", 7: "GET", 8: "INQ",
         9: "SET", 10: "BEGIN", 11: "CMIT", 12: "BACK", 13: "SUB", 14: "SUBRQ", 15: "CB",
         16: "CTL", 17: "STAT", 18: "CRTMH", 19: "DLTMH", 20: "SETMP", 21: "INQMP", 22: "DLTMP"}
ADMIN_MAGIC = b"MQSC"  # a connection starting with these 4 bytes speaks the admin line protocol


def pack_reply(cc: int, rc: int, fields: list[bytes]) -> bytes:
    """A reply frame: length, CompCode, Reason, then the fields."""
    body = struct.pack("<iiI", cc, rc, len(fields)) + b"".join(
        struct.pack("<I", len(f)) + f for f in fields)
    return struct.pack("<I", len(body)) + body


def unpack_request(payload: bytes) -> tuple[int, list[bytes]]:
    """The verb number and fields of a request frame's payload."""
    verb, count = struct.unpack_from("<II", payload)
    fields, at = [], 8
    for _ in range(count):
        (length,) = struct.unpack_from("<I", payload, at)
        at += 4
        fields.append(payload[at:at + length])
        at += length
    return verb, fields


# -- constants ----------------------------------------------------------------------------------

MQCC_OK, MQCC_WARNING, MQCC_FAILED = 0, 1, 2

MQRC_NONE = 0
MQRC_BACKED_OUT = 2003
MQRC_HCONN_ERROR = 2018
MQRC_HOBJ_ERROR = 2019
MQRC_NO_MSG_AVAILABLE = 2033
MQRC_NOT_AUTHORIZED = 2035
MQRC_NOT_OPEN_FOR_INPUT = 2037
MQRC_NOT_OPEN_FOR_INQUIRE = 2038
MQRC_NOT_OPEN_FOR_OUTPUT = 2039
MQRC_OBJECT_TYPE_ERROR = 2043
MQRC_OPTION_NOT_VALID_FOR_TYPE = 2045
MQRC_OPTIONS_ERROR = 2046
MQRC_Q_FULL = 2053
MQRC_Q_MGR_NAME_ERROR = 2058
MQRC_SELECTOR_ERROR = 2067
MQRC_TRUNCATED_MSG_ACCEPTED = 2079
MQRC_TRUNCATED_MSG_FAILED = 2080
MQRC_UNKNOWN_OBJECT_NAME = 2085
MQRC_UNKNOWN_OBJECT_Q_MGR = 2086
MQRC_UNKNOWN_REMOTE_Q_MGR = 2087
MQRC_XMIT_Q_USAGE_ERROR = 2092
MQRC_UNKNOWN_XMIT_Q = 2196
MQRC_UNKNOWN_DEF_XMIT_Q = 2197
MQRC_DEF_XMIT_Q_USAGE_ERROR = 2199
MQRC_INT_ATTR_COUNT_TOO_SMALL = 2022
MQRC_CHAR_ATTRS_TOO_SHORT = 2008
MQRC_FUNCTION_NOT_SUPPORTED = 2298
MQRC_NO_SUBSCRIPTION = 2428
MQRC_SUB_ALREADY_EXISTS = 2432
MQRC_SUB_NAME_ERROR = 2440
MQRC_TOPIC_STRING_ERROR = 2425
MQRC_SUBSCRIPTION_IN_USE = 2429
MQRC_BUFFER_LENGTH_ERROR = 2005
MQRC_PROPERTY_NAME_ERROR = 2442
MQRC_HMSG_ERROR = 2460
MQRC_PROPERTY_NAME_TOO_BIG = 2465
MQRC_PROP_VALUE_NOT_CONVERTED = 2466
MQRC_PROPERTY_VALUE_TOO_BIG = 2469
MQRC_PROPERTY_NOT_AVAILABLE = 2471
MQRC_PROP_NUMBER_FORMAT_ERROR = 2472
MQRC_PROPERTY_TYPE_ERROR = 2473
MQRC_PROPERTY_NAME_LENGTH_ERR = 2513
MQRC_ACTION_ERROR = 2535
MQRC_RECONNECTING = 2544
MQRC_RECONNECT_INCOMPATIBLE = 2547

MQOO_INPUT_AS_Q_DEF, MQOO_INPUT_SHARED, MQOO_INPUT_EXCLUSIVE = 0x1, 0x2, 0x4
MQOO_BROWSE, MQOO_OUTPUT, MQOO_INQUIRE, MQOO_SET = 0x8, 0x10, 0x20, 0x40
MQOO_INPUT = MQOO_INPUT_AS_Q_DEF | MQOO_INPUT_SHARED | MQOO_INPUT_EXCLUSIVE
MQOO_PASS_IDENTITY_CONTEXT, MQOO_PASS_ALL_CONTEXT = 0x100, 0x200
MQOO_SET_IDENTITY_CONTEXT, MQOO_SET_ALL_CONTEXT = 0x400, 0x800
MQOO_ALTERNATE_USER_AUTHORITY, MQOO_FAIL_IF_QUIESCING = 0x1000, 0x2000
MQOO_BIND_ON_OPEN, MQOO_BIND_NOT_FIXED, MQOO_BIND_ON_GROUP = 0x4000, 0x8000, 0x400000
MQBND_BIND_ON_OPEN, MQBND_BIND_NOT_FIXED, MQBND_BIND_ON_GROUP = 0, 1, 2
MQQT_CLUSTER = 7
MQIA_DEF_BIND = 61
MQIAV_NOT_APPLICABLE = -1
MQRC_SELECTOR_NOT_FOR_TYPE = 2068
MQOT_Q, MQOT_Q_MGR, MQOT_TOPIC = 1, 5, 8
MQCO_DELETE, MQCO_DELETE_PURGE, MQCO_KEEP_SUB, MQCO_REMOVE_SUB = 1, 2, 4, 8

MQPMO_SYNCPOINT, MQPMO_NO_SYNCPOINT, MQPMO_NEW_MSG_ID, MQPMO_NEW_CORREL_ID = 0x2, 0x4, 0x40, 0x80
MQGMO_WAIT, MQGMO_SYNCPOINT, MQGMO_NO_SYNCPOINT = 0x1, 0x2, 0x4
MQGMO_BROWSE_FIRST, MQGMO_BROWSE_NEXT, MQGMO_ACCEPT_TRUNCATED_MSG = 0x10, 0x20, 0x40
MQGMO_SYNCPOINT_IF_PERSISTENT = 0x1000
MQGMO_LOCK, MQGMO_UNLOCK, MQGMO_BROWSE_MSG_UNDER_CURSOR, MQGMO_MSG_UNDER_CURSOR = (
    0x200, 0x400, 0x800, 0x100)
MQGMO_PROPERTIES_FORCE_MQRFH2, MQGMO_NO_PROPERTIES = 0x02000000, 0x04000000
MQGMO_PROPERTIES_IN_HANDLE, MQGMO_PROPERTIES_COMPATIBILITY = 0x08000000, 0x10000000
MQGMO_UNSUPPORTED = (MQGMO_BROWSE_FIRST | MQGMO_BROWSE_NEXT | MQGMO_LOCK | MQGMO_UNLOCK
                     | MQGMO_BROWSE_MSG_UNDER_CURSOR | MQGMO_MSG_UNDER_CURSOR)
MQWI_UNLIMITED = -1
MQMO_MATCH_MSG_ID, MQMO_MATCH_CORREL_ID = 0x1, 0x2
MQPER_PERSISTENT, MQPER_PERSISTENCE_AS_Q_DEF = 1, 2
MQPRI_PRIORITY_AS_Q_DEF = -1
MQEI_UNLIMITED = -1

MQSO_CREATE, MQSO_RESUME, MQSO_DURABLE, MQSO_MANAGED = 0x2, 0x4, 0x8, 0x20
MQSO_ALTER = 0x1
MQSO_WILDCARD_CHAR = 0x100000
MQHO_NONE = 0

MQHM_NONE, MQHM_UNUSABLE_HMSG = 0, -1
MQACTP_NEW, MQACTP_FORWARD, MQACTP_REPLY, MQACTP_REPORT = 0, 1, 2, 3
MQCMHO_NO_VALIDATION = 0x1
MQTYPE_AS_SET, MQTYPE_NULL, MQTYPE_BOOLEAN, MQTYPE_BYTE_STRING = 0x0, 0x2, 0x4, 0x8
MQTYPE_INT8, MQTYPE_INT16, MQTYPE_INT32, MQTYPE_INT64 = 0x10, 0x20, 0x40, 0x80
MQTYPE_FLOAT32, MQTYPE_FLOAT64, MQTYPE_STRING = 0x100, 0x200, 0x400
MQVL_NULL_TERMINATED = -1
MQIMPO_CONVERT_TYPE, MQIMPO_QUERY_LENGTH, MQIMPO_INQ_FIRST, MQIMPO_INQ_NEXT = 0x2, 0x4, 0x0, 0x8
MQIMPO_INQ_PROP_UNDER_CURSOR, MQIMPO_CONVERT_VALUE = 0x10, 0x20
MQSMPO_SET_FIRST = 0x0
MQDMPO_DEL_FIRST, MQDMPO_DEL_PROP_UNDER_CURSOR = 0x0, 0x1
UTF8_CCSID = 1208  # the CCSID (UTF-8) property strings are kept and returned in
MQ_MAX_PROPERTY_NAME_LENGTH = 4095

MQCSP_AUTH_USER_ID_AND_PWD = 1
MQCNO_RECONNECT, MQCNO_RECONNECT_Q_MGR = 0x01000000, 0x04000000
MQCBT_EVENT_HANDLER = 2
MQOP_REGISTER, MQOP_DEREGISTER = 0x100, 0x200

MQIA_CURRENT_Q_DEPTH, MQIA_MAX_Q_DEPTH, MQIA_Q_TYPE = 3, 15, 20
MQIA_OPEN_INPUT_COUNT, MQIA_OPEN_OUTPUT_COUNT = 17, 18
MQCA_Q_MGR_NAME, MQCA_Q_NAME = 2015, 2016
MQCA_Q_MGR_DESC, MQCA_VERSION = 2014, 2120
MQIA_COMMAND_LEVEL, MQIA_PLATFORM, MQPL_UNIX = 31, 32, 3
MQQT_LOCAL, MQQT_MODEL, MQQT_REMOTE = 1, 2, 6

MQ_Q_NAME_LENGTH = 48
MQMI_NONE = bytes(24)

# -- structure layouts: (offset, struct format) of the fields the emulator uses ------------------

MD = {"Report": (8, "i"), "MsgType": (12, "i"), "Expiry": (16, "i"), "Feedback": (20, "i"),
      "Encoding": (24, "i"), "CodedCharSetId": (28, "i"), "Format": (32, "8s"),
      "Priority": (40, "i"), "Persistence": (44, "i"), "MsgId": (48, "24s"),
      "CorrelId": (72, "24s"), "BackoutCount": (96, "i"), "ReplyToQ": (100, "48s"),
      "ReplyToQMgr": (148, "48s"), "UserIdentifier": (196, "12s"), "PutApplType": (272, "i"),
      "PutApplName": (276, "28s"), "PutDate": (304, "8s"), "PutTime": (312, "8s")}
MD_LENGTH = 364
OD = {"Version": (4, "i"), "ObjectType": (8, "i"), "ObjectName": (12, "48s"),
      "ObjectQMgrName": (60, "48s"), "DynamicQName": (108, "48s"),
      "ResolvedQName": (248, "48s"), "ResolvedQMgrName": (296, "48s"),
      "ResolvedType": (416, "i")}
PMO = {"Version": (4, "i"), "Options": (8, "i"), "ResolvedQName": (32, "48s"),
       "ResolvedQMgrName": (80, "48s"), "OriginalMsgHandle": (160, "q"),
       "NewMsgHandle": (168, "q"), "Action": (176, "i")}  # the last three: Version >= 3
GMO = {"Version": (4, "i"), "Options": (8, "i"), "WaitInterval": (12, "i"),
       "ResolvedQName": (24, "48s"), "MatchOptions": (72, "i"), "ReturnedLength": (96, "i"),
       "MsgHandle": (104, "q")}  # MsgHandle: Version >= 4
CNO = {"Version": (4, "i"), "Options": (8, "i"), "ApplName": (224, "28s")}
CD = {"ChannelName": (0, "20s"), "ChannelType": (24, "i"), "ConnectionName": (1024, "264s")}
SD = {"Options": (8, "i"), "ObjectName": (12, "48s")}
CMHO = {"Options": (8, "i")}
DMPO = {"Options": (8, "i")}
SMPO = {"Options": (8, "i"), "ValueEncoding": (12, "i"), "ValueCCSID": (16, "i")}
PD = {"Options": (8, "i"), "Support": (12, "i"), "Context": (16, "i"), "CopyOptions": (20, "i")}
IMPO = {"Options": (8, "i"), "RequestedEncoding": (12, "i"), "RequestedCCSID": (16, "i"),
        "ReturnedEncoding": (20, "i"), "ReturnedCCSID": (24, "i"),
        "ReturnedNameVSPtr": (32, "Q"), "ReturnedNameVSBufSize": (44, "i"),
        "ReturnedNameVSLength": (48, "i"), "TypeString": (56, "8s")}


def get(layout: dict[str, tuple[int, str]], buf: bytes | bytearray, name: str):
    """Field ``name`` of structure bytes ``buf``; None where ``buf`` is too short for it."""
    offset, fmt = layout[name]
    if offset + struct.calcsize(fmt) > len(buf):
        return None
    return struct.unpack_from("<" + fmt, buf, offset)[0]


def put(layout: dict[str, tuple[int, str]], buf: bytearray, name: str, value) -> None:
    """Set field ``name`` of ``buf`` (strings blank-padded, as MQ pads MQCHAR fields; ignored
    where ``buf`` is short)."""
    offset, fmt = layout[name]
    if isinstance(value, bytes):
        value = value.ljust(struct.calcsize(fmt), b" ")
    if offset + struct.calcsize(fmt) <= len(buf):
        struct.pack_into("<" + fmt, buf, offset, value)


def text(value: bytes | None) -> str:
    """An MQCHAR field as text, blank and NUL padding removed."""
    return (value or b"").split(b"\0", 1)[0].decode("latin-1").rstrip(" ")
