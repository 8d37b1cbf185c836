"""Both transports against a scripted server (no daemon): kept-alive connections, reconnecting
when the server closed one, bodies streamed chunked, errors, and followed streams resumed
without duplicates. Each scenario is written once, as a coroutine, and run with an
AsyncClient and with a Client (through an adapter that makes its results awaitable)."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import ssl
import subprocess
import tempfile
import unittest
from typing import Any, Awaitable, Callable, Iterator
from unittest import mock

import harness  # noqa: F401 (puts the SDK on sys.path)
from fakeserver import Answer, FakeServer, Request, envelope

import airlock
from airlock._ops import Resource

SANDBOX = '{"id":"sbx_1","status":"ready","createdAt":"t","updatedAt":"t","expiresAt":"t","resources":{},"network":{},"filesystem":{},"timeout":{},"endpoints":{}}'


class _Done:
    """An awaitable of a value computed already."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Any:
        return self.value
        yield  # a generator: awaiting it returns at once


class _AsyncIter:
    def __init__(self, it: Iterator[Any]) -> None:
        self.it = it

    def __aiter__(self) -> "_AsyncIter":
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self.it)
        except StopIteration:
            raise StopAsyncIteration from None


class SyncAsAsync:
    """A Client seen through the AsyncClient's interface."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._obj, name)
        if isinstance(value, Resource) and value is not self._obj:
            return SyncAsAsync(value)
        if not callable(value):
            return value

        def method(*args: Any, **kwargs: Any) -> Any:
            try:
                result = value(*args, **kwargs)
            except Exception as e:  # raised when awaited, as the AsyncClient's are
                return _Raise(e)
            return _AsyncIter(result) if isinstance(result, Iterator) else _Done(result)

        return method


class _Raise:
    def __init__(self, e: Exception) -> None:
        self.e = e

    def __await__(self) -> Any:
        raise self.e
        yield


Scenario = Callable[[Any, FakeServer], Awaitable[None]]


def both(handler: Callable[[Request], Answer], url_suffix: str = "") -> Callable[[Scenario], Callable[[unittest.TestCase], None]]:
    """Runs a scenario once per client kind, each against a fresh server."""

    def wrap(scenario: Scenario) -> Callable[[unittest.TestCase], None]:
        def test(self: unittest.TestCase) -> None:
            for kind in ("sync", "async"):
                with self.subTest(kind), FakeServer(handler) as srv:
                    asyncio.run(_run(kind, srv, scenario, url_suffix))

        test.__name__ = scenario.__name__
        test.__doc__ = scenario.__doc__
        return test

    return wrap


async def _run(kind: str, srv: FakeServer, scenario: Scenario, suffix: str) -> None:
    if kind == "sync":
        with airlock.Client("alk_test", srv.url + suffix) as c:
            await scenario(SyncAsAsync(c), srv)
    else:
        async with airlock.AsyncClient("alk_test", srv.url + suffix) as ac:
            await scenario(ac, srv)


async def _raises(aw: Awaitable[Any], cls: type) -> Any:
    """The exception of class cls that awaiting aw raised (AssertionError when none did)."""
    try:
        await aw
    except cls as e:
        return e
    raise AssertionError(f"no {cls.__name__} raised")


def _sandbox(req: Request) -> Answer:
    return envelope(SANDBOX)


def _closing(req: Request) -> Answer:
    return Answer(200, {"Content-Type": "application/json"}, envelope(SANDBOX).body, close=True)


def _dropping_second(req: Request) -> Answer:
    if req.index == 1:
        return Answer(drop=True)  # closed while the request was on its way
    return envelope(SANDBOX)


def _echo_body(req: Request) -> Answer:
    te = req.headers.get("transfer-encoding", "")
    cl = req.headers.get("content-length", "")
    return envelope('{"name":"%s","path":"%s","type":"file","size":%d,"mode":"0644","modTime":"t"}' % (te, cl, len(req.body)))


def _errors(req: Request) -> Answer:
    if "bad-gateway" in req.target:
        return Answer(502, {"Content-Type": "text/html"}, b"<html>upstream down</html>")
    if "busy" in req.target:
        return Answer(429, {"Retry-After": "3"}, b'{"ok":false,"error":{"code":"quota_exceeded","message":"slow down"}}')
    if req.target.startswith("/api/v1/pools"):
        return Answer(501, {}, b'{"ok":false,"error":{"code":"not_implemented","message":"the front API serves no pools"}}')
    if req.target.startswith("/api/sandbox/"):
        return Answer(409, {}, b'{"error":{"code":"conflict","message":"ended","status":"destroyed"}}')
    return Answer(400, {}, b'{"ok":false,"error":{"code":"invalid_argument","message":"resources.memoryMb: too big","field":"resources.memoryMb"}}')


def _entry(seq: int) -> bytes:
    return (b'id: %d\nevent: log\ndata: {"seq":%d,"time":"t","stream":"stdout","timestamp":"t","message":"m%d"}\n\n'
            % (seq, seq, seq))


def _dropping_logs(req: Request) -> Answer:
    sse = {"Content-Type": "text/event-stream"}
    if req.conn == 0:
        return Answer(200, sse, [b": airlock logs\n\n", _entry(1) + _entry(2)[:20], _entry(2)[20:]], drop=True)
    return Answer(200, sse, [_entry(2), _entry(3), b"event: end\ndata: {}\n\n"])


def _dropping_events(req: Request) -> Answer:
    sse = {"Content-Type": "text/event-stream"}
    ev = b'id: %d\nevent: event\ndata: {"id":"evt_%d","seq":%d,"type":"exec.exited","time":"t","sandboxId":"sbx_1"}\n\n'
    if req.conn == 0:
        return Answer(200, sse, [ev % (5, 5, 5)], drop=True)
    return Answer(200, sse, [ev % (5, 5, 5), ev % (6, 6, 6), b"event: end\ndata: {}\n\n"])


def _always_dropping(req: Request) -> Answer:
    return Answer(200, {"Content-Type": "text/event-stream"}, [b": nothing\n\n"], drop=True)


class Transport(unittest.TestCase):
    @both(_sandbox)
    async def test_one_connection_kept_alive(c: Any, srv: FakeServer) -> None:
        for _ in range(3):
            assert (await c.sandboxes.get("sbx_1")).id == "sbx_1"
        assert srv.connections == 1, srv.connections
        req = srv.requests[0]
        assert (req.method, req.target) == ("GET", "/api/v1/sandboxes/sbx_1")
        assert req.headers["authorization"] == "Bearer alk_test"
        assert req.headers["user-agent"].startswith("airlock-python/")

    @both(_closing)
    async def test_reconnects_after_the_server_closed(c: Any, srv: FakeServer) -> None:
        for _ in range(3):
            assert (await c.sandboxes.get("sbx_1")).status == "ready"
        assert srv.connections == 3, srv.connections

    @both(_dropping_second)
    async def test_resends_a_request_the_closing_server_never_answered(c: Any, srv: FakeServer) -> None:
        await c.sandboxes.get("sbx_1")
        sb = await c.sandboxes.update_network("sbx_1", egress_policy="restricted")  # a PUT with a body
        assert sb.id == "sbx_1"
        assert [(r.conn, r.index) for r in srv.requests] == [(0, 0), (0, 1), (1, 0)]
        assert srv.requests[1].body == srv.requests[2].body == b'{"egressPolicy":"restricted"}'

    @both(_dropping_second)
    async def test_a_post_sent_whole_is_not_resent(c: Any, srv: FakeServer) -> None:
        await c.sandboxes.get("sbx_1")
        e = await _raises(c.sandboxes.exec("sbx_1", ["true"]), OSError)  # the daemon may have run it
        assert not isinstance(e, airlock.AirlockError)
        assert [(r.method, r.conn) for r in srv.requests] == [("GET", 0), ("POST", 0)], "a POST is not sent twice"

    @both(_dropping_second)
    async def test_a_body_that_cannot_be_replayed_is_not_resent(c: Any, srv: FakeServer) -> None:
        await c.sandboxes.get("sbx_1")
        e = await _raises(c.files.write("sbx_1", "f", iter([b"once"])), OSError)
        assert not isinstance(e, airlock.AirlockError)
        assert len(srv.requests) == 2, "an iterator body is not sent twice"

    @both(_echo_body)
    async def test_bodies_streamed(c: Any, srv: FakeServer) -> None:
        info = await c.files.write("sbx_1", "f", iter([b"a" * 100000, b"b"]))
        assert (info.name, info.path, info.size) == ("chunked", "", 100001), info
        info = await c.files.write("sbx_1", "f", io.BytesIO(b"x" * 10))
        assert (info.name, info.path, info.size) == ("", "10", 10), info
        info = await c.files.write("sbx_1", "f", "text")
        assert (info.path, info.size) == ("4", 4), info
        assert srv.requests[0].target == "/api/v1/sandboxes/sbx_1/files?path=f&parents=true"

    @both(_errors)
    async def test_errors(c: Any, srv: FakeServer) -> None:
        e = await _raises(c.sandboxes.get("bad-gateway"), airlock.UnavailableError)
        assert (e.status, e.code) == (502, "unavailable")
        assert "upstream down" in e.message
        e = await _raises(c.sandboxes.get("busy"), airlock.QuotaExceededError)
        assert (e.status, e.retry_after, e.message) == (429, 3.0, "slow down")
        e = await _raises(c.sandboxes.create(resources={"memory_mb": 1}), airlock.InvalidArgumentError)
        assert (e.field, e.message) == ("resources.memoryMb", "resources.memoryMb: too big")
        assert str(e) == "400 invalid_argument: resources.memoryMb: too big"
        e = await _raises(c.compat.get("sbx_1"), airlock.ConflictError)
        assert (e.status, e.sandbox_status) == (409, "destroyed")
        e = await _raises(c.pools.list(), airlock.NotServedError)
        assert (e.status, e.code) == (501, "not_implemented") and isinstance(e, airlock.UnavailableError)
        assert len(srv.requests) == 5

    @both(_dropping_logs)
    async def test_logs_follow_resumes_without_duplicates(c: Any, srv: FakeServer) -> None:
        seqs = [x.seq async for x in c.sandboxes.logs("sbx_1", follow=True)]
        assert seqs == [1, 2, 3], seqs
        assert [r.target for r in srv.requests] == [
            "/api/v1/sandboxes/sbx_1/logs?follow=true",
            "/api/v1/sandboxes/sbx_1/logs?since=2&follow=true",
        ]

    @both(_dropping_events)
    async def test_events_follow_resumes_with_last_event_id(c: Any, srv: FakeServer) -> None:
        seqs = [e.seq async for e in c.events.follow(sandbox_id="sbx_1", type="exec.")]
        assert seqs == [5, 6], seqs
        assert "last-event-id" not in srv.requests[0].headers
        assert srv.requests[1].headers["last-event-id"] == "5"
        assert srv.requests[1].target == "/api/v1/sandboxes/sbx_1/events?type=exec.&follow=true"

    @both(_always_dropping)
    @mock.patch("airlock._follow.BACKOFF_FIRST", 0.001)
    async def test_follow_gives_up(c: Any, srv: FakeServer) -> None:
        async def follow() -> None:
            async for _ in c.sandboxes.logs("sbx_1", follow=True):
                pass

        await _raises(follow(), airlock.TransportError)
        assert srv.connections == 6, srv.connections

    @both(_sandbox, url_suffix="/gateway/airlock/")
    async def test_base_url_prefix(c: Any, srv: FakeServer) -> None:
        await c.sandboxes.get("sbx/../1")
        assert srv.requests[0].target == "/gateway/airlock/api/v1/sandboxes/sbx%2F..%2F1"

    def test_connection_refused_is_an_os_error(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = "http://127.0.0.1:%d" % s.getsockname()[1]
        with airlock.Client("k", url) as c, self.assertRaises(ConnectionRefusedError):
            c.health()

        async def go() -> None:
            async with airlock.AsyncClient("k", url) as ac:
                await ac.health()

        with self.assertRaises(ConnectionRefusedError):
            asyncio.run(go())

    def test_https(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            try:
                subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
            except (OSError, subprocess.CalledProcessError) as e:
                self.skipTest(f"no openssl to make a certificate: {e}")
            server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            server.load_cert_chain(cert, key)
            trusting = ssl.create_default_context(cafile=cert)

            async def go(url: str) -> None:
                async with airlock.AsyncClient("k", url, ssl_context=trusting) as ac:
                    self.assertEqual((await ac.sandboxes.get("sbx_1")).id, "sbx_1")
                    self.assertEqual((await ac.sandboxes.get("sbx_1")).id, "sbx_1")

            with FakeServer(_sandbox, tls=server) as srv:
                self.assertTrue(srv.url.startswith("https://"))
                with airlock.Client("k", srv.url, ssl_context=trusting) as c:
                    self.assertEqual([c.sandboxes.get("sbx_1").id for _ in range(2)], ["sbx_1", "sbx_1"])
                asyncio.run(go(srv.url))
                self.assertEqual(srv.connections, 2)  # one kept alive per client
                with airlock.Client("k", srv.url) as untrusting, self.assertRaises(ssl.SSLError):
                    untrusting.health()  # the system's CAs do not know this certificate

    def test_configuration(self) -> None:
        with mock.patch.dict(os.environ, {"AIRLOCK_TOKEN": "", "AIRLOCK_HOST": ""}):
            with self.assertRaisesRegex(ValueError, "AIRLOCK_TOKEN"):
                airlock.Client()
            with self.assertRaisesRegex(ValueError, "AIRLOCK_TOKEN"):
                airlock.AsyncClient()
        with mock.patch.dict(os.environ, {"AIRLOCK_TOKEN": "alk_env", "AIRLOCK_HOST": "10.0.0.1:7000"}):
            c = airlock.Client()
            self.assertEqual((c.base_url, c._endpoint.token), ("http://10.0.0.1:7000", "alk_env"))
        with mock.patch.dict(os.environ, {"AIRLOCK_TOKEN": "alk_env", "AIRLOCK_HOST": ""}):
            self.assertEqual(airlock.Client().base_url, "http://127.0.0.1:7070")
        with self.assertRaises(ValueError):
            airlock.Client("k", "ftp://x")
