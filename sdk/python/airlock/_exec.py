"""Interactive exec (GET .../exec upgraded to a WebSocket of JSON frames) as a sans-IO
protocol: the frames the client sends, and what the daemon's frames mean. The sync and async
sessions (ExecSession, AsyncExecSession) drive it over their sockets."""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, Generic, List, Optional, Tuple, TypeVar, Union

from ._errors import AirlockError, TransportError, make_error, status_for_code
from ._models import ExecResult
from ._ws import CLOSE, TEXT, Codec

R = TypeVar("R")

#: The most stdin one frame carries.
STDIN_CHUNK = 32 << 10

#: An output chunk: ("stdout" or "stderr", its bytes). With a TTY everything is "stdout".
Chunk = Tuple[str, bytes]


class ExecCall:
    """The description of an interactive exec: the sandbox's exec path and the ``start``
    frame's request (an ExecStart: command, tty, rows, cols, stdin, env, workdir, timeout)."""

    __slots__ = ("path", "start")

    def __init__(self, path: str, start: Dict[str, Any]) -> None:
        self.path = path
        self.start = start


class ExecProtocol:
    """The client's half of one interactive exec, over a WebSocket codec."""

    def __init__(self, start: Dict[str, Any], codec: Optional[Codec] = None) -> None:
        self.codec = codec or Codec()
        self._start = start
        #: the execution's ID, from the daemon's ``started`` frame (or the exit frame).
        self.execution_id: Optional[str] = None
        #: the exec result, once the ``exit`` frame came.
        self.result: Optional[ExecResult] = None

    def _frame(self, frame: Dict[str, Any]) -> bytes:
        return self.codec.text(json.dumps(frame, separators=(",", ":")))

    def start(self) -> bytes:
        """The first frame."""
        return self._frame({"type": "start", "start": self._start})

    def stdin(self, data: bytes) -> bytes:
        """Frames carrying data to the command's stdin."""
        view = memoryview(data)
        return b"".join(
            self._frame({"type": "stdin", "data": base64.b64encode(view[i : i + STDIN_CHUNK]).decode()})
            for i in range(0, len(view), STDIN_CHUNK)
        )

    def eof(self) -> bytes:
        """The frame that closes the command's stdin."""
        return self._frame({"type": "eof"})

    def signal(self, signum: int) -> bytes:
        """The frame that sends a signal (its number, e.g. 2 for SIGINT) to the command."""
        return self._frame({"type": "signal", "signal": int(signum)})

    def resize(self, rows: int, cols: int) -> bytes:
        """The frame that resizes the command's terminal."""
        return self._frame({"type": "resize", "rows": int(rows), "cols": int(cols)})

    def close(self) -> bytes:
        """The WebSocket close frame (once)."""
        return self.codec.close()

    @property
    def done(self) -> bool:
        """The exit frame came: nothing more is read."""
        return self.result is not None

    def feed(self, data: bytes) -> List[Chunk]:
        """The output chunks completed by received bytes. Raises AirlockError for an error
        frame, TransportError for a connection closed before the exit frame."""
        out: List[Chunk] = []
        for msg in self.codec.feed(data):
            if msg.opcode == CLOSE:
                if self.result is None:
                    raise TransportError(f"interactive exec: the daemon closed the connection before the command exited ({msg.code} {msg.data})")
                break
            if msg.opcode != TEXT:
                continue
            chunk = self._message(str(msg.data))
            if chunk is not None:
                out.append(chunk)
        return out

    def eof_received(self) -> None:
        """The connection ended; an error unless the exit frame came first."""
        if self.result is None:
            raise TransportError("interactive exec: the connection ended before the command exited")

    def _message(self, text: str) -> Optional[Chunk]:
        try:
            f = json.loads(text)
        except ValueError:
            raise TransportError("interactive exec: bad frame from the daemon") from None
        kind = f.get("type")
        if kind in ("stdout", "stderr"):
            return kind, base64.b64decode(f.get("data") or "")
        if kind == "started":
            self.execution_id = f.get("executionId")
        elif kind == "exit":
            if not isinstance(f.get("result"), dict):
                raise TransportError("interactive exec: exit frame without a result")
            self.result = ExecResult.from_dict(f["result"])
            self.execution_id = self.execution_id or self.result.execution_id
        elif kind == "error":
            raise self._error(f.get("error"))
        return None  # frame types this client does not know are ignored

    @staticmethod
    def _error(err: Any) -> AirlockError:
        e = err if isinstance(err, dict) else {"message": "interactive exec failed"}
        return make_error(status_for_code(str(e.get("code"))), e)


class SessionControls(Generic[R]):
    """What the sync and async sessions do alike: each control sends a frame through the
    session's ``_send``, so it returns None on an ExecSession and an awaitable on an
    AsyncExecSession (``await session.write(...)``)."""

    _proto: ExecProtocol

    def _send(self, data: bytes) -> R:
        raise NotImplementedError

    @property
    def execution_id(self) -> Optional[str]:
        """The execution's ID (``exec_...``), from the daemon's ``started`` frame."""
        return self._proto.execution_id

    @property
    def result(self) -> Optional[ExecResult]:
        """The result, once the command exited (after iterating to the end, or ``wait``)."""
        return self._proto.result

    def write(self, data: Union[bytes, str]) -> R:
        """Sends data (text is UTF-8) to the command's stdin."""
        return self._send(self._proto.stdin(data.encode() if isinstance(data, str) else bytes(data)))

    def close_stdin(self) -> R:
        """Closes the command's stdin: it reads EOF."""
        return self._send(self._proto.eof())

    def signal(self, signum: int) -> R:
        """Sends a signal (e.g. ``signal.SIGINT``) to the command's process group."""
        return self._send(self._proto.signal(signum))

    def resize(self, rows: int, cols: int) -> R:
        """Resizes the command's terminal (``tty=True``)."""
        return self._send(self._proto.resize(rows, cols))
