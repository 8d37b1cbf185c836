"""The asyncio client: HTTP/1.1 on asyncio streams with kept-alive connections, and
WebSockets on the same streams."""

from __future__ import annotations

import asyncio
import collections
from typing import Any, AsyncIterator, Awaitable, Deque, Dict, List, Optional, Tuple, TypeVar

from ._call import NO_TIMEOUT, Call, Pending, Plan, bind
from ._client import ClientBase
from ._errors import TransportError, error_from_answer
from ._exec import Chunk, ExecCall, ExecProtocol, SessionControls
from ._follow import Follow
from ._http11 import (
    CHUNK,
    MAX_HEAD,
    Endpoint,
    body_chunks,
    body_length,
    chunked,
    keep_alive,
    parse_head,
    replay,
    request_head,
    rewind_point,
)
from ._models import ExecResult
from ._ops import Async
from ._ws import Handshake

T = TypeVar("T")

#: Idle connections a client keeps for reuse.
MAX_IDLE = 4
#: A body up to this size is written with its head in one piece.
SMALL_BODY = 64 << 10


async def _io(aw: Awaitable[T], timeout: Optional[float]) -> T:
    """Awaits one network read or write within timeout (None: forever)."""
    if timeout is None:
        return await aw
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"no progress from the daemon in {timeout:g} s") from None


class _Conn:
    """One connection: its streams, and whether it carried a request before."""

    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def usable(self) -> bool:
        """False when the server closed it while it was idle."""
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        """Closes it (the socket goes once the loop has run the close)."""
        self.writer.close()


class _Response:
    """An answer whose body is read as it is needed: by Content-Length, chunked, or to the
    end of the connection."""

    def __init__(self, conn: _Conn, status: int, headers: Dict[str, str], head_only: bool, timeout: Optional[float]) -> None:
        self.conn = conn
        self.status = status
        self.headers = headers
        self._timeout = timeout
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self._left: Optional[int] = 0 if head_only or status in (204, 304) else (int(length) if length and not self._chunked else None)
        self._chunk_left = 0
        self.done = self._left == 0
        self._reusable = keep_alive(status, headers) and (self._chunked or self._left is not None)

    async def chunk(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        if self.done:
            return b""
        r, t = self.conn.reader, self._timeout
        if self._chunked:
            if self._chunk_left == 0:
                line = await _io(r.readline(), t)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise TransportError(f"malformed chunk size line {line[:40]!r}") from None
                if size == 0:
                    while (await _io(r.readline(), t)) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self.done = True
                    return b""
                self._chunk_left = size
            data = await _io(r.read(min(self._chunk_left, CHUNK)), t)
            if not data:
                raise TransportError("the connection ended in the middle of a chunk")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                await _io(r.readexactly(2), t)
            return data
        want = CHUNK if self._left is None else min(self._left, CHUNK)
        data = await _io(r.read(want), t)
        if self._left is None:
            self.done = not data
            return data
        if not data:
            raise TransportError(f"the connection ended {self._left} bytes before the end of the body")
        self._left -= len(data)
        self.done = self._left == 0
        return data

    async def body(self) -> bytes:
        """The whole (rest of the) body."""
        if self._left is not None and not self._chunked and self._left > 0:
            data = await _io(self.conn.reader.readexactly(self._left), self._timeout)
            self._left, self.done = 0, True
            return data
        parts = []
        while True:
            part = await self.chunk()
            if not part:
                return b"".join(parts)
            parts.append(part)


class _Connections:
    """Kept-alive HTTP/1.1 connections to one daemon, on asyncio streams."""

    def __init__(self, ep: Endpoint, timeout: Optional[float]) -> None:
        self._ep = ep
        self._timeout = timeout
        self._idle: List[_Conn] = []
        self._closed = False  # close() was called: connections are no longer kept

    async def connect(self, timeout: Optional[float]) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A new connection to the daemon (TLS for https)."""
        ep = self._ep
        return await _io(
            asyncio.open_connection(ep.host, ep.port, ssl=ep.ssl_context,
                                    server_hostname=ep.host if ep.ssl_context else None, limit=MAX_HEAD * 16),
            timeout,
        )

    async def _take(self, timeout: Optional[float]) -> _Conn:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return _Conn(*await self.connect(timeout))

    def release(self, resp: _Response) -> None:
        """Gives a connection back after its answer was read whole (or closes it)."""
        if resp.done and resp._reusable and not self._closed and len(self._idle) < MAX_IDLE:
            self._idle.append(resp.conn)
        else:
            resp.conn.close()

    async def open(self, call: Call[Any]) -> _Response:
        """Sends the request; returns the answer, its body unread."""
        body, content_type = call.payload()
        headers = self._ep.headers(call.accept, call.headers)
        if content_type:
            headers["Content-Type"] = content_type
        n = body_length(body)
        if n is None:
            headers["Transfer-Encoding"] = "chunked"
        elif body is not None or call.method in ("POST", "PUT"):
            headers["Content-Length"] = str(n)
        head = request_head(call.method, call.target(self._ep.prefix), self._ep.authority, headers)
        t = self._timeout if call.timeout is None else call.timeout
        timeout = None if t == NO_TIMEOUT else t
        point = rewind_point(body)
        while True:
            conn = await self._take(timeout)
            sent = False
            try:
                await self._send(conn.writer, head, body, n is None, timeout)
                sent = True
                raw = await _io(conn.reader.readuntil(b"\r\n\r\n"), timeout)
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                conn.close()
                if conn.reused and not getattr(e, "partial", b"") and replay(call.method, sent, body, point):
                    continue  # the daemon had closed the idle connection: once more on a new one
                if isinstance(e, asyncio.IncompleteReadError):
                    raise TransportError("the daemon closed the connection before answering") from None
                raise
            except asyncio.LimitOverrunError:
                conn.close()
                raise TransportError("the daemon's answer head is too long") from None
            except BaseException:
                conn.close()
                raise
            status, resp_headers = parse_head(raw)
            return _Response(conn, status, resp_headers, call.method == "HEAD", timeout)

    @staticmethod
    async def _send(w: asyncio.StreamWriter, head: bytes, body: Any, stream: bool, timeout: Optional[float]) -> None:
        if body is None:
            w.write(head)
        elif isinstance(body, (bytes, bytearray, memoryview)):
            if len(body) <= SMALL_BODY:
                w.write(head + bytes(body))
            else:
                w.write(head)
                view = memoryview(body)
                for i in range(0, len(view), CHUNK):
                    w.write(view[i : i + CHUNK])
                    await _io(w.drain(), timeout)
        else:
            w.write(head)
            pieces = body_chunks(body)
            for piece in chunked(pieces) if stream else pieces:
                w.write(piece)
                await _io(w.drain(), timeout)
        await _io(w.drain(), timeout)

    async def stream(self, call: Call[Any]) -> _Response:
        """Like open, but a non-2xx answer is read and raised as its AirlockError."""
        resp = await self.open(call)
        if 200 <= resp.status < 300:
            return resp
        body = await self._read(resp, resp.body())
        raise error_from_answer(resp.status, resp.headers, body)

    async def _read(self, resp: _Response, aw: Awaitable[T]) -> T:
        try:
            result = await aw
        except BaseException:
            resp.conn.close()
            raise
        self.release(resp)
        return result

    async def perform(self, call: Call[Any]) -> Any:
        """Runs a call to its result."""
        resp = await self.open(call)
        if call.sink is not None and 200 <= resp.status < 300:
            return await self._read(resp, _copy(resp, call.sink))
        body = await self._read(resp, resp.body())
        return call.result(resp.status, resp.headers, body)

    async def close(self) -> None:
        """Closes the idle connections and keeps no more."""
        idle, self._idle, self._closed = self._idle, [], True
        for conn in idle:
            conn.close()
            await _closed(conn.writer)


async def _closed(writer: asyncio.StreamWriter) -> None:
    """Waits until a closed writer's socket is released (so that nothing is left for a loop
    about to end)."""
    try:
        await writer.wait_closed()
    except (OSError, asyncio.CancelledError):
        pass


async def _copy(resp: _Response, sink: Any) -> int:
    n = 0
    while True:
        chunk = await resp.chunk()
        if not chunk:
            return n
        sink.write(chunk)
        n += len(chunk)


class AsyncClient(ClientBase[Async]):
    """The asyncio client: the surface of :class:`~airlock.Client`, every method awaitable
    (``await client.sandboxes.get(id)``); followed streams are async iterators (``async for
    line in client.sandboxes.logs(id, follow=True)``), interactive execs AsyncExecSessions.
    ``async with client.sandboxes.create(...) as sb:`` terminates the sandbox at the end.

    Use it from one event loop; close it with ``await client.close()`` or ``async with``.
    """

    is_async = True
    _connections = _Connections
    _http: _Connections

    def _call(self, call: Call[Any]) -> Any:
        return Pending(self._perform(call))

    async def _perform(self, call: Call[Any]) -> Any:
        return bind(await self._http.perform(call), self)

    def _session(self, call: ExecCall) -> "AsyncExecSession":
        return AsyncExecSession(self, call)

    def _plan(self, plan: Plan[Any]) -> Any:
        return Pending(self._steps(plan))

    async def _steps(self, plan: Plan[Any]) -> Any:
        steps, result = plan.steps, None
        try:
            while True:
                result = await self._run(steps.send(result))
        except StopIteration as done:
            return done.value

    async def _follow(self, f: Follow[Any]) -> AsyncIterator[Any]:
        while not f.ended:
            err: Optional[OSError] = None
            try:
                async for item in self._follow_once(f):
                    yield item
            except OSError as e:
                err = e
            if not f.ended:
                await asyncio.sleep(f.dropped(err))

    async def _follow_once(self, f: Follow[Any]) -> AsyncIterator[Any]:
        """One connection of a followed stream, until it ends."""
        resp = await self._http.stream(f.call())
        try:
            if not f.begin(resp.status, resp.headers):
                for item in f.page(resp.status, resp.headers, await resp.body()):
                    yield item
            while not f.ended:
                chunk = await resp.chunk()
                if not chunk:
                    return
                for item in f.feed(chunk):
                    yield item
        finally:
            self._http.release(resp)

    async def _websocket(self, path: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Opens a WebSocket to an API path. A refused upgrade is its AirlockError."""
        ep = self._endpoint
        reader, writer = await self._http.connect(self._timeout)
        try:
            hs = Handshake()
            writer.write(hs.request(ep.authority, ep.prefix + path, ep.headers("application/json")))
            raw = await _io(reader.readuntil(b"\r\n\r\n"), self._timeout)
            status, headers = parse_head(raw)
            if status != 101:
                resp = _Response(_Conn(reader, writer), status, headers, False, self._timeout)
                raise error_from_answer(status, headers, await resp.body())
            hs.check(headers)
            return reader, writer
        except asyncio.IncompleteReadError:
            writer.close()
            raise TransportError("websocket handshake: the daemon closed the connection") from None
        except BaseException:
            writer.close()
            raise

    async def close(self) -> None:
        """Closes the kept-alive connections."""
        await self._http.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncExecSession(SessionControls[Awaitable[None]]):
    """An interactive exec on an AsyncClient: ``async with`` it (or ``await`` it) to connect,
    ``async for stream, data in session`` for the output, ``await session.write(...)``,
    ``close_stdin``, ``signal``, ``resize``, and ``await session.wait()`` for the ExecResult.
    See :class:`~airlock.ExecSession`."""

    def __init__(self, client: AsyncClient, call: ExecCall) -> None:
        self._client = client
        self._call = call
        self._proto = ExecProtocol(call.start)
        self._queue: Deque[Chunk] = collections.deque()
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._closed = False

    async def _connect(self) -> "AsyncExecSession":
        if self._writer is None:
            if self._closed:
                raise ValueError("this exec session is closed")
            self._reader, self._writer = await self._client._websocket(self._call.path)
            try:
                await self._send(self._proto.start())
                while self._proto.execution_id is None and not self._proto.done:
                    await self._receive()
            except BaseException:
                await self.close()
                raise
        return self

    def __await__(self) -> Any:
        return self._connect().__await__()

    async def __aenter__(self) -> "AsyncExecSession":
        return await self._connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(self, data: bytes) -> None:
        await self._connect()
        if data and self._writer is not None:
            self._writer.write(data)
            await self._writer.drain()

    async def _receive(self) -> None:
        assert self._reader is not None
        data = await self._reader.read(CHUNK)
        if not data:
            self._proto.eof_received()
        chunks = self._proto.feed(data) if data else []
        await self._send(self._proto.codec.outgoing())
        self._queue.extend(chunks)

    def __aiter__(self) -> "AsyncExecSession":
        return self

    async def __anext__(self) -> Chunk:
        await self._connect()
        while not self._queue:
            if self._proto.done:
                raise StopAsyncIteration
            try:
                await self._receive()
            except BaseException:
                await self.close()
                raise
        return self._queue.popleft()

    async def wait(self) -> ExecResult:
        """Reads to the exit frame and returns the command's result."""
        async for _ in self:
            pass
        await self.close()
        assert self._proto.result is not None
        return self._proto.result

    async def close(self) -> None:
        """Closes the connection (a command still running is ended)."""
        if self._closed or self._writer is None:
            self._closed = True
            return
        self._closed = True
        writer = self._writer
        try:
            frame = self._proto.close()
            if frame:
                writer.write(frame)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()
        await _closed(writer)
