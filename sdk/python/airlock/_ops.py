"""Operations written once for both clients.

A resource method (``Sandboxes.get``...) only describes its request: it returns a Call (or a
Plan, a Follow, an ExecCall). The decorators below turn it into a method that hands the
description to its client's ``_run``, which a Client executes at once and an AsyncClient
returns as an awaitable. So a method exists once, and Client and AsyncClient cannot drift.

Every decorator names the operations (the OpenAPI document's operationIds) the method covers;
:data:`OPERATIONS` collects them, and a test checks it against the document.
"""

from __future__ import annotations

import functools
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    ClassVar,
    Dict,
    Generic,
    Iterator,
    List,
    TypeVar,
    Union,
    overload,
)

from ._call import Call, Pending, Plan
from ._exec import ExecCall
from ._follow import Follow

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec

    from ._async import AsyncExecSession
    from ._sync import ExecSession

    P = ParamSpec("P")
else:
    P = TypeVar("P")

T = TypeVar("T")

#: operationId → the SDK methods that perform it ("sandboxes.get"), filled as classes are made.
OPERATIONS: Dict[str, List[str]] = {}


class Sync:
    """Marks the resources of a :class:`~airlock.Client`: methods return results."""


class Async:
    """Marks the resources of an :class:`~airlock.AsyncClient`: methods return awaitables."""


Mode = TypeVar("Mode", Sync, Async)


class Resource(Generic[Mode]):
    """A group of operations (``client.sandboxes``, ``client.files``...) bound to a client."""

    #: the attribute of the client that holds this resource ("sandboxes").
    _name: ClassVar[str] = ""

    def __init__(self, client: Any) -> None:
        self._client = client


class _Method(Generic[P, T]):
    """A resource method: calls the describing function, runs the description on the bound
    resource's client. (Its subclasses only tell type checkers what binding gives.)"""

    def __init__(self, fn: Callable[..., Any], ids: tuple) -> None:
        self.fn = fn
        self.ids = ids
        self.name = fn.__name__
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        where = f"{getattr(owner, '_name', '') or owner.__name__}.{name}"
        for op_id in self.ids:
            OPERATIONS.setdefault(op_id, []).append(where)

    def _bind(self, obj: Any) -> Callable[..., Any]:
        fn, run = self.fn, obj._client._run

        def method(*args: Any, **kwargs: Any) -> Any:
            return run(fn(obj, *args, **kwargs))

        functools.update_wrapper(method, fn)
        obj.__dict__[self.name] = method  # found first from now on
        return method

    if not TYPE_CHECKING:

        def __get__(self, obj, owner):
            return self if obj is None else self._bind(obj)


class _Operation(_Method[P, T]):
    """A method that returns its result on a Client, an awaitable of it on an AsyncClient."""

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: Any) -> "_Operation[P, T]": ...
        @overload
        def __get__(self, obj: "Resource[Sync]", owner: Any) -> Callable[P, T]: ...
        @overload
        def __get__(self, obj: "Resource[Async]", owner: Any) -> Callable[P, Pending[T]]: ...
        def __get__(self, obj: Any, owner: Any) -> Any: ...


class _StreamOperation(_Method[P, T]):
    """A method that follows a stream: an iterator on a Client, an async iterator on an
    AsyncClient."""

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: Any) -> "_StreamOperation[P, T]": ...
        @overload
        def __get__(self, obj: "Resource[Sync]", owner: Any) -> Callable[P, Iterator[T]]: ...
        @overload
        def __get__(self, obj: "Resource[Async]", owner: Any) -> Callable[P, AsyncIterator[T]]: ...
        def __get__(self, obj: Any, owner: Any) -> Any: ...


class _SessionOperation(_Method[P, Any]):
    """A method that opens an interactive exec: an ExecSession on a Client, an
    AsyncExecSession on an AsyncClient."""

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: Any) -> "_SessionOperation[P]": ...
        @overload
        def __get__(self, obj: "Resource[Sync]", owner: Any) -> Callable[P, ExecSession]: ...
        @overload
        def __get__(self, obj: "Resource[Async]", owner: Any) -> Callable[P, AsyncExecSession]: ...
        def __get__(self, obj: Any, owner: Any) -> Any: ...


def operation(*ids: str) -> Callable[[Callable[Concatenate[Any, P], Union[Call[T], Plan[T]]]], _Operation[P, T]]:
    """Makes a method that returns a Call or a Plan into an operation (see the module)."""
    return lambda fn: _Operation(fn, ids)


def stream(*ids: str) -> Callable[[Callable[Concatenate[Any, P], Follow[T]]], _StreamOperation[P, T]]:
    """Makes a method that returns a Follow into a followed stream."""
    return lambda fn: _StreamOperation(fn, ids)


def session(*ids: str) -> Callable[[Callable[Concatenate[Any, P], ExecCall]], _SessionOperation[P]]:
    """Makes a method that returns an ExecCall into an interactive exec."""
    return lambda fn: _SessionOperation(fn, ids)
