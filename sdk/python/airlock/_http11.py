"""HTTP/1.1 pieces without I/O, shared by the transports: the base URL, the request head, the
response head's parser, and what a request body is made of."""

from __future__ import annotations

import io
import os
import ssl
import stat
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from ._errors import TransportError

#: The daemon's address when neither base_url nor AIRLOCK_HOST says it.
DEFAULT_HOST = "http://127.0.0.1:7070"
#: The most a response head may take.
MAX_HEAD = 64 << 10
#: The size of the pieces a streamed body is sent and read in.
CHUNK = 64 << 10

USER_AGENT = "airlock-python/0.1.0"


def host_url(host: str) -> str:
    """An AIRLOCK_HOST value as a base URL: "" is the default, a bare HOST:PORT gets http://."""
    host = host.strip()
    if not host:
        return DEFAULT_HOST
    return host if "://" in host else "http://" + host


class Endpoint:
    """Where the daemon is and how to reach it: scheme, host, port, the base URL's path (a
    prefix such as ``/airlock`` behind a gateway), TLS settings and the key."""

    def __init__(self, base_url: str, token: str, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        u = urlsplit(host_url(base_url))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"airlock: base URL {base_url!r}: want http://HOST:PORT or https://HOST:PORT")
        if u.query or u.fragment or u.username:
            raise ValueError(f"airlock: base URL {base_url!r}: must not have a query, fragment or user")
        self.url = u.geturl().rstrip("/")
        self.tls = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.tls else 80)
        self.prefix = u.path.rstrip("/")
        default_port = self.port == (443 if self.tls else 80)
        name = f"[{self.host}]" if ":" in self.host else self.host
        #: the Host header.
        self.authority = name if default_port else f"{name}:{self.port}"
        self.ssl_context = (ssl_context or ssl.create_default_context()) if self.tls else None
        self.token = token

    def headers(self, accept: str, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """The headers every request carries."""
        h = {"Authorization": f"Bearer {self.token}", "Accept": accept, "User-Agent": USER_AGENT}
        if extra:
            h.update(extra)
        return h


def request_head(method: str, target: str, authority: str, headers: Mapping[str, str]) -> bytes:
    """The request line and headers, up to the blank line."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(head: bytes) -> Tuple[int, Dict[str, str]]:
    """The status and headers (lowercase names; repeated ones joined with ", ") of a response
    head, given without its final blank line or with it."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise TransportError(f"malformed HTTP status line: {lines[0][:100]!r}")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise TransportError(f"malformed HTTP header line: {line[:100]!r}")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return int(parts[1]), headers


def body_length(body: Any) -> Optional[int]:
    """The length of a request body when it can be told up front (bytes, or what is left of a
    regular file); None means it is sent chunked."""
    if body is None:
        return 0
    if isinstance(body, (bytes, bytearray)):
        return len(body)
    if isinstance(body, memoryview):
        return body.nbytes
    if isinstance(body, io.BytesIO):
        return len(body.getbuffer()) - body.tell()
    fileno = getattr(body, "fileno", None)
    if fileno is not None:
        try:
            st = os.fstat(fileno())
            if stat.S_ISREG(st.st_mode):
                return st.st_size - body.tell()
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    return None


def body_chunks(body: Any) -> Iterator[bytes]:
    """A streamed body (file object or iterable) piece by piece."""
    read = getattr(body, "read", None)
    if read is not None:
        while True:
            chunk = read(CHUNK)
            if not chunk:
                return
            if isinstance(chunk, str):
                raise TypeError("a file object given as a body must be opened in binary mode")
            yield chunk
    else:
        for chunk in body:
            if chunk:
                yield bytes(chunk)


def rewind_point(body: Any) -> Optional[int]:
    """Where a body can be replayed from on a retry: 0 for bytes, the position of a seekable
    file; None for a body that cannot be sent twice (an iterator)."""
    if body is None or isinstance(body, (bytes, bytearray, memoryview)):
        return 0
    try:
        if body.seekable():
            return int(body.tell())
    except (AttributeError, OSError, ValueError):
        pass
    return None


#: Methods whose request may be sent twice (RFC 9110 §9.2.2). Another one, once sent whole, is
#: not sent again: the daemon may have done it before the connection failed (an exec would run
#: twice).
IDEMPOTENT = frozenset(("GET", "HEAD", "PUT", "DELETE", "OPTIONS"))


def replay(method: str, sent: bool, body: Any, point: Optional[int]) -> bool:
    """Whether a request that failed on a reused connection before its answer is sent again on
    a new one: when it was not sent whole, or its method is idempotent; and its body can be
    replayed (then it is put back to its rewind point)."""
    return (not sent or method in IDEMPOTENT) and rewind(body, point)


def rewind(body: Any, point: Optional[int]) -> bool:
    """Puts a body back to its rewind point; False when it cannot be replayed."""
    if point is None:
        return False
    if hasattr(body, "seek"):
        body.seek(point)
    return True


def chunked(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """Pieces in the chunked transfer coding, ending with the last chunk."""
    for piece in pieces:
        yield b"%x\r\n" % len(piece) + piece + b"\r\n"
    yield b"0\r\n\r\n"


def keep_alive(status: int, headers: Mapping[str, str]) -> bool:
    """Whether the connection may carry another request after this response."""
    return "close" not in headers.get("connection", "").lower()

