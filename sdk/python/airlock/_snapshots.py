"""Snapshots (save, list, restore, fork) and the audit events (a page, or followed)."""

from __future__ import annotations

import datetime as dt
from typing import Any, List, Optional, Union

from ._call import Call, envelope, escape, present, query, sandbox_path
from ._follow import Follow
from ._models import AuditVerification, Event, EventPage, Fork, Restore, Snapshot
from ._ops import Mode, Resource, operation, stream

#: How long a snapshot, a restore or a fork may take (a memory image is large).
SNAPSHOT_TIMEOUT = 600.0

#: A time filter: an RFC 3339 string, or a datetime (a naive one is taken as UTC).
Time = Union[str, dt.datetime, None]


def _time(t: Time) -> Optional[str]:
    if isinstance(t, dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        return t.isoformat()
    return t


class Snapshots(Resource[Mode]):
    """``client.snapshots``: a snapshot is its tenant's and outlives the sandbox it was taken
    of, until it is deleted. ``client.sandboxes.create(from_snapshot=...)`` starts a sandbox
    from one."""

    _name = "snapshots"

    @operation("post-api-v1-sandboxes-by-id-snapshots")
    def create(
        self,
        id: str,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        memory: Optional[bool] = None,
    ) -> Call[Snapshot]:
        """Saves the sandbox's state (its files, and its memory where the level can, unless
        ``memory=False``)."""
        return Call("POST", sandbox_path(id, "/snapshots"), envelope(Snapshot),
                    json=present(name=name, description=description, memory=memory), timeout=SNAPSHOT_TIMEOUT)

    @operation("get-api-v1-sandboxes-by-id-snapshots", "get-api-v1-snapshots")
    def list(self, id: Optional[str] = None) -> Call[List[Snapshot]]:
        """The snapshots of sandbox ``id``, newest first; without it, every snapshot of the
        tenant, those of ended sandboxes included."""
        path = sandbox_path(id, "/snapshots") if id else "/api/v1/snapshots"
        return Call("GET", path, envelope([Snapshot]))

    @operation("get-api-v1-snapshots-by-snapshotId")
    def get(self, snapshot_id: str) -> Call[Snapshot]:
        """One snapshot."""
        return Call("GET", f"/api/v1/snapshots/{escape(snapshot_id)}", envelope(Snapshot))

    @operation("delete-api-v1-snapshots-by-snapshotId")
    def delete(self, snapshot_id: str) -> Call[Snapshot]:
        """Deletes a snapshot; returns it as it was."""
        return Call("DELETE", f"/api/v1/snapshots/{escape(snapshot_id)}", envelope(Snapshot))

    @operation("post-api-v1-sandboxes-by-id-restore")
    def restore(self, id: str, snapshot_id: str) -> Call[Restore]:
        """Puts the sandbox back in a snapshot's state; returns seed 000's answer (``id``,
        ``state: "ready"``, ``restored_from``, ``restored_at``) beside the sandbox's fields."""
        return Call("POST", sandbox_path(id, "/restore"), envelope(Restore), json={"snapshotId": snapshot_id},
                    timeout=SNAPSHOT_TIMEOUT)

    @operation("post-api-v1-sandboxes-by-id-fork")
    def fork(
        self,
        id: str,
        *,
        count: Optional[int] = None,
        name: Optional[str] = None,
        memory: Optional[bool] = None,
    ) -> Call[Fork]:
        """Snapshots the sandbox now and starts ``count`` sandboxes (1 to 64, default 1) from
        that snapshot, named ``<name>-<i>``; returns ``{snapshot, sandboxes}``."""
        return Call("POST", sandbox_path(id, "/fork"), envelope(Fork),
                    json=present(count=count, name=name, memory=memory), timeout=SNAPSHOT_TIMEOUT)


class Events(Resource[Mode]):
    """``client.events``: the audit events of the tenant, or of one sandbox (``sandbox_id``),
    oldest first. ``type`` is a prefix (``"exec."``, ``"network.connect"``)."""

    _name = "events"

    @operation("get-api-v1-events", "get-api-v1-sandboxes-by-id-events")
    def list(
        self,
        *,
        sandbox_id: Optional[str] = None,
        type: Optional[str] = None,
        execution_id: Optional[str] = None,
        since: Time = None,
        until: Time = None,
        after: Optional[int] = None,
        limit: Optional[int] = None,
    ) -> Call[EventPage]:
        """One page of events (``events`` and ``next``): pass ``page.next`` as ``after`` for
        the following one. ``since``/``until`` bound their times; ``limit`` is at most 10000."""
        path = sandbox_path(sandbox_id, "/events") if sandbox_id else "/api/v1/events"
        params = query(type=type, executionId=execution_id, since=_time(since), until=_time(until),
                       after=after, limit=limit)
        return Call("GET", path, envelope(EventPage), params=params)

    @operation("get-api-v1-audit-verify")
    def verify(self) -> Call[AuditVerification]:
        """Walks the daemon's audit log's hash chain (every tenant's events are one chain) and
        says whether every event is what the daemon wrote (``intact``), or where it first breaks
        (``problem``). A tenant key's answer may be up to a minute old and names none of another
        tenant's events; an admin key's is fresh."""
        return Call("GET", "/api/v1/audit/verify", envelope(AuditVerification))

    @stream("get-api-v1-events", "get-api-v1-sandboxes-by-id-events")
    def follow(
        self,
        *,
        sandbox_id: Optional[str] = None,
        type: Optional[str] = None,
        execution_id: Optional[str] = None,
        since: Time = None,
        until: Time = None,
        after: int = 0,
    ) -> Follow[Event]:
        """The events as they are written (server-sent events), starting after ``after``. A
        dropped connection is resumed with ``Last-Event-ID``, no event twice. A sandbox's
        stream ends once it is terminated; the tenant's never does (break out of it)."""
        path = sandbox_path(sandbox_id, "/events") if sandbox_id else "/api/v1/events"

        def params(last: Any) -> Any:
            return query(type=type, executionId=execution_id, since=_time(since), until=_time(until),
                         after=after or None, follow=True)

        return Follow(path=path, params=params, event="event", model=Event, last=after, resume_header=True,
                      page=lambda data: list((data or {}).get("events") or ()),
                      what=f"the events of {sandbox_id}" if sandbox_id else "events")
