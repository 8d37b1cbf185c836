"""Followed streams (a sandbox's logs, events) as a sans-IO state machine: which request to
send for each (re)connection, what the server-sent events in it deliver, when to give up.
The sync and async clients drive it with their own connections."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar

from ._call import Call, raw
from ._errors import AirlockError, TransportError, make_error
from ._sse import SSEParser

T = TypeVar("T")

#: Reconnections in a row that bring nothing before a follow gives up.
MAX_RECONNECTS = 5
#: The wait before the first reconnection; it doubles with each fruitless one, up to BACKOFF_MAX.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 1.0
#: A followed stream quiet for this long (the daemon sends a keep-alive every 15 s) is dead.
STREAM_READ_TIMEOUT = 60.0


class Follow(Generic[T]):
    """One followed stream across reconnections: each reconnection resumes after the last item
    delivered (``since``/``after`` in the query, or ``Last-Event-ID``), so none is delivered
    twice. A daemon that answers with a JSON list instead of a stream (no ``follow``) delivers
    that list and ends.

    The driver loops: send :meth:`call`; on a refusal raise; on an answer call :meth:`begin`,
    then :meth:`feed` each chunk of a stream (or :meth:`page` the whole body of a list) and
    yield what it returns, until :attr:`ended`; when the connection fails or ends early, wait
    :meth:`dropped` seconds (it raises when it is time to give up) and loop.
    """

    def __init__(
        self,
        *,
        path: str,
        params: Callable[[int], Sequence[Tuple[str, str]]],
        event: str,
        model: Any,
        last: int = 0,
        resume_header: bool = False,
        page: Callable[[Any], List[Any]] = lambda data: list(data or ()),
        what: str = "stream",
    ) -> None:
        self.path = path
        self.params = params
        self.event = event
        self.model = model
        self.resume_header = resume_header
        self.page_items = page
        self.what = what
        #: the seq of the last item delivered, or where to start.
        self.last = last
        #: the daemon ended the stream (or answered a whole list): nothing more comes.
        self.ended = False
        self._delivered = 0
        self._connected = False
        self._failures = 0
        self._parser = SSEParser()
        self._streaming = False

    def call(self) -> Call[bytes]:
        """The request of the next connection."""
        headers: Optional[Dict[str, str]] = None
        if self.resume_header and self.last > 0:
            headers = {"Last-Event-ID": str(self.last)}
        return Call("GET", self.path, raw, params=self.params(self.last), accept="text/event-stream",
                    headers=headers, timeout=STREAM_READ_TIMEOUT)

    def begin(self, status: int, headers: Mapping[str, str]) -> bool:
        """A connection answered 2xx; returns whether it streams (else read the whole body and
        pass it to :meth:`page`)."""
        self._connected = True
        self._parser = SSEParser()
        self._streaming = headers.get("content-type", "").split(";")[0].strip() == "text/event-stream"
        return self._streaming

    def feed(self, chunk: bytes) -> List[T]:
        """Items completed by a chunk of the stream."""
        out: List[T] = []
        for ev in self._parser.feed(chunk):
            if ev.event in (self.event, "message"):
                try:
                    item = self.model.from_dict(json.loads(ev.data))
                except (ValueError, AttributeError) as e:
                    raise TransportError(f"following {self.what}: bad entry: {e}") from None
                if self._keep(item):
                    out.append(item)
            elif ev.event == "end":
                self.ended = True
                break
            elif ev.event == "error":
                raise self._error(ev.data)
        return out

    def page(self, status: int, headers: Mapping[str, str], body: bytes) -> List[T]:
        """The items of an answer that is not a stream (an envelope with a list); ends."""
        self.ended = True
        doc = json.loads(body)
        return [it for it in (self.model.from_dict(d) for d in self.page_items(doc.get("data"))) if self._keep(it)]

    def dropped(self, err: Optional[BaseException]) -> float:
        """The connection failed (``err``) or ended without the daemon's end (None): the seconds
        to wait before reconnecting. Raises ``err`` when there is nothing to resume (it never
        connected) and TransportError after MAX_RECONNECTS fruitless attempts in a row."""
        if err is not None and (isinstance(err, AirlockError) or not self._connected):
            raise err
        self._failures += 1
        if self._failures > MAX_RECONNECTS:
            why = err or "the daemon ended the stream early"
            raise TransportError(f"following {self.what}: {why}") from err
        return min(BACKOFF_FIRST * (1 << (self._failures - 1)), BACKOFF_MAX)

    def _keep(self, item: T) -> bool:
        seq = getattr(item, "seq", None)
        if seq is not None:
            if self.last and seq <= self.last:
                return False  # a resumed stream repeats it
            self.last = seq
        self._delivered += 1
        self._failures = 0
        return True

    def _error(self, data: str) -> AirlockError:
        try:
            doc = json.loads(data)
        except ValueError:
            doc = {"message": data}
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            doc = doc["error"]
        return make_error(500, doc if isinstance(doc, dict) else {"message": data})
