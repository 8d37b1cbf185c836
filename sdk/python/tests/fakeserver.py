"""A scripted HTTP/1.1 server on loopback, for the transport tests: it counts connections and
answers each request with what a handler returns, including misbehaviour (closing an idle
connection, dropping a stream in the middle)."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Callable, Dict, List, NamedTuple, Optional, Union


class Request(NamedTuple):
    method: str
    target: str
    headers: Dict[str, str]
    body: bytes
    conn: int  # which connection (0, 1, ...) carried it
    index: int  # its place on that connection (0, 1, ...)


class Answer(NamedTuple):
    status: int = 200
    headers: Optional[Dict[str, str]] = None
    body: Union[bytes, List[bytes]] = b""  # a list is sent chunked, one chunk each
    close: bool = False  # close the connection after the answer
    drop: bool = False  # close it before the end of a chunked body (a list), or without answering


Handler = Callable[[Request], Answer]


class FakeServer:
    """Serves ``handler`` on 127.0.0.1 until closed; ``requests`` records what came."""

    def __init__(self, handler: Handler, tls: Optional[ssl.SSLContext] = None) -> None:
        self.handler = handler
        self._tls = tls
        self.requests: List[Request] = []
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self._sock.getsockname()[1]}"
        self._threads: List[threading.Thread] = []
        self._conns: List[socket.socket] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def __enter__(self) -> "FakeServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self._sock.close()
        for c in list(self._conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            n = self.connections
            self.connections += 1
            self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn, n), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket, n: int) -> None:
        if self._tls is not None:
            try:
                conn = self._tls.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                conn.close()
                return
        f = conn.makefile("rb")
        try:
            index = 0
            while True:
                req = _read_request(f, n, index)
                if req is None:
                    return
                self.requests.append(req)
                ans = self.handler(req)
                if ans.drop and not isinstance(ans.body, list):
                    return
                conn.sendall(_head(ans))
                if isinstance(ans.body, list):
                    for chunk in ans.body:
                        conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    if ans.drop:
                        return
                    conn.sendall(b"0\r\n\r\n")
                else:
                    conn.sendall(ans.body)
                if ans.close:
                    return
                index += 1
        except OSError:
            return
        finally:
            f.close()
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def _head(ans: Answer) -> bytes:
    headers = dict(ans.headers or {})
    if isinstance(ans.body, list):
        headers["Transfer-Encoding"] = "chunked"
    else:
        headers["Content-Length"] = str(len(ans.body))
    lines = [f"HTTP/1.1 {ans.status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_request(f, conn: int, index: int) -> Optional[Request]:  # type: ignore[no-untyped-def]
    line = f.readline()
    if not line:
        return None
    method, target, _ = line.decode().split(" ", 2)
    headers: Dict[str, str] = {}
    while True:
        h = f.readline().decode().rstrip("\r\n")
        if not h:
            break
        k, _, v = h.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                f.readline()
                break
            body += f.read(size)
            f.readline()
    else:
        body = f.read(int(headers.get("content-length", "0")))
    return Request(method, target, headers, body, conn, index)


def envelope(data: str) -> Answer:
    """A success envelope around JSON text."""
    return Answer(200, {"Content-Type": "application/json"}, ('{"ok":true,"data":%s}' % data).encode())
