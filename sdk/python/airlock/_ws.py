"""The client side of the WebSocket protocol (RFC 6455), sans-IO: the opening handshake's
request and its check, and a codec that turns messages into masked frames and received bytes
into messages. Both transports drive it with their own sockets."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from typing import List, Mapping, NamedTuple, Optional, Tuple

from ._errors import TransportError

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# Opcodes.
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

# Close codes.
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_INVALID_DATA = 1007
CLOSE_TOO_BIG = 1009

#: The largest message accepted by default (an exec's exit frame carries its captured output).
MAX_MESSAGE = 64 << 20


class Message(NamedTuple):
    """A whole received message: TEXT (payload decoded), BINARY, or CLOSE (``code`` and the
    reason in ``data``). Pings are answered by the codec and not returned; pongs are dropped."""

    opcode: int
    data: object  # str for TEXT and CLOSE, bytes for BINARY
    code: int = 0


class Handshake:
    """The opening handshake of one connection: :meth:`request` is what to send, :meth:`check`
    validates the server's 101 answer (``Sec-WebSocket-Accept`` must match the key)."""

    def __init__(self, key: Optional[str] = None) -> None:
        self.key = key or base64.b64encode(os.urandom(16)).decode()

    def request(self, host: str, target: str, headers: Mapping[str, str]) -> bytes:
        """The upgrade request (GET target with the key), with extra headers."""
        lines = [
            f"GET {target} HTTP/1.1",
            f"Host: {host}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {self.key}",
            "Sec-WebSocket-Version: 13",
        ]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def accept_value(self) -> str:
        """The Sec-WebSocket-Accept the server must answer for this key."""
        digest = hashlib.sha1((self.key + GUID).encode()).digest()
        return base64.b64encode(digest).decode()

    def check(self, headers: Mapping[str, str]) -> None:
        """Checks the headers (lowercase names) of a 101 answer; raises TransportError."""
        if headers.get("upgrade", "").lower() != "websocket":
            raise TransportError("websocket handshake: the answer does not upgrade to websocket")
        if "upgrade" not in headers.get("connection", "").lower():
            raise TransportError("websocket handshake: the answer's Connection is not Upgrade")
        if headers.get("sec-websocket-accept") != self.accept_value():
            raise TransportError("websocket handshake: Sec-WebSocket-Accept does not match the key")


def mask_payload(mask: bytes, data: bytes) -> bytes:
    """XORs data with the 4-byte mask repeated (RFC 6455 §5.3), at C speed through ints."""
    n = len(data)
    if n == 0:
        return b""
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


class Codec:
    """Frames of one client connection. :meth:`encode` masks what the client sends;
    :meth:`feed` parses what the server sent, reassembles fragmented messages, answers pings
    and a close (in :meth:`outgoing`), and enforces ``max_message``. A protocol violation by
    the server raises TransportError after queueing the close frame that says why."""

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self.max_message = max_message
        self._buf = bytearray()
        self._frag_op = 0  # opcode of the message being reassembled, 0 when none
        self._frags: List[bytes] = []
        self._frag_len = 0
        self._out: List[bytes] = []
        #: a close frame was sent (by close() or in answer to the server's).
        self.close_sent = False
        #: the server's close frame arrived.
        self.close_received = False

    # What the client sends.

    def encode(self, opcode: int, payload: bytes, fin: bool = True) -> bytes:
        """One masked frame."""
        n = len(payload)
        head = bytearray([(0x80 if fin else 0) | opcode])
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack("!H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack("!Q", n)
        mask = os.urandom(4)
        return bytes(head) + mask + mask_payload(mask, payload)

    def text(self, s: str) -> bytes:
        """A text message, one frame."""
        return self.encode(TEXT, s.encode("utf-8"))

    def binary(self, b: bytes) -> bytes:
        """A binary message, one frame."""
        return self.encode(BINARY, b)

    def ping(self, b: bytes = b"") -> bytes:
        """A ping (the server answers a pong, which the codec drops)."""
        return self.encode(PING, b)

    def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> bytes:
        """The close frame (once; b"" when one was sent already)."""
        if self.close_sent:
            return b""
        self.close_sent = True
        return self.encode(CLOSE, struct.pack("!H", code) + reason.encode("utf-8")[:123])

    def outgoing(self) -> bytes:
        """Frames the codec queued on its own (pongs, the answer to a close): send them."""
        out = b"".join(self._out)
        self._out.clear()
        return out

    # What the server sent.

    def feed(self, data: bytes) -> List[Message]:
        """Adds received bytes; returns the whole messages they completed."""
        self._buf += data
        out: List[Message] = []
        while not self.close_received:
            frame = self._next_frame()
            if frame is None:
                break
            msg = self._message(*frame)
            if msg is not None:
                out.append(msg)
        return out

    def _fail(self, code: int, why: str) -> TransportError:
        frame = self.close(code, why)
        if frame:
            self._out.append(frame)
        self.close_received = True  # nothing more is read
        return TransportError(f"websocket: {why}")

    def _next_frame(self) -> Optional[Tuple[bool, int, bytes]]:
        buf = self._buf
        if len(buf) < 2:
            return None
        b0, b1 = buf[0], buf[1]
        if b0 & 0x70:
            raise self._fail(CLOSE_PROTOCOL_ERROR, "reserved bits set (no extension was negotiated)")
        if b1 & 0x80:
            raise self._fail(CLOSE_PROTOCOL_ERROR, "the server masked a frame")
        n = b1 & 0x7F
        off = 2
        if n == 126:
            if len(buf) < 4:
                return None
            n = struct.unpack_from("!H", buf, 2)[0]
            off = 4
        elif n == 127:
            if len(buf) < 10:
                return None
            n = struct.unpack_from("!Q", buf, 2)[0]
            if n >> 63:
                raise self._fail(CLOSE_PROTOCOL_ERROR, "frame length has its top bit set")
            off = 10
        opcode = b0 & 0x0F
        if opcode >= CLOSE and (n > 125 or not b0 & 0x80):
            raise self._fail(CLOSE_PROTOCOL_ERROR, "control frame fragmented or longer than 125 bytes")
        if n > self.max_message:
            raise self._fail(CLOSE_TOO_BIG, f"message longer than {self.max_message} bytes")
        if len(buf) < off + n:
            return None
        payload = bytes(buf[off : off + n])
        del buf[: off + n]
        return bool(b0 & 0x80), opcode, payload

    def _message(self, fin: bool, opcode: int, payload: bytes) -> Optional[Message]:
        if opcode == PING:
            self._out.append(self.encode(PONG, payload))
            return None
        if opcode == PONG:
            return None
        if opcode == CLOSE:
            return self._closed(payload)
        if opcode in (TEXT, BINARY):
            if self._frag_op:
                raise self._fail(CLOSE_PROTOCOL_ERROR, "new message inside a fragmented one")
            if fin:
                return self._whole(opcode, payload)
            self._frag_op, self._frags, self._frag_len = opcode, [payload], len(payload)
            return None
        if opcode == CONT:
            if not self._frag_op:
                raise self._fail(CLOSE_PROTOCOL_ERROR, "continuation frame without a message")
            self._frag_len += len(payload)
            if self._frag_len > self.max_message:
                raise self._fail(CLOSE_TOO_BIG, f"message longer than {self.max_message} bytes")
            self._frags.append(payload)
            if not fin:
                return None
            op, data = self._frag_op, b"".join(self._frags)
            self._frag_op, self._frags, self._frag_len = 0, [], 0
            return self._whole(op, data)
        raise self._fail(CLOSE_PROTOCOL_ERROR, f"unknown opcode {opcode:#x}")

    def _whole(self, opcode: int, data: bytes) -> Message:
        if opcode == BINARY:
            return Message(BINARY, data)
        try:
            return Message(TEXT, data.decode("utf-8"))
        except UnicodeDecodeError:
            raise self._fail(CLOSE_INVALID_DATA, "text message is not UTF-8") from None

    def _closed(self, payload: bytes) -> Message:
        self.close_received = True
        code, reason = 1005, ""
        if len(payload) >= 2:
            code = struct.unpack_from("!H", payload)[0]
            reason = payload[2:].decode("utf-8", "replace")
        answer = self.close(code if code not in (1005, 1006) else CLOSE_NORMAL)
        if answer:
            self._out.append(answer)
        return Message(CLOSE, reason, code)
