"""Behaviour that generated models carry beyond their fields."""

from __future__ import annotations

from typing import Any, TypeVar

H = TypeVar("H", bound="SandboxHandle")


class SandboxHandle:
    """Makes a :class:`~airlock.Sandbox` a context manager that terminates it when the block
    leaves, also when it leaves by an exception::

        with client.sandboxes.create(name="t") as sb:
            client.sandboxes.exec(sb.id, "echo hi")

        async with client.sandboxes.create(name="t") as sb:      # AsyncClient
            await client.sandboxes.exec(sb.id, "echo hi")

    A sandbox that has already ended (404, 409) is no error. The sandbox remembers the client
    that returned it; one decoded by hand (``Sandbox.from_dict``) has none and cannot do this.
    """

    #: the Client or AsyncClient that returned this sandbox; set by the client.
    _client: Any = None
    id: str

    def _owner(self, want_async: bool) -> Any:
        client = self._client
        if client is None:
            raise TypeError("this Sandbox was not returned by a client: it cannot terminate itself")
        if client.is_async != want_async:
            hint = "async with" if client.is_async else "with"
            raise TypeError(f"a Sandbox of {type(client).__name__} is used with '{hint}'")
        return client

    def __enter__(self: H) -> H:
        self._owner(False)
        return self

    def __exit__(self, *exc: object) -> None:
        self._owner(False).sandboxes.terminate(self.id, missing_ok=True)

    async def __aenter__(self: H) -> H:
        self._owner(True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._owner(True).sandboxes.terminate(self.id, missing_ok=True)
