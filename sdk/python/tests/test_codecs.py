"""The sans-IO codecs, without a daemon: server-sent events, the WebSocket protocol (RFC
6455), the HTTP/1.1 head, the interactive exec frames."""

from __future__ import annotations

import base64
import json
import os
import struct
import unittest
from typing import List

import harness  # noqa: F401 (puts the SDK on sys.path)

import airlock
from airlock._exec import ExecProtocol
from airlock._http11 import body_length, parse_head, request_head
from airlock._sse import SSEParser
from airlock._ws import BINARY, CLOSE, PING, PONG, TEXT, Codec, Handshake, mask_payload


def server_frame(opcode: int, payload: bytes, fin: bool = True, rsv: int = 0, masked: bool = False) -> bytes:
    """A frame as a server sends it (unmasked unless told otherwise)."""
    n = len(payload)
    head = bytearray([(0x80 if fin else 0) | rsv | opcode])
    m = 0x80 if masked else 0
    if n < 126:
        head.append(m | n)
    elif n < 1 << 16:
        head.append(m | 126)
        head += struct.pack("!H", n)
    else:
        head.append(m | 127)
        head += struct.pack("!Q", n)
    if masked:
        key = b"\x01\x02\x03\x04"
        return bytes(head) + key + mask_payload(key, payload)
    return bytes(head) + payload


def client_frame(frame: bytes) -> tuple:
    """(fin, opcode, payload) of a frame the client sent: it must be masked."""
    b0, b1 = frame[0], frame[1]
    assert b1 & 0x80, "client frames are masked"
    n, off = b1 & 0x7F, 2
    if n == 126:
        n, off = struct.unpack_from("!H", frame, 2)[0], 4
    elif n == 127:
        n, off = struct.unpack_from("!Q", frame, 2)[0], 10
    key = frame[off : off + 4]
    assert len(frame) == off + 4 + n
    return bool(b0 & 0x80), b0 & 0x0F, mask_payload(key, frame[off + 4 :])


class SSE(unittest.TestCase):
    STREAM = (b": airlock logs of sbx_1\n\n"
              b"id: 1\nevent: log\ndata: {\"a\":1}\n\n"
              b"data: line one\r\ndata: line two\r\n\r\n"
              b": keep-alive\n\n"
              b"id: 3\revent: end\rdata: {}\r\r"
              b"retry: 100\nunknown: x\nevent: cut")

    def want(self) -> List[tuple]:
        return [("log", '{"a":1}', "1"), ("message", "line one\nline two", "1"), ("end", "{}", "3")]

    def test_whole(self) -> None:
        p = SSEParser()
        self.assertEqual([tuple(e) for e in p.feed(self.STREAM)], self.want())
        self.assertEqual(p.last_id, "3")

    def test_split_at_every_byte(self) -> None:
        # Every split point, \r\n across chunks included, gives the same events.
        for i in range(len(self.STREAM) + 1):
            p = SSEParser()
            got = p.feed(self.STREAM[:i]) + p.feed(self.STREAM[i:])
            self.assertEqual([tuple(e) for e in got], self.want(), i)
        p = SSEParser()
        got = [e for b in self.STREAM for e in p.feed(bytes([b]))]
        self.assertEqual([tuple(e) for e in got], self.want())

    def test_limits(self) -> None:
        p = SSEParser(max_line=10)
        with self.assertRaises(ValueError):
            p.feed(b"data: " + b"x" * 20)
        self.assertEqual(SSEParser().feed("data: é\n\n".encode()), [("message", "é", "")])


class WebSocket(unittest.TestCase):
    def test_handshake(self) -> None:
        hs = Handshake("dGhlIHNhbXBsZSBub25jZQ==")  # RFC 6455 §1.3's example
        self.assertEqual(hs.accept_value(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        req = hs.request("h:1", "/x", {"Authorization": "Bearer k"}).decode()
        self.assertTrue(req.startswith("GET /x HTTP/1.1\r\nHost: h:1\r\n"))
        for h in ("Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                  "Sec-WebSocket-Version: 13", "Authorization: Bearer k"):
            self.assertIn(h + "\r\n", req)
        self.assertTrue(req.endswith("\r\n\r\n"))
        ok = {"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-accept": hs.accept_value()}
        hs.check(ok)
        with self.assertRaises(airlock.TransportError):
            hs.check(dict(ok, **{"sec-websocket-accept": "wrong"}))
        with self.assertRaises(airlock.TransportError):
            hs.check(dict(ok, upgrade="h2c"))
        self.assertNotEqual(Handshake().key, Handshake().key)

    def test_client_frames_are_masked_at_every_length(self) -> None:
        c = Codec()
        for n in (0, 1, 125, 126, 65535, 65536, 70000):
            payload = os.urandom(n)
            fin, op, got = client_frame(c.encode(BINARY, payload))
            self.assertEqual((fin, op, got), (True, BINARY, payload), n)
        self.assertEqual(client_frame(c.text("héllo"))[1:], (TEXT, "héllo".encode()))

    def test_messages_fragmented_and_interleaved_with_control(self) -> None:
        c = Codec()
        data = (server_frame(TEXT, b"hel", fin=False) + server_frame(PING, b"p")
                + server_frame(0, b"lo", fin=False) + server_frame(0, b" world")
                + server_frame(BINARY, bytes(70000)) + server_frame(PONG, b""))
        got = []
        for i in range(0, len(data), 7):  # any split of the bytes
            got += c.feed(data[i : i + 7])
        self.assertEqual([(m.opcode, m.data) for m in got], [(TEXT, "hello world"), (BINARY, bytes(70000))])
        self.assertEqual(client_frame(c.outgoing())[:2], (True, PONG))  # the ping answered
        self.assertEqual(c.outgoing(), b"")

    def test_close(self) -> None:
        c = Codec()
        (msg,) = c.feed(server_frame(CLOSE, struct.pack("!H", 1000) + b"bye") + server_frame(TEXT, b"late"))
        self.assertEqual((msg.opcode, msg.code, msg.data), (CLOSE, 1000, "bye"))
        _, op, payload = client_frame(c.outgoing())
        self.assertEqual((op, payload[:2]), (CLOSE, struct.pack("!H", 1000)))  # echoed once
        self.assertEqual(c.close(), b"")
        self.assertTrue(c.close_received and c.close_sent)

    def test_protocol_errors(self) -> None:
        cases = {
            "masked": server_frame(TEXT, b"x", masked=True),
            "reserved bits": server_frame(TEXT, b"x", rsv=0x40),
            "long control": server_frame(PING, b"x" * 126),
            "fragmented control": server_frame(PING, b"x", fin=False),
            "bad utf-8": server_frame(TEXT, b"\xff\xfe"),
            "continuation alone": server_frame(0, b"x"),
            "opcode": server_frame(0x3, b"x"),
            "too big": server_frame(BINARY, bytes(2000)),
            "too big in pieces": server_frame(BINARY, bytes(600), fin=False) + server_frame(0, bytes(600)),
            "top bit of a 64-bit length": b"\x82\x7f" + struct.pack("!Q", 1 << 63),
        }
        for name, data in cases.items():
            c = Codec(max_message=1000)
            with self.assertRaises(airlock.TransportError, msg=name):
                c.feed(data)
            self.assertEqual(client_frame(c.outgoing())[1], CLOSE, name)

    def test_64_bit_length(self) -> None:
        c = Codec()
        payload = os.urandom(1 << 16)
        frame = server_frame(BINARY, payload)
        self.assertEqual(frame[1], 127)
        self.assertEqual(c.feed(frame[:5]), [])
        self.assertEqual(c.feed(frame[5:])[0].data, payload)


class HTTP(unittest.TestCase):
    def test_heads(self) -> None:
        self.assertEqual(request_head("GET", "/x?a=b", "h:1", {"A": "1"}),
                         b"GET /x?a=b HTTP/1.1\r\nHost: h:1\r\nA: 1\r\n\r\n")
        status, headers = parse_head(b"HTTP/1.1 404 Not Found\r\nContent-Type: x\r\nVary: a\r\nvary: b\r\n\r\n")
        self.assertEqual((status, headers), (404, {"content-type": "x", "vary": "a, b"}))
        for bad in (b"SSH-2.0\r\n", b"HTTP/1.1 abc\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n"):
            with self.assertRaises(airlock.TransportError):
                parse_head(bad)

    def test_body_length(self) -> None:
        import io
        import tempfile

        self.assertEqual(body_length(b"abc"), 3)
        self.assertEqual(body_length(memoryview(b"abcd")), 4)
        self.assertIsNone(body_length(iter([b"a"])))
        bio = io.BytesIO(b"0123456789")
        bio.seek(4)
        self.assertEqual(body_length(bio), 6)
        with tempfile.TemporaryFile() as f:
            f.write(b"x" * 100)
            f.seek(30)
            self.assertEqual(body_length(f), 70)


class ExecFrames(unittest.TestCase):
    def frames(self, data: bytes) -> List[dict]:
        out = []
        while data:
            n = data[1] & 0x7F
            off = 2 + {126: 2, 127: 8}.get(n, 0)
            size = n if n < 126 else struct.unpack_from("!H" if n == 126 else "!Q", data, 2)[0]
            payload = client_frame(data[: off + 4 + size])[2]
            out.append(json.loads(payload))
            data = data[off + 4 + size :]
        return out

    def test_client_frames(self) -> None:
        p = ExecProtocol({"command": ["sh"], "tty": True, "rows": 24, "cols": 80})
        self.assertEqual(self.frames(p.start()), [{"type": "start", "start": {"command": ["sh"], "tty": True, "rows": 24, "cols": 80}}])
        stdin = self.frames(p.stdin(b"x" * 40000))
        self.assertEqual([f["type"] for f in stdin], ["stdin", "stdin"])
        self.assertEqual(b"".join(base64.b64decode(f["data"]) for f in stdin), b"x" * 40000)
        self.assertEqual(self.frames(p.resize(40, 120)), [{"type": "resize", "rows": 40, "cols": 120}])
        self.assertEqual(self.frames(p.signal(2)), [{"type": "signal", "signal": 2}])
        self.assertEqual(self.frames(p.eof()), [{"type": "eof"}])

    def test_daemon_frames(self) -> None:
        p = ExecProtocol({"command": "x"})

        def text(obj: dict) -> bytes:
            return server_frame(TEXT, json.dumps(obj).encode())

        out = p.feed(text({"type": "started", "executionId": "exec_1"})
                     + text({"type": "stdout", "data": base64.b64encode(b"out").decode()})
                     + text({"type": "stderr", "data": base64.b64encode(b"err").decode()})
                     + text({"type": "future-frame"}))
        self.assertEqual(out, [("stdout", b"out"), ("stderr", b"err")])
        self.assertEqual((p.execution_id, p.done), ("exec_1", False))
        with self.assertRaises(airlock.TransportError):
            ExecProtocol({}).feed(server_frame(CLOSE, struct.pack("!H", 1000)))
        p.feed(text({"type": "exit", "executionId": "exec_1", "result": {"executionId": "exec_1", "exitCode": 3,
                                                                           "stdout": "", "stderr": ""}}))
        self.assertEqual((p.done, p.result.exit_code), (True, 3))

        q = ExecProtocol({})
        with self.assertRaises(airlock.ConflictError) as cm:
            q.feed(text({"type": "error", "error": {"code": "conflict", "message": "paused", "status": "paused"}}))
        self.assertEqual((cm.exception.status, cm.exception.sandbox_status), (409, "paused"))
        with self.assertRaises(airlock.TransportError):
            ExecProtocol({}).eof_received()
