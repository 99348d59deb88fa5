# SPDX-License-Identifier: Apache-2.0
"""The daemon-link protocol of common/proto.h and common/msg.h, for tests.

Both links (statd -> runnerd on runnerd.sock, runnerd -> brokerd on brokerd.sock) are
AF_UNIX SOCK_SEQPACKET: one message per packet, at most MSG_MAX bytes, an fd travels with
SCM_RIGHTS in the message it belongs to. Wire layout: u32 version, u32 type, then the
payload fields in order; integers in host byte order; a string is u32 length, the bytes and
a NUL (embedded NULs are refused).

    conn = Conn.connect(runtime_dir + "/runnerd.sock")   # acts as statd
    conn.hello(PROGRAM_STATD)                              # HELLO -> HELLO_OK
    conn.send(TURN_RUN, fd=ws_fd, turn_id=..., channel=..., ...)
    msg = conn.recv(timeout=30)                            # Msg(type, fields, fd)

    srv = Listener(runtime_dir + "/brokerd.sock")           # acts as brokerd
    peer = srv.accept(timeout=5); peer.expect_hello(PROGRAM_BROKERD)  # HELLO in, HELLO_OK out

pack()/unpack() are strict like the C side: unknown types, short fields, leftover bytes,
a missing or unexpected fd, an unterminated string or a version mismatch raise
ProtocolError, so a test can also send deliberately malformed packets with pack_raw().
"""
import os
import select
import socket
import struct
from dataclasses import dataclass, field
from typing import Optional

# common/proto.h is the authority; tests/unit/check-rtsproto.py (make check) compares
# everything from here to _INT with it, so a change there that is not made here fails.
PROTO_VERSION = 4  # 3: the METRICS messages (issue 15) and the precheck runner (DESIGN.md 8.3); 4: SPARE_DROP, SPARE_STATE and rich mode (DESIGN.md 8.5)
MSG_MAX = 128 * 1024

# The programs that say HELLO / HELLO_OK; a listening side accepts only the one its link is for.
PROGRAM_STATD = "roundtable-sandbox-statd"
PROGRAM_RUNNERD = "roundtable-sandbox-runnerd"
PROGRAM_BROKERD = "roundtable-sandbox-brokerd"
PROGRAM_NAME_MAX = 64
PATH_MAX = 4096

# enum rts_msg_type
HELLO = 2
HELLO_OK = 3
TURN_RUN = 10
TURN_DONE = 11
TURN_CANCEL = 12
SPARE_DROP = 14
SPARE_STATE = 15
RICH_SYNC = 24
RICH_SYNCED = 25
RICH_ENSURE = 26
RICH_STATE = 27
RICH_STOP = 28
RICH_TURN = 30
RICH_TURN_DONE = 31
ATTACH_FETCH = 32
ATTACH_DATA = 33
BROKER_BIND = 20
BROKER_BOUND = 21
BROKER_CLOSE = 22
BROKER_CLOSED = 23
RICH_BIND = 40
RICH_BOUND = 41
RICH_WAIT_READY = 42
RICH_READY = 43
RICH_UNBIND = 44
RICH_UNBOUND = 45
BROKER_RICH_TURN = 46
BROKER_RICH_DONE = 47
BROKER_RICH_CANCEL = 48
BROKER_ATTACH_FETCH = 50
BROKER_ATTACH_DATA = 51
METRICS = 70
METRICS_TEXT = 71
BROKER_METRICS = 72
BROKER_METRICS_TEXT = 73
# the precheck runner
PRECHECK_RUN = 60
PRECHECK_DONE = 61
PRECHECK_CANCEL = 62
PRECHECK_BIND = 64

# enum rts_turn_status
TURN_OK = 0
TURN_ERROR = 1
TURN_TIMEOUT = 2
TURN_CANCELLED = 3
TURN_CLEANUP_FAILED = 4
STATUS_NAMES = {TURN_OK: "ok", TURN_ERROR: "error", TURN_TIMEOUT: "timeout",
                TURN_CANCELLED: "cancelled", TURN_CLEANUP_FAILED: "cleanup_failed"}

# enum rts_precheck_answer (PRECHECK_DONE's answer)
PRECHECK_SLEEP = 0
PRECHECK_NOTE = 1
PRECHECK_CONTEXT = 2
PRECHECK_SCRIPT_ERROR = 3
PRECHECK_ANSWER_NAMES = {PRECHECK_SLEEP: "sleep", PRECHECK_NOTE: "note", PRECHECK_CONTEXT: "context",
                         PRECHECK_SCRIPT_ERROR: "script_error"}

# Limits shared by more than one program.
CHANNEL_MAX = 512
SPEAKER_FIELD_MAX = 256
TEXT_MAX = 64 * 1024
REPLY_MAX = 64 * 1024
WORKER_OUTPUT_MAX = 256 * 1024
TURN_ID_LEN = 16
HASH_HEX_LEN = 64
WARM_SPARES_CAP_MAX = 256  # common/limits.h RTS_WARM_SPARES_CAP_MAX: hashes in a SPARE_STATE
METRICS_TEXT_MAX = 32 * 1024
DUMMY_KEY = "roundtable-sandbox-dummy-key"
NAME_MAX = 48
ATTACH_URL_MAX = 8192
RICH_MIME_MAX = 127
# RICH_READY's capability bits
RICH_CAP_PRIVATE_TO = 1
RICH_CAP_READER_RECORDS = 2
# RICH_STATE's states and RICH_STOP's reasons
RICH_STATE_READY = 1
RICH_STATE_STOPPED = 2
RICH_STATE_FAILED = 3
RICH_STOP_OFF = 0
RICH_STOP_FRESH = 1
RICH_STOP_CHANGED = 2
TIME_ZONE_MAX = 64
PRECHECK_TARGET_MAX = 512
PRECHECK_SCRIPT_MAX = 64 * 1024
PRECHECK_SCHEDULE_MAX = 16 * 1024
PRECHECK_APPROVED_TEXT_MAX = 256 * (48 + 1 + 128 + 1)
PRECHECK_FIRED_AT_MAX = 64
PRECHECK_TODAY_LEN = 10
PRECHECK_CONTEXT_MAX = 16 * 1024

# Every message: (type, link, direction, carries an fd, fields in wire order as (name,
# kind, max)); kinds u8, u32, i32, u64, str (max: bytes without the NUL). link is the
# socket ("any" for HELLO and HELLO_OK); direction "to_listener" (requests, even) or
# "to_connector" (answers, odd).
MESSAGES = {
    "HELLO": (HELLO, "any", "to_listener", False, (("version", "u32", 0), ("program", "str", PROGRAM_NAME_MAX))),
    "HELLO_OK": (HELLO_OK, "any", "to_connector", False,
                 (("version", "u32", 0), ("program", "str", PROGRAM_NAME_MAX))),
    "TURN_RUN": (TURN_RUN, "runnerd.sock", "to_listener", True,
                 (("turn_id", "str", TURN_ID_LEN), ("channel", "str", CHANNEL_MAX),
                  ("channel_hash", "str", HASH_HEX_LEN), ("speaker_id", "str", SPEAKER_FIELD_MAX),
                  ("speaker_name", "str", SPEAKER_FIELD_MAX), ("principal_id", "str", SPEAKER_FIELD_MAX),
                  ("text", "str", TEXT_MAX), ("attachments", "u32", 0), ("start_fresh", "u8", 0),
                  ("workspace", "str", PATH_MAX))),
    "TURN_DONE": (TURN_DONE, "runnerd.sock", "to_connector", False,
                  (("turn_id", "str", TURN_ID_LEN), ("status", "u32", 0), ("reply", "str", REPLY_MAX))),
    "TURN_CANCEL": (TURN_CANCEL, "runnerd.sock", "to_listener", False, (("turn_id", "str", TURN_ID_LEN),)),
    "SPARE_DROP": (SPARE_DROP, "runnerd.sock", "to_listener", False, (("channel_hash", "str", HASH_HEX_LEN),)),
    "SPARE_STATE": (SPARE_STATE, "runnerd.sock", "to_connector", False,
                    (("ready", "str", WARM_SPARES_CAP_MAX * HASH_HEX_LEN),)),
    "RICH_SYNC": (RICH_SYNC, "runnerd.sock", "to_listener", False, (("channels", "u32", 0),)),
    "RICH_SYNCED": (RICH_SYNCED, "runnerd.sock", "to_connector", False, (("removed", "u32", 0),)),
    "RICH_ENSURE": (RICH_ENSURE, "runnerd.sock", "to_listener", True,
                    (("seq", "u32", 0), ("channel", "str", CHANNEL_MAX), ("channel_hash", "str", HASH_HEX_LEN),
                     ("profile", "str", NAME_MAX), ("workspace", "str", PATH_MAX))),
    "RICH_STATE": (RICH_STATE, "runnerd.sock", "to_connector", False,
                   (("seq", "u32", 0), ("channel_hash", "str", HASH_HEX_LEN), ("state", "u32", 0),
                    ("error", "i32", 0))),
    "RICH_STOP": (RICH_STOP, "runnerd.sock", "to_listener", False,
                  (("seq", "u32", 0), ("channel_hash", "str", HASH_HEX_LEN), ("reason", "u32", 0))),
    "RICH_TURN": (RICH_TURN, "runnerd.sock", "to_listener", True,
                  (("turn_id", "str", TURN_ID_LEN), ("channel", "str", CHANNEL_MAX),
                   ("channel_hash", "str", HASH_HEX_LEN), ("speaker_id", "str", SPEAKER_FIELD_MAX),
                   ("speaker_name", "str", SPEAKER_FIELD_MAX), ("principal_id", "str", SPEAKER_FIELD_MAX),
                   ("profile", "str", NAME_MAX))),
    "RICH_TURN_DONE": (RICH_TURN_DONE, "runnerd.sock", "to_connector", True,
                       (("turn_id", "str", TURN_ID_LEN), ("status", "u32", 0), ("calls", "u32", 0))),
    "ATTACH_FETCH": (ATTACH_FETCH, "runnerd.sock", "to_listener", False,
                     (("turn_id", "str", TURN_ID_LEN), ("index", "u32", 0), ("url", "str", ATTACH_URL_MAX),
                      ("max_bytes", "u64", 0))),
    "ATTACH_DATA": (ATTACH_DATA, "runnerd.sock", "to_connector", True,
                    (("turn_id", "str", TURN_ID_LEN), ("index", "u32", 0), ("result", "i32", 0),
                     ("mime", "str", RICH_MIME_MAX))),
    "BROKER_BIND": (BROKER_BIND, "brokerd.sock", "to_listener", True,
                    (("turn_id", "str", TURN_ID_LEN), ("channel", "str", CHANNEL_MAX),
                     ("channel_hash", "str", HASH_HEX_LEN), ("speaker_id", "str", SPEAKER_FIELD_MAX),
                     ("speaker_name", "str", SPEAKER_FIELD_MAX), ("principal_id", "str", SPEAKER_FIELD_MAX),
                     ("deadline_ms", "u64", 0))),
    "BROKER_BOUND": (BROKER_BOUND, "brokerd.sock", "to_connector", False,
                     (("turn_id", "str", TURN_ID_LEN), ("result", "i32", 0))),
    "BROKER_CLOSE": (BROKER_CLOSE, "brokerd.sock", "to_listener", False, (("turn_id", "str", TURN_ID_LEN),)),
    "BROKER_CLOSED": (BROKER_CLOSED, "brokerd.sock", "to_connector", False,
                      (("turn_id", "str", TURN_ID_LEN), ("calls", "u32", 0))),
    "RICH_BIND": (RICH_BIND, "brokerd.sock", "to_listener", True,
                  (("channel", "str", CHANNEL_MAX), ("channel_hash", "str", HASH_HEX_LEN),
                   ("profile", "str", NAME_MAX))),
    "RICH_BOUND": (RICH_BOUND, "brokerd.sock", "to_connector", False,
                   (("channel_hash", "str", HASH_HEX_LEN), ("result", "i32", 0))),
    "RICH_WAIT_READY": (RICH_WAIT_READY, "brokerd.sock", "to_listener", False,
                        (("channel_hash", "str", HASH_HEX_LEN), ("deadline_ms", "u64", 0))),
    "RICH_READY": (RICH_READY, "brokerd.sock", "to_connector", False,
                   (("channel_hash", "str", HASH_HEX_LEN), ("result", "i32", 0), ("capabilities", "u8", 0),
                    ("private_history", "u8", 0))),
    "RICH_UNBIND": (RICH_UNBIND, "brokerd.sock", "to_listener", False, (("channel_hash", "str", HASH_HEX_LEN),)),
    "RICH_UNBOUND": (RICH_UNBOUND, "brokerd.sock", "to_connector", False,
                     (("channel_hash", "str", HASH_HEX_LEN),)),
    "BROKER_RICH_TURN": (BROKER_RICH_TURN, "brokerd.sock", "to_listener", True,
                         (("turn_id", "str", TURN_ID_LEN), ("channel", "str", CHANNEL_MAX),
                          ("channel_hash", "str", HASH_HEX_LEN), ("speaker_id", "str", SPEAKER_FIELD_MAX),
                          ("speaker_name", "str", SPEAKER_FIELD_MAX), ("principal_id", "str", SPEAKER_FIELD_MAX),
                          ("profile", "str", NAME_MAX), ("deadline_ms", "u64", 0))),
    "BROKER_RICH_DONE": (BROKER_RICH_DONE, "brokerd.sock", "to_connector", True,
                         (("turn_id", "str", TURN_ID_LEN), ("status", "u32", 0), ("calls", "u32", 0))),
    "BROKER_RICH_CANCEL": (BROKER_RICH_CANCEL, "brokerd.sock", "to_listener", False,
                           (("turn_id", "str", TURN_ID_LEN),)),
    "BROKER_ATTACH_FETCH": (BROKER_ATTACH_FETCH, "brokerd.sock", "to_listener", False,
                            (("turn_id", "str", TURN_ID_LEN), ("index", "u32", 0), ("url", "str", ATTACH_URL_MAX),
                             ("max_bytes", "u64", 0))),
    "BROKER_ATTACH_DATA": (BROKER_ATTACH_DATA, "brokerd.sock", "to_connector", True,
                           (("turn_id", "str", TURN_ID_LEN), ("index", "u32", 0), ("result", "i32", 0),
                            ("mime", "str", RICH_MIME_MAX))),
    # metrics (issue 15)
    "METRICS": (METRICS, "runnerd.sock", "to_listener", False, (("seq", "u32", 0),)),
    "METRICS_TEXT": (METRICS_TEXT, "runnerd.sock", "to_connector", False,
                     (("seq", "u32", 0), ("brokerd_link", "u8", 0), ("brokerd_up", "u8", 0),
                      ("runnerd", "str", METRICS_TEXT_MAX), ("brokerd", "str", METRICS_TEXT_MAX))),
    "BROKER_METRICS": (BROKER_METRICS, "brokerd.sock", "to_listener", False, (("seq", "u32", 0),)),
    "BROKER_METRICS_TEXT": (BROKER_METRICS_TEXT, "brokerd.sock", "to_connector", False,
                            (("seq", "u32", 0), ("text", "str", METRICS_TEXT_MAX))),
    # the precheck runner (DESIGN.md 8.3)
    "PRECHECK_RUN": (PRECHECK_RUN, "runnerd.sock", "to_listener", False,
                     (("precheck_id", "str", TURN_ID_LEN), ("channel", "str", CHANNEL_MAX),
                      ("channel_hash", "str", HASH_HEX_LEN), ("target", "str", PRECHECK_TARGET_MAX),
                      ("tier", "str", SPEAKER_FIELD_MAX), ("script", "str", PRECHECK_SCRIPT_MAX),
                      ("approved", "str", PRECHECK_APPROVED_TEXT_MAX), ("fired_at", "str", PRECHECK_FIRED_AT_MAX),
                      ("time_zone", "str", TIME_ZONE_MAX), ("today", "str", PRECHECK_TODAY_LEN),
                      ("schedule", "str", PRECHECK_SCHEDULE_MAX))),
    "PRECHECK_DONE": (PRECHECK_DONE, "runnerd.sock", "to_connector", False,
                      (("precheck_id", "str", TURN_ID_LEN), ("status", "u32", 0), ("answer", "u32", 0),
                       ("text", "str", PRECHECK_CONTEXT_MAX))),
    "PRECHECK_CANCEL": (PRECHECK_CANCEL, "runnerd.sock", "to_listener", False,
                        (("precheck_id", "str", TURN_ID_LEN),)),
    "PRECHECK_BIND": (PRECHECK_BIND, "brokerd.sock", "to_listener", True,
                      (("precheck_id", "str", TURN_ID_LEN), ("channel", "str", CHANNEL_MAX),
                       ("channel_hash", "str", HASH_HEX_LEN), ("target", "str", PRECHECK_TARGET_MAX),
                       ("tier", "str", SPEAKER_FIELD_MAX), ("approved", "str", PRECHECK_APPROVED_TEXT_MAX),
                       ("deadline_ms", "u64", 0))),
}

# Field kinds: u8, u32, i32, u64, str. FD marks a message that carries exactly one fd.
FD = object()

# Derived views: each type's payload in wire order (FD last when it carries one), and names.
SCHEMAS = {t: tuple(fields) + ((FD,) if fd else ()) for t, _, _, fd, fields in MESSAGES.values()}
NAMES = {v[0]: k for k, v in MESSAGES.items()}

_INT = {"u8": "=B", "u32": "=I", "i32": "=i", "u64": "=Q"}


class ProtocolError(Exception):
    """A packet that the C side would refuse (or did not expect)."""


@dataclass
class Msg:
    type: int
    fields: dict = field(default_factory=dict)
    fd: Optional[int] = None  # owned by the receiver: close it (Msg.close()) when done

    def __getitem__(self, key):
        return self.fields[key]

    @property
    def name(self):
        return NAMES.get(self.type, str(self.type))

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def carries_fd(mtype):
    return FD in SCHEMAS[mtype]


def _to_bytes(v):
    if isinstance(v, bytes):
        return v
    return str(v).encode("utf-8", "surrogateescape")


def pack_raw(mtype, fields, version=PROTO_VERSION):
    """Encode fields ((kind, value) pairs) under any type number, for malformed-input tests."""
    out = [struct.pack("=II", version, mtype)]
    for kind, value in fields:
        if kind == "str":
            b = _to_bytes(value)
            out.append(struct.pack("=I", len(b)) + b + b"\0")
        else:
            out.append(struct.pack(_INT[kind], value))
    return b"".join(out)


def pack(mtype, **values):
    """Encode one message of a known type; every field of its schema must be given."""
    if mtype not in SCHEMAS:
        raise ProtocolError(f"unknown message type {mtype}")
    fields = []
    for f in SCHEMAS[mtype]:
        if f is FD:
            continue
        name, kind, _ = f
        if name not in values:
            raise ProtocolError(f"{NAMES[mtype]}: missing field {name}")
        fields.append((kind, values.pop(name)))
    if values:
        raise ProtocolError(f"{NAMES[mtype]}: unknown fields {sorted(values)}")
    data = pack_raw(mtype, fields)
    if len(data) > MSG_MAX:
        raise ProtocolError(f"{NAMES[mtype]}: {len(data)} bytes exceed MSG_MAX")
    return data


def unpack(data, fd=None):
    """Decode one packet strictly. Returns Msg; strings are str (surrogateescape)."""
    if len(data) < 8:
        raise ProtocolError("short header")
    version, mtype = struct.unpack_from("=II", data, 0)
    if version != PROTO_VERSION:
        raise ProtocolError(f"version {version}, expected {PROTO_VERSION}")
    if mtype not in SCHEMAS:
        raise ProtocolError(f"unknown message type {mtype}")
    pos = 8
    out = {}
    for f in SCHEMAS[mtype]:
        if f is FD:
            if fd is None:
                raise ProtocolError(f"{NAMES[mtype]} without its fd")
            continue
        name, kind, limit = f
        if kind == "str":
            if pos + 4 > len(data):
                raise ProtocolError(f"{NAMES[mtype]}.{name}: short length")
            (n,) = struct.unpack_from("=I", data, pos)
            pos += 4
            if n > limit or pos + n + 1 > len(data) or data[pos + n] != 0 or b"\0" in data[pos:pos + n]:
                raise ProtocolError(f"{NAMES[mtype]}.{name}: bad string")
            out[name] = data[pos:pos + n].decode("utf-8", "surrogateescape")
            pos += n + 1
        else:
            size = struct.calcsize(_INT[kind])
            if pos + size > len(data):
                raise ProtocolError(f"{NAMES[mtype]}.{name}: short field")
            (out[name],) = struct.unpack_from(_INT[kind], data, pos)
            pos += size
    if pos != len(data):
        raise ProtocolError(f"{NAMES[mtype]}: {len(data) - pos} bytes left over")
    if fd is not None and not carries_fd(mtype):
        raise ProtocolError(f"{NAMES[mtype]} with an unexpected fd")
    return Msg(mtype, out, fd)


class Conn:
    """One connected SOCK_SEQPACKET link."""

    def __init__(self, sock):
        self.sock = sock

    @classmethod
    def connect(cls, path, timeout=5.0):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(timeout)
        s.connect(path)
        s.settimeout(None)
        return cls(s)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fileno(self):
        return self.sock.fileno()

    def send_raw(self, data, fd=None):
        if fd is None:
            self.sock.sendmsg([data])
        else:
            socket.send_fds(self.sock, [data], [fd])

    def send(self, mtype, fd=None, **values):
        if carries_fd(mtype) != (fd is not None):
            raise ProtocolError(f"{NAMES[mtype]}: fd {'required' if carries_fd(mtype) else 'not allowed'}")
        self.send_raw(pack(mtype, **values), fd)

    def recv(self, timeout=10.0):
        """The next message; None when the peer closed; TimeoutError after timeout s."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            raise TimeoutError("no message within %.1f s" % timeout)
        data, fds, flags, _ = socket.recv_fds(self.sock, MSG_MAX, 4)
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for f in fds:
                os.close(f)
            raise ProtocolError("truncated packet")
        if not data and not fds:
            return None
        if len(fds) > 1:
            for f in fds:
                os.close(f)
            raise ProtocolError("more than one fd")
        return unpack(data, fds[0] if fds else None)

    def expect(self, mtype, timeout=10.0):
        m = self.recv(timeout)
        if m is None:
            raise ProtocolError(f"peer closed while waiting for {NAMES[mtype]}")
        if m.type != mtype:
            m.close()
            raise ProtocolError(f"got {m.name}, expected {NAMES[mtype]}")
        return m

    def closed_by_peer(self, timeout=5.0):
        """True when the peer closes the link within timeout (messages before that are
        discarded)."""
        try:
            while True:
                m = self.recv(timeout)
                if m is None:
                    return True
                m.close()
        except (TimeoutError, ProtocolError):
            return False
        except OSError:
            return True

    # The connecting side of either link: program is the one the listener expects there
    # (PROGRAM_STATD on runnerd.sock, PROGRAM_RUNNERD on brokerd.sock).
    def hello(self, program, timeout=5.0):
        self.send(HELLO, version=PROTO_VERSION, program=program)
        return self.expect(HELLO_OK, timeout)

    # The listening side of either link: program is the one the connecting side expects.
    def expect_hello(self, program, timeout=5.0):
        m = self.expect(HELLO, timeout)
        if m["version"] != PROTO_VERSION:
            raise ProtocolError(f"peer speaks version {m['version']}")
        self.send(HELLO_OK, version=PROTO_VERSION, program=program)
        return m


class Listener:
    """A SOCK_SEQPACKET listening socket at path (0600), e.g. a fake brokerd."""

    def __init__(self, path, mode=0o600):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        old = os.umask(0o777)
        try:
            self.sock.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, mode)
        self.sock.listen(16)

    def accept(self, timeout=5.0):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            raise TimeoutError("nobody connected to %s within %.1f s" % (self.path, timeout))
        s, _ = self.sock.accept()
        return Conn(s)

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def channel_hash(channel):
    """rts_channel_hash: hex sha256 of the channel key's bytes."""
    import hashlib
    return hashlib.sha256(_to_bytes(channel)).hexdigest()


def turn_run_fields(turn_id, channel, workspace_root, speaker_id="1234", speaker_name="Alice",
                    principal_id="principal-1234", text="hello", attachments=0, start_fresh=0):
    """A consistent TURN_RUN payload (the workspace is workspace_root/<channel hash>)."""
    h = channel_hash(channel)
    return dict(turn_id=turn_id, channel=channel, channel_hash=h, speaker_id=speaker_id,
                speaker_name=speaker_name, principal_id=principal_id, text=text,
                attachments=attachments, start_fresh=start_fresh,
                workspace=os.path.join(workspace_root, h))


def open_workspace(path):
    """The O_PATH|O_DIRECTORY fd statd passes with TURN_RUN."""
    return os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def _selftest():
    for mtype, schema in SCHEMAS.items():
        values = {}
        for f in schema:
            if f is FD:
                continue
            name, kind, _ = f
            values[name] = "0123456789abcdef" if kind == "str" else 7
        data = pack(mtype, **values)
        m = unpack(data, 0 if carries_fd(mtype) else None)
        assert m.fields == values, (mtype, m.fields)
        for cut in range(8, len(data)):
            try:
                unpack(data[:cut], 0 if carries_fd(mtype) else None)
            except ProtocolError:
                continue
            raise AssertionError(f"{NAMES[mtype]} cut at {cut} accepted")
        try:
            unpack(data + b"x", 0 if carries_fd(mtype) else None)
            raise AssertionError("leftover byte accepted")
        except ProtocolError:
            pass
    print("rtsproto: self-test ok")


if __name__ == "__main__":
    _selftest()
