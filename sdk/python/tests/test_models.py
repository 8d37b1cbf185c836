"""The models and the operation table against the daemon's OpenAPI document (api/openapi.json),
without a daemon: _models.py is what the generator makes of the document today, every schema
and field has its model and attribute, every operation an SDK method that sends it."""

from __future__ import annotations

import inspect
import io
import json
import re
import unittest
from typing import Any, Dict, List, Tuple

import harness

import airlock
from airlock import _models
from airlock._call import Call, Plan
from airlock._exec import ExecCall
from airlock._follow import Follow
from airlock._model import to_wire, wire_object
from airlock._ops import OPERATIONS, Resource, _Method

DOCUMENT = harness.REPO / "api" / "openapi.json"


def load_generator() -> Any:
    return harness.load_script(harness.SDK / "scripts" / "gen_models.py")


def document() -> Dict[str, Any]:
    with open(DOCUMENT, encoding="utf-8") as f:
        return json.load(f)


class Generated(unittest.TestCase):
    def test_models_are_up_to_date(self) -> None:
        gen = load_generator()
        text = gen.generate(document())
        committed = (harness.SDK / "airlock" / "_models.py").read_text(encoding="utf-8")
        self.assertTrue(text == committed, "airlock/_models.py is out of date with api/openapi.json "
                        "(the daemon's API changed): run python3 sdk/python/scripts/gen_models.py")

    def test_every_schema_and_field_has_a_model(self) -> None:
        schemas = document()["components"]["schemas"]
        self.assertEqual(sorted(_models.SCHEMAS), sorted(schemas))
        for name, schema in schemas.items():
            cls = _models.SCHEMAS[name]
            props = schema.get("properties", {})
            self.assertEqual(sorted(cls._wire), sorted(props), name)
            for wire, (attr, _) in cls._wire.items():
                self.assertIn(attr, cls.__dataclass_fields__, f"{name}.{wire}")
            required = {cls._wire[w][0] for w in schema.get("required", []) if w in props}
            self.assertEqual(set(cls._required), required, name)

    def test_snake_case(self) -> None:
        snake = load_generator().snake
        cases = {"memoryMb": "memory_mb", "oomKilled": "oom_killed", "sandbox_id": "sandbox_id",
                 "peakMemoryMb": "peak_memory_mb", "async": "async_", "from": "from_", "ID": "id",
                 "publicURL": "public_url", "hitRate": "hit_rate", "cpu": "cpu"}
        for wire, attr in cases.items():
            self.assertEqual(snake(wire), attr, wire)


class Models(unittest.TestCase):
    def test_round_trip_keeps_unknown_fields(self) -> None:
        wire = {"seq": 7, "time": "t", "stream": "event", "timestamp": "t", "message": "m",
                "event": {"id": "evt_1", "type": "x", "time": "t", "sandboxId": "sbx_1", "data": {"k": [1]},
                          "grownField": 1},
                "newerField": {"a": 1}}
        e = airlock.LogEntry.from_dict(wire)
        self.assertEqual((e.seq, e.timestamp, e.message, e.event.sandbox_id), (7, "t", "m", "sbx_1"))
        self.assertIsInstance(e.event, airlock.Event)
        self.assertEqual(e._extra, {"newerField": {"a": 1}})
        self.assertEqual(e.to_dict(), wire)

    def test_lists_and_required_fields(self) -> None:
        r = airlock.ExecResult.from_dict({"exitCode": 1, "limitEvents": [{"type": "limit.memory"}]})
        self.assertEqual(r.exit_code, 1)
        self.assertIsNone(r.stdout)  # required, but absent: None rather than a failure
        self.assertIsInstance(r.limit_events[0], airlock.LimitEvent)
        t = airlock.Transition.from_dict({"from": "ready", "to": "running", "reason": "exec", "at": "t"})
        self.assertEqual(t.from_, "ready")

    def test_keywords_to_the_wire(self) -> None:
        body = wire_object(airlock.SpecInput, {"isolation": "process", "resources": {"diskMb": 1}}, {
            "agent_id": "scanner",
            "resources": {"cpu": "2.0", "memory_mb": 4096, "gpuEnabled": False},
            "network": airlock.Network(egress_policy="restricted", allowed_domains=["a.com"]),
            "volumes": [{"name": "data", "path": "/data", "read_only": True}],
            "environment": {"snake_case_var": "kept"},
            "metadata": None,
        })
        self.assertEqual(body, {
            "isolation": "process",
            "agentId": "scanner",
            "resources": {"cpu": "2.0", "memoryMb": 4096, "gpuEnabled": False},
            "network": {"egressPolicy": "restricted", "allowedDomains": ["a.com"]},
            "volumes": [{"name": "data", "path": "/data", "readOnly": True}],
            "environment": {"snake_case_var": "kept"},
        })
        self.assertEqual(to_wire(airlock.Resources, {"memory_mbb": 1}), {"memory_mbb": 1})  # the daemon names it


class _FakeClient:
    is_async = False

    def _run(self, op: Any) -> Any:
        return op


# Arguments for the required parameters of the operations, by name.
_ARGS = {"data": b"x", "command": "true", "code": "print(1)", "url": "https://example.com/h",
         "dest": io.BytesIO(), "local_dir": ".", "sandbox_dir": "/w"}


def _describe(resource: Resource, method: _Method) -> List[Any]:
    """What the method sends with its required arguments, and with a sandbox ID too where that
    is optional (snapshots.list, events.list: a sandbox's or the tenant's)."""
    args, kwargs = [], {}
    for p in list(inspect.signature(method.fn).parameters.values())[1:]:
        if p.default is inspect.Parameter.empty and p.kind == p.POSITIONAL_OR_KEYWORD:
            args.append(_ARGS.get(p.name, f"P-{p.name}"))
        elif p.name in ("id", "sandbox_id"):
            kwargs[p.name] = "P-sandbox"
    return [method.fn(resource, *args), method.fn(resource, *args, **kwargs)]


def _request(desc: Any) -> Tuple[str, str]:
    if isinstance(desc, Follow):
        desc = desc.call()
    if isinstance(desc, ExecCall):
        return "GET", desc.path
    assert isinstance(desc, Call), desc
    return desc.method, desc.path


class Operations(unittest.TestCase):
    def routes(self) -> Dict[str, Tuple[str, str]]:
        out = {}
        for path, item in document()["paths"].items():
            for method, op in item.items():
                if isinstance(op, dict) and "operationId" in op:
                    out[op["operationId"]] = (method.upper(), path)
        return out

    def test_every_operation_has_a_method(self) -> None:
        routes = self.routes()
        missing = sorted(set(routes) - set(OPERATIONS))
        self.assertEqual(missing, [], "operations of the daemon the SDK lacks")
        stale = sorted(set(OPERATIONS) - set(routes))
        self.assertEqual(stale, [], "SDK methods of operations the daemon no longer has")
        client = airlock.Client("k", "http://127.0.0.1:1")
        for methods in OPERATIONS.values():
            for where in methods:
                obj: Any = client
                for part in where.split(".")[1 if where.startswith("client.") else 0 :]:
                    obj = getattr(obj, part)
                self.assertTrue(callable(obj), where)

    def test_every_method_sends_its_operation(self) -> None:
        routes = self.routes()
        fake = _FakeClient()
        sent = set()
        for cls in _resource_classes():
            resource = cls(fake)
            for name, method in vars(cls).items():
                if not isinstance(method, _Method) or not method.ids:
                    continue
                for desc in _describe(resource, method):
                    if isinstance(desc, Plan):
                        continue
                    verb, path = _request(desc)
                    ok = [verb == routes[op_id][0] and _route(routes[op_id][1]).match(path) is not None
                          for op_id in method.ids]
                    self.assertTrue(any(ok), f"{cls.__name__}.{name} sends {verb} {path}, not {method.ids}")
                    sent |= {op_id for op_id, good in zip(method.ids, ok) if good}
        # POST .../terminate is the same operation as DELETE .../{id}, which terminate sends.
        self.assertEqual(set(routes) - sent, {"post-api-v1-sandboxes-by-id-terminate"})


def _route(template: str) -> "re.Pattern[str]":
    """A path template of the document as a pattern: {param} is one escaped segment."""
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")


def _resource_classes() -> List[type]:
    from airlock import _admin, _compat, _files, _sandboxes, _snapshots, _tools

    out = []
    for mod in (_admin, _compat, _files, _sandboxes, _snapshots, _tools):
        out += [c for c in vars(mod).values() if isinstance(c, type) and issubclass(c, Resource) and c is not Resource]
    return out
