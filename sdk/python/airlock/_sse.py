"""A sans-IO parser of server-sent events (text/event-stream, the HTML standard's format):
feed it bytes as they arrive, take the events it completed. Used by both transports."""

from __future__ import annotations

from typing import List, NamedTuple, Optional

#: The longest line the parser accepts (an event's data line carries one JSON entry).
MAX_LINE = 16 << 20


class SSEEvent(NamedTuple):
    """One dispatched event: its name ("message" when it had none), data lines joined with
    "\\n", and its id ("" when it had none)."""

    event: str
    data: str
    id: str


class SSEParser:
    """Splits a byte stream into events: ``field: value`` lines, an event ending at a blank
    line, comments (``:`` lines, such as keep-alives) skipped, ``\\n``, ``\\r\\n`` and ``\\r``
    line ends. An event cut off by the end of the stream is never returned, as the format
    requires."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._buf = bytearray()
        self._max_line = max_line
        self._event = ""
        self._data: List[str] = []
        self._id = ""
        self._seen = False
        self._pending_cr = False
        #: the last event id seen (kept across events, as the format says): where to resume.
        self.last_id: Optional[str] = None

    def feed(self, chunk: bytes) -> List[SSEEvent]:
        """Adds bytes of the stream; returns the events they completed."""
        out: List[SSEEvent] = []
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the \n of a \r\n split across chunks
        self._pending_cr = False
        self._buf += chunk
        start = 0
        buf = self._buf
        while True:
            nl = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, nl if nl >= 0 else len(buf))
            end = cr if cr >= 0 else nl
            if end < 0:
                break
            line = bytes(buf[start:end])
            if end == cr:
                if cr + 1 < len(buf):
                    start = cr + 2 if buf[cr + 1 : cr + 2] == b"\n" else cr + 1
                else:
                    start = cr + 1
                    self._pending_cr = True
            else:
                start = nl + 1
            ev = self._line(line.decode("utf-8", "replace"))
            if ev is not None:
                out.append(ev)
        del buf[:start]
        if len(buf) > self._max_line:
            raise ValueError(f"event stream line longer than {self._max_line} bytes")
        return out

    def _line(self, line: str) -> Optional[SSEEvent]:
        if not line:
            if not self._seen:
                return None
            ev = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._seen = "", [], False
            return ev
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
                self.last_id = value
        else:
            return None  # retry, and fields the format does not know
        self._seen = True
        return None
