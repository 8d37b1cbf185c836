"""The daemon-wide surfaces: warm pools and images (changed with an admin key only),
webhooks, what the operator lends tenants (volumes, templates), tenants' quotas, and the
daemon's own routes (health, capabilities, the API document, Prometheus metrics)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._call import NO_TIMEOUT, Call, document, envelope, escape, present, query, text
from ._model import wire_object
from ._models import (
    Capabilities,
    Health,
    Image,
    ImageRemoval,
    PoolInput,
    PoolStatus,
    TemplateInfo,
    Tenant,
    VolumeInfo,
    Webhook,
    WebhookDelivery,
)
from ._ops import Mode, Resource, operation


def _image_path(ref: str) -> str:
    # The route takes the rest of the path: a reference's slashes stay, the rest is escaped.
    return "/api/v1/images/" + "/".join(escape(part) for part in ref.split("/"))


class Pools(Resource[Mode]):
    """``client.pools``: the daemon's warm pools, shared by every tenant; a create whose spec
    has a pool's shape gets one of its ready sandboxes. Every key lists them; only an admin
    key makes or removes them (ForbiddenError otherwise)."""

    _name = "pools"

    @operation("get-api-v1-pools")
    def list(self) -> Call[List[PoolStatus]]:
        """The pools with their counters, sorted by name."""
        return Call("GET", "/api/v1/pools", envelope([PoolStatus]))

    @operation("get-api-v1-pools-by-name")
    def get(self, name: str) -> Call[PoolStatus]:
        """One pool with its counters."""
        return Call("GET", f"/api/v1/pools/{escape(name)}", envelope(PoolStatus))

    @operation("put-api-v1-pools-by-name")
    def put(
        self,
        name: str,
        pool: Optional[Mapping[str, Any]] = None,
        *,
        spec: Optional[Mapping[str, Any]] = None,
        size: Optional[int] = None,
        refill_per_second: Optional[float] = None,
        max_age_seconds: Optional[int] = None,
    ) -> Call[PoolStatus]:
        """Makes or replaces pool ``name`` (its unclaimed sandboxes end): ``spec`` is the
        sandboxes' shape (as :meth:`Sandboxes.create` takes it, without claim-time fields
        such as ``environment``), ``size`` how many it keeps ready. (admin key)"""
        fields = dict(spec=spec, size=size, refill_per_second=refill_per_second, max_age_seconds=max_age_seconds)
        return Call("PUT", f"/api/v1/pools/{escape(name)}", envelope(PoolStatus),
                    json=wire_object(PoolInput, pool, fields))

    @operation("delete-api-v1-pools-by-name")
    def delete(self, name: str) -> Call[PoolStatus]:
        """Removes a pool made through the API, ending its unclaimed sandboxes; returns its
        last status. (admin key)"""
        return Call("DELETE", f"/api/v1/pools/{escape(name)}", envelope(PoolStatus))


class Images(Resource[Mode]):
    """``client.images``: the daemon host's image store. Every key lists it; only an admin key
    pulls, removes or prunes."""

    _name = "images"

    @operation("get-api-v1-images")
    def list(self) -> Call[List[Image]]:
        """The stored images, sorted by ref."""
        return Call("GET", "/api/v1/images", envelope([Image]))

    @operation("get-api-v1-images-by-ref")
    def get(self, ref: str) -> Call[Image]:
        """One image, by its ref (``python:3.12-slim``) or manifest digest (``sha256:...``)."""
        return Call("GET", _image_path(ref), envelope(Image))

    @operation("post-api-v1-images")
    def pull(self, ref: str) -> Call[Image]:
        """Pulls ``ref`` with the host's registry credentials; returns the image once it is
        unpacked. (admin key)"""
        return Call("POST", "/api/v1/images", envelope(Image), json={"ref": ref}, timeout=NO_TIMEOUT)

    @operation("delete-api-v1-images-by-ref")
    def remove(self, ref: str) -> Call[ImageRemoval]:
        """Removes ``ref`` (a digest removes every ref of it) and the layers nothing else
        uses. (admin key)"""
        return Call("DELETE", _image_path(ref), envelope(ImageRemoval))

    @operation("post-api-v1-images-prune")
    def prune(self) -> Call[ImageRemoval]:
        """Deletes the layers no image refers to, except those a live sandbox uses. (admin key)"""
        return Call("POST", "/api/v1/images/prune", envelope(ImageRemoval))


class Webhooks(Resource[Mode]):
    """``client.webhooks``: the tenant's events delivered to a URL, signed with HMAC-SHA256,
    retried with backoff, each delivery logged."""

    _name = "webhooks"

    @operation("post-api-v1-webhooks")
    def create(
        self,
        url: str,
        *,
        events: Optional[Sequence[str]] = None,
        secret: Optional[str] = None,
        description: Optional[str] = None,
    ) -> Call[Webhook]:
        """Registers a webhook for the event types ``events`` (all when left out); returns it
        with its secret, which is shown only now (generated when not given)."""
        body = present(url=url, events=events, secret=secret, description=description)
        return Call("POST", "/api/v1/webhooks", envelope(Webhook), json=body)

    @operation("get-api-v1-webhooks")
    def list(self) -> Call[List[Webhook]]:
        """The tenant's webhooks with their counters."""
        return Call("GET", "/api/v1/webhooks", envelope([Webhook]))

    @operation("get-api-v1-webhooks-by-webhookId")
    def get(self, webhook_id: str) -> Call[Webhook]:
        """One webhook with its counters."""
        return Call("GET", f"/api/v1/webhooks/{escape(webhook_id)}", envelope(Webhook))

    @operation("delete-api-v1-webhooks-by-webhookId")
    def delete(self, webhook_id: str) -> Call[Webhook]:
        """Removes a webhook and its delivery log; returns it as it was."""
        return Call("DELETE", f"/api/v1/webhooks/{escape(webhook_id)}", envelope(Webhook))

    @operation("get-api-v1-webhooks-by-webhookId-deliveries")
    def deliveries(self, webhook_id: str, *, limit: Optional[int] = None) -> Call[List[WebhookDelivery]]:
        """The most recent deliveries, newest first (``limit``: default 100, at most 1000)."""
        return Call("GET", f"/api/v1/webhooks/{escape(webhook_id)}/deliveries", envelope([WebhookDelivery]),
                    params=query(limit=limit))

    @operation("post-api-v1-webhooks-by-webhookId-test")
    def test(self, webhook_id: str) -> Call[WebhookDelivery]:
        """Sends a ``webhook.test`` event now; returns the delivery (delivered, or failed and
        why)."""
        return Call("POST", f"/api/v1/webhooks/{escape(webhook_id)}/test", envelope(WebhookDelivery))


class Volumes(Resource[Mode]):
    """``client.volumes``: the operator's named host directories this key may mount."""

    _name = "volumes"

    @operation("get-api-v1-volumes")
    def list(self) -> Call[List[VolumeInfo]]:
        """The volumes the key may use (an admin key: all, with host paths)."""
        return Call("GET", "/api/v1/volumes", envelope([VolumeInfo]))


class Templates(Resource[Mode]):
    """``client.templates``: the operator's root filesystem templates this key may name."""

    _name = "templates"

    @operation("get-api-v1-templates")
    def list(self) -> Call[List[TemplateInfo]]:
        """The templates the key may use (an admin key: all, with host paths)."""
        return Call("GET", "/api/v1/templates", envelope([TemplateInfo]))


class Tenants(Resource[Mode]):
    """``client.tenants``: quotas and usage."""

    _name = "tenants"

    @operation("get-api-v1-tenants")
    def list(self) -> Call[List[Tenant]]:
        """The key's tenant's quota and usage (an admin key: every tenant's)."""
        return Call("GET", "/api/v1/tenants", envelope([Tenant]))


class DaemonOperations(Resource[Mode]):
    """The daemon's own routes, as methods of the client itself."""

    _name = "client"

    @operation("get-healthz")
    def health(self) -> Call[Health]:
        """The daemon's health (needs no key)."""
        return Call("GET", "/healthz", envelope(Health))

    @operation("get-api-v1-capabilities")
    def capabilities(self) -> Call[Capabilities]:
        """The isolation levels and features this daemon's host offers, and why not."""
        return Call("GET", "/api/v1/capabilities", envelope(Capabilities))

    @operation("get-api-v1-openapi-json")
    def openapi(self) -> Call[Dict[str, Any]]:
        """The daemon's OpenAPI document, as JSON (needs no key)."""
        return Call("GET", "/api/v1/openapi.json", document)

    @operation("get-metrics")
    def prometheus_metrics(self) -> Call[str]:
        """The daemon's Prometheus metrics, in the text exposition format (needs no key)."""
        return Call("GET", "/metrics", text, accept="text/plain")
