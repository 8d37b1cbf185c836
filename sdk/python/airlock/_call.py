"""What one operation sends and how its answer is read, as plain data: the resources build
these descriptions once, and the sync and async transports execute them. Nothing here does
I/O."""

from __future__ import annotations

import json
import math
from typing import (
    IO,
    Any,
    Awaitable,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)
from urllib.parse import quote, urlencode

from ._errors import TransportError, error_from_answer
from ._handles import SandboxHandle
from ._model import Model
from ._models import Fork

T = TypeVar("T")

#: A request body: bytes as they are, a binary file object or an iterable of bytes (streamed).
Body = Union[bytes, bytearray, memoryview, IO[bytes], Iterable[bytes], None]

#: Call.timeout for a call that may last as long as it likes (a stream, an exec without one).
NO_TIMEOUT = math.inf

# How an answer is decoded: (status, lowercase headers, body) → the result.
Decoder = Callable[[int, Mapping[str, str], bytes], Any]


def escape(segment: str) -> str:
    """One path segment, escaped (an ID cannot reach another route)."""
    return quote(str(segment), safe="")


def sandbox_path(id: str, rest: str = "") -> str:
    """The path /api/v1/sandboxes/{id} followed by rest."""
    return f"/api/v1/sandboxes/{escape(id)}{rest}"


def query(**params: Any) -> List[Tuple[str, str]]:
    """Query pairs of the parameters that are set: None is left out, a bool is true/false, a
    list repeats the name."""
    out: List[Tuple[str, str]] = []
    for name, value in params.items():
        if value is None:
            continue
        for v in value if isinstance(value, (list, tuple)) else (value,):
            out.append((name, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return out


def present(**fields: Any) -> Dict[str, Any]:
    """A JSON body of the fields that are set (not None), named as given."""
    return {k: v for k, v in fields.items() if v is not None}


class Call(Generic[T]):
    """One HTTP exchange. ``decode`` turns a 2xx answer into the result; any other status is an
    AirlockError, except those in ``tolerate``, which give None."""

    __slots__ = ("method", "path", "params", "json", "body", "content_type", "accept", "decode",
                 "timeout", "tolerate", "headers", "sink")

    def __init__(
        self,
        method: str,
        path: str,
        decode: Decoder,
        *,
        params: Sequence[Tuple[str, str]] = (),
        json: Any = None,
        body: Body = None,
        content_type: Optional[str] = None,
        accept: str = "application/json",
        timeout: Optional[float] = None,
        tolerate: Tuple[int, ...] = (),
        headers: Optional[Dict[str, str]] = None,
        sink: Optional[IO[bytes]] = None,
    ) -> None:
        self.method = method
        self.path = path
        self.params = params
        self.json = json
        self.body = body
        self.content_type = content_type
        self.accept = accept
        self.decode = decode
        #: seconds a read or write may wait; None: the client's; NO_TIMEOUT: forever.
        self.timeout = timeout
        self.tolerate = tolerate
        self.headers = headers
        #: when set, the answer's body is written here as it arrives instead of being decoded.
        self.sink = sink

    def target(self, prefix: str) -> str:
        """The request target: the base URL's path, the API path and the query."""
        t = prefix + self.path
        return t + "?" + urlencode(self.params) if self.params else t

    def payload(self) -> Tuple[Body, Optional[str]]:
        """The body to send and its Content-Type."""
        if self.json is not None:
            return json.dumps(self.json, separators=(",", ":")).encode(), "application/json"
        return self.body, self.content_type

    def result(self, status: int, headers: Mapping[str, str], body: bytes) -> T:
        """The call's result for a whole answer (or the AirlockError it stands for)."""
        if 200 <= status < 300:
            return self.decode(status, headers, body)
        if status in self.tolerate:
            return None  # type: ignore[return-value]
        raise error_from_answer(status, headers, body)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as e:
        raise TransportError(f"the daemon's answer is not JSON: {e}") from None


def _build(model: Any, data: Any) -> Any:
    if model is None or data is None:
        return data
    if isinstance(model, list):
        return [model[0].from_dict(d) for d in data]
    return model.from_dict(data)


def envelope(model: Any = None) -> Decoder:
    """Reads ``{"ok": true, "data": ...}``; ``model`` is a Model class, ``[Model]`` for a list,
    or None for the data as JSON."""

    def decode(status: int, headers: Mapping[str, str], body: bytes) -> Any:
        doc = _json(body)
        if not isinstance(doc, dict) or doc.get("ok") is not True:
            raise error_from_answer(status if status >= 400 else 500, headers, body)
        return _build(model, doc.get("data"))

    return decode


def bare(model: Any = None) -> Decoder:
    """Reads seed 002's answers: the object itself, no envelope; no body (204) is None."""

    def decode(status: int, headers: Mapping[str, str], body: bytes) -> Any:
        if status == 204 or not body:
            return None
        return _build(model, _json(body))

    return decode


def raw(status: int, headers: Mapping[str, str], body: bytes) -> bytes:
    """The body's bytes."""
    return body


def text(status: int, headers: Mapping[str, str], body: bytes) -> str:
    """The body as text."""
    return body.decode("utf-8", "replace")


def document(status: int, headers: Mapping[str, str], body: bytes) -> Any:
    """The body as JSON, without an envelope."""
    return _json(body)


def bind(result: Any, client: Any) -> Any:
    """Lets sandboxes in a result terminate themselves (``with``) through ``client``."""
    if isinstance(result, SandboxHandle):
        result._client = client
    elif isinstance(result, list):
        for item in result:
            if isinstance(item, SandboxHandle):
                item._client = client
    elif isinstance(result, Fork):
        bind(result.sandboxes, client)
    return result


class Plan(Generic[T]):
    """An operation of several calls (e.g. uploading a directory): a generator that yields
    Calls, is sent each one's result, and returns the operation's result."""

    __slots__ = ("steps",)

    def __init__(self, steps: Generator[Call[Any], Any, T]) -> None:
        self.steps = steps


class Pending(Generic[T]):
    """What an AsyncClient method returns: await it for the result. When the result is a
    sandbox, ``async with`` works on it directly and terminates the sandbox at the end::

        async with client.sandboxes.create(name="t") as sb: ...
    """

    __slots__ = ("_awaitable", "_result")

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._awaitable = awaitable
        self._result: Any = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._awaitable.__await__()

    async def __aenter__(self) -> T:
        self._result = await self._awaitable
        return await self._result.__aenter__()  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._result.__aexit__(*exc)


def model_list(cls: Type[Model]) -> List[Type[Model]]:
    """The ``model`` argument of :func:`envelope` for a list of ``cls``."""
    return [cls]
