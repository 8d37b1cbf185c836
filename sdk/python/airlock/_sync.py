"""The blocking client: http.client connections kept alive, and raw sockets for WebSockets."""

from __future__ import annotations

import collections
import contextlib
import http.client
import select
import socket
import threading
import time
from typing import IO, Any, Deque, Dict, Iterator, List, Optional, Tuple

from ._call import NO_TIMEOUT, Call, Plan, bind
from ._client import ClientBase
from ._errors import TransportError, error_from_answer
from ._exec import Chunk, ExecCall, ExecProtocol, SessionControls
from ._follow import Follow
from ._http11 import CHUNK, MAX_HEAD, Endpoint, body_length, parse_head, replay, rewind_point
from ._models import ExecResult
from ._ops import Sync
from ._ws import Handshake

#: Idle connections a client keeps for reuse (one, unless threads share the client).
MAX_IDLE = 4

# A reused connection that fails with one of these before an answer came was closed by the
# server while idle: the request is sent again on a new one.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def _timeout(call_timeout: Optional[float], default: Optional[float]) -> Optional[float]:
    t = default if call_timeout is None else call_timeout
    return None if t == NO_TIMEOUT else t


def _headers(resp: http.client.HTTPResponse) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for k, v in resp.getheaders():
        k = k.lower()
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out


class _Connections:
    """Kept-alive HTTP connections to one daemon. A call takes an idle connection (or makes
    one), and gives it back once the answer has been read whole; so a client used by one
    thread holds one connection, and threads sharing a client each get their own."""

    def __init__(self, ep: Endpoint, timeout: Optional[float]) -> None:
        self._ep = ep
        self._timeout = timeout
        self._idle: List[http.client.HTTPConnection] = []
        self._closed = False  # close() was called: connections are no longer kept
        self._lock = threading.Lock()  # guards _idle and _closed

    def _new(self) -> http.client.HTTPConnection:
        ep = self._ep
        if ep.tls:
            return http.client.HTTPSConnection(ep.host, ep.port, context=ep.ssl_context, blocksize=CHUNK)
        return http.client.HTTPConnection(ep.host, ep.port, blocksize=CHUNK)

    def _take(self) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if _usable(conn):
                    return conn, True
                conn.close()
        return self._new(), False

    def release(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Gives a connection back after its answer was read whole (or closes it)."""
        if resp.will_close or not resp.isclosed():
            conn.close()
            return
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def open(self, call: Call[Any]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends the request; returns the connection and the answer, its body unread."""
        body, content_type = call.payload()
        headers = self._ep.headers(call.accept, call.headers)
        if content_type:
            headers["Content-Type"] = content_type
        if body is not None:
            n = body_length(body)
            if n is not None:
                headers["Content-Length"] = str(n)
        elif call.method in ("POST", "PUT"):
            headers["Content-Length"] = "0"
        target = call.target(self._ep.prefix)
        timeout = _timeout(call.timeout, self._timeout)
        point = rewind_point(body)
        while True:
            conn, reused = self._take()
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            sent = False
            try:
                with _closing_on_error(conn, f"{call.method} {call.path}"):
                    conn.request(call.method, target, body=body, headers=headers)  # type: ignore[arg-type]
                    sent = True
                    return conn, conn.getresponse()
            except _STALE:
                if not reused or not replay(call.method, sent, body, point):
                    raise

    def stream(self, call: Call[Any]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Like open, but a non-2xx answer is read and raised as its AirlockError."""
        conn, resp = self.open(call)
        if 200 <= resp.status < 300:
            return conn, resp
        body = _read(conn, resp, resp.read)
        self.release(conn, resp)
        raise error_from_answer(resp.status, _headers(resp), body)

    def perform(self, call: Call[Any]) -> Any:
        """Runs a call to its result."""
        conn, resp = self.open(call)
        if call.sink is not None and 200 <= resp.status < 300:
            n = _read(conn, resp, lambda: _copy(resp, call.sink))  # type: ignore[arg-type]
            self.release(conn, resp)
            return n
        body = _read(conn, resp, resp.read)
        self.release(conn, resp)
        return call.result(resp.status, _headers(resp), body)

    def close(self) -> None:
        """Closes the idle connections; those in use close when their call ends. (A call made
        after close still works, on a connection of its own.)"""
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for conn in idle:
            conn.close()


def _usable(conn: http.client.HTTPConnection) -> bool:
    """False when an idle connection was closed by the server (it is readable: EOF)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


@contextlib.contextmanager
def _closing_on_error(conn: http.client.HTTPConnection, what: str) -> Iterator[None]:
    """Closes the connection when the block fails; an HTTP protocol error (a malformed or cut
    answer) becomes a TransportError."""
    try:
        yield
    except http.client.HTTPException as e:
        conn.close()
        if isinstance(e, OSError):
            raise  # RemoteDisconnected: the connection's end, which the caller may retry
        raise TransportError(f"{what}: {e!r}") from e
    except BaseException:
        conn.close()
        raise


def _read(conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, read: Any) -> Any:
    """Runs a read of the answer's body (closing the connection when it fails)."""
    with _closing_on_error(conn, "reading the daemon's answer"):
        return read()


def _copy(resp: http.client.HTTPResponse, sink: IO[bytes]) -> int:
    n = 0
    while True:
        chunk = resp.read1(CHUNK)
        if not chunk:
            resp.read()  # marks the answer read whole, so that its connection is kept
            return n
        sink.write(chunk)
        n += len(chunk)


class Client(ClientBase[Sync]):
    """A blocking client of one airlock daemon with one API key.

    ``api_key`` defaults to ``AIRLOCK_TOKEN`` (a missing key is a ValueError here),
    ``base_url`` to ``AIRLOCK_HOST`` or http://127.0.0.1:7070; ``timeout`` is the seconds
    one network read or write may wait (operations that need longer, such as an exec with its
    own timeout, take what they need); ``ssl_context`` configures https/wss.

    The resources: ``sandboxes``, ``files``, ``snapshots``, ``network``, ``events``,
    ``pools``, ``images``, ``webhooks``, ``volumes``, ``templates``, ``tenants``, ``compat``;
    and ``health()``, ``capabilities()``, ``openapi()``, ``prometheus_metrics()``.

    A client keeps its connection alive between calls and reconnects when the daemon closed
    it. It may be shared by threads (each call uses a connection of its own while it runs).
    Close it (or use ``with``) when done.
    """

    is_async = False
    _connections = _Connections
    _http: _Connections

    def _call(self, call: Call[Any]) -> Any:
        return bind(self._http.perform(call), self)

    def _session(self, call: ExecCall) -> "ExecSession":
        return ExecSession._open(self, call)

    def _plan(self, plan: Plan[Any]) -> Any:
        steps, result = plan.steps, None
        try:
            while True:
                result = self._run(steps.send(result))
        except StopIteration as done:
            return done.value

    def _follow(self, f: Follow[Any]) -> Iterator[Any]:
        while not f.ended:
            err: Optional[OSError] = None
            try:
                yield from self._follow_once(f)
            except OSError as e:
                err = e
            if not f.ended:
                time.sleep(f.dropped(err))

    def _follow_once(self, f: Follow[Any]) -> Iterator[Any]:
        """One connection of a followed stream, until it ends."""
        conn, resp = self._http.stream(f.call())
        try:
            if not f.begin(resp.status, _headers(resp)):
                yield from f.page(resp.status, _headers(resp), _read(conn, resp, resp.read))
            while not f.ended:
                chunk = _read(conn, resp, lambda: resp.read1(CHUNK))
                if not chunk:
                    return
                yield from f.feed(chunk)
        finally:
            self._http.release(conn, resp)

    def _websocket(self, path: str) -> Tuple[socket.socket, bytes]:
        """Opens a WebSocket to an API path; returns the socket and the bytes read past the
        handshake. A refused upgrade is its AirlockError."""
        ep = self._endpoint
        sock = socket.create_connection((ep.host, ep.port), timeout=_timeout(None, self._timeout))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.ssl_context is not None:
                sock = ep.ssl_context.wrap_socket(sock, server_hostname=ep.host)
            hs = Handshake()
            sock.sendall(hs.request(ep.authority, ep.prefix + path, ep.headers("application/json")))
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = sock.recv(CHUNK)
                if not data or len(buf) > MAX_HEAD:
                    raise TransportError("websocket handshake: the daemon closed the connection")
                buf += data
            head, _, rest = buf.partition(b"\r\n\r\n")
            status, headers = parse_head(head)
            if status != 101:
                raise error_from_answer(status, headers, _rest_of_body(sock, headers, rest))
            hs.check(headers)
            sock.settimeout(None)
            return sock, rest
        except BaseException:
            sock.close()
            raise

    def close(self) -> None:
        """Closes the kept-alive connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rest_of_body(sock: socket.socket, headers: Dict[str, str], got: bytes) -> bytes:
    """The body of a refused upgrade (its error), as far as Content-Length says (at most 1 MiB)."""
    want = min(int(headers.get("content-length", "0") or 0), 1 << 20)
    while len(got) < want:
        data = sock.recv(CHUNK)
        if not data:
            break
        got += data
    return got


class ExecSession(SessionControls[None]):
    """An interactive exec (``client.sandboxes.exec_stream``), blocking.

    Iterate it for the command's output chunks, ``(stream, data)`` with stream "stdout" or
    "stderr" (everything is "stdout" with a TTY); ``wait()`` returns the ExecResult (reading,
    and dropping, the output not iterated yet). ``write``, ``close_stdin``, ``signal`` and
    ``resize`` may be called from another thread while one iterates. Use it as a context
    manager: leaving it closes the connection, which ends a command still running.
    """

    def __init__(self, sock: socket.socket, proto: ExecProtocol) -> None:
        self._sock = sock
        self._proto = proto
        self._queue: Deque[Chunk] = collections.deque()
        self._send_lock = threading.Lock()  # guards writes to _sock
        self._closed = False

    @classmethod
    def _open(cls, client: Client, call: ExecCall) -> "ExecSession":
        sock, rest = client._websocket(call.path)
        s = cls(sock, ExecProtocol(call.start))
        try:
            s._send(s._proto.start())
            s._absorb(rest)
            while s._proto.execution_id is None and not s._proto.done:
                s._receive()
        except BaseException:
            s.close()
            raise
        return s

    def _send(self, data: bytes) -> None:
        if data:
            with self._send_lock:
                self._sock.sendall(data)

    def _absorb(self, data: bytes) -> None:
        chunks = self._proto.feed(data) if data else []
        self._send(self._proto.codec.outgoing())
        self._queue.extend(chunks)

    def _receive(self) -> None:
        data = self._sock.recv(CHUNK)
        if not data:
            self._proto.eof_received()
        self._absorb(data)

    def __iter__(self) -> "ExecSession":
        return self

    def __next__(self) -> Chunk:
        while not self._queue:
            if self._proto.done:
                raise StopIteration
            try:
                self._receive()
            except OSError:
                if self._closed:
                    raise StopIteration from None  # closed meanwhile, by another thread
                self.close()
                raise
            except BaseException:
                self.close()
                raise
        return self._queue.popleft()

    def wait(self) -> ExecResult:
        """Reads to the exit frame and returns the command's result."""
        for _ in self:
            pass
        self.close()
        assert self._proto.result is not None
        return self._proto.result

    def close(self) -> None:
        """Closes the connection (a command still running is ended)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._send(self._proto.close())
        except OSError:
            pass
        finally:
            self._sock.close()

    def __enter__(self) -> "ExecSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
