#!/usr/bin/env python3
"""Generates airlock/_models.py from the daemon's OpenAPI document (api/openapi.json).

One dataclass per schema of ``components.schemas``, with the fields' snake_case names as
attributes (``memoryMb`` → ``memory_mb``, ``async`` → ``async_``), the schema's required fields
first and without a default, the others ``Optional`` and ``None`` by default. Each class gets the
table that airlock._model.Model decodes and encodes with. Standard library only; run it after
the daemon's API changed (``make openapi`` rewrites the document):

    python3 sdk/python/scripts/gen_models.py          # rewrite airlock/_models.py
    python3 sdk/python/scripts/gen_models.py --check  # exit 1 when it is out of date

tests/test_models.py runs the same check.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
SDK = HERE.parent
DOCUMENT = SDK.parent.parent / "api" / "openapi.json"
OUTPUT = SDK / "airlock" / "_models.py"

# Schemas that get behaviour on top of their fields: name → class in airlock._handles.
MIXINS = {"Sandbox": "SandboxHandle"}

REF = "#/components/schemas/"


def snake(name: str) -> str:
    """The Python attribute for a wire name: camelCase → snake_case; a keyword gets a ``_``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s) or not s.isidentifier():
        s += "_"
    return s


def ref_name(ref: str) -> str:
    if not ref.startswith(REF):
        raise ValueError(f"unsupported $ref {ref!r}")
    return ref[len(REF):]


def annotation(prop: Dict[str, Any]) -> str:
    """The type annotation of a property's schema."""
    if "$ref" in prop:
        return ref_name(prop["$ref"])
    if "oneOf" in prop:
        return "Union[" + ", ".join(annotation(p) for p in prop["oneOf"]) + "]"
    if "enum" in prop:
        return "Literal[" + ", ".join(json.dumps(v) for v in prop["enum"]) + "]"
    t = prop.get("type")
    if t == "array":
        return f"List[{annotation(prop.get('items', {}))}]"
    if t == "object":
        values = prop.get("additionalProperties")
        inner = annotation(values) if isinstance(values, dict) and values else "Any"
        return f"Dict[str, {inner}]"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}.get(t, "Any")


def codec(prop: Dict[str, Any]) -> str:
    """How Model decodes the property: None, a class, or ("list"|"map", class)."""
    if "$ref" in prop:
        return ref_name(prop["$ref"])
    if prop.get("type") == "array" and "$ref" in prop.get("items", {}):
        return f'("list", {ref_name(prop["items"]["$ref"])})'
    values = prop.get("additionalProperties")
    if prop.get("type") == "object" and isinstance(values, dict) and "$ref" in values:
        return f'("map", {ref_name(values["$ref"])})'
    return "None"


def comment(text: str, indent: str) -> List[str]:
    return [f"{indent}#: {line}".rstrip() for line in text.strip().splitlines()]


def fields_of(name: str, schema: Dict[str, Any]) -> List[Tuple[str, str, Dict[str, Any], bool]]:
    """(wire name, attribute, property schema, required), required ones first in the order the
    document lists them, the others sorted."""
    props = schema.get("properties", {})
    required = [f for f in schema.get("required", []) if f in props]
    rest = sorted(f for f in props if f not in required)
    out = []
    seen: Dict[str, str] = {}
    for wire in required + rest:
        attr = snake(wire)
        if attr in seen or attr == "_extra":
            raise ValueError(f"{name}: fields {seen.get(attr)!r} and {wire!r} both map to {attr!r}")
        seen[attr] = wire
        out.append((wire, attr, props[wire], wire in required))
    return out


def render_class(name: str, schema: Dict[str, Any]) -> List[str]:
    base = f"{MIXINS[name]}, Model" if name in MIXINS else "Model"
    doc = schema.get("description") or f"The wire type ``{name}`` of the daemon's API."
    lines = ["", "", "@dataclass", f"class {name}({base}):", f'    """{doc.strip()}"""', ""]
    for wire, attr, prop, required in fields_of(name, schema):
        if prop.get("description"):
            lines += comment(prop["description"], "    ")
        ann = annotation(prop)
        if required:
            lines.append(f"    {attr}: {ann}")
        else:
            lines.append(f"    {attr}: Optional[{ann}] = None")
    lines.append("    _extra: Dict[str, Any] = _field(default_factory=dict, repr=False, compare=False)")
    return lines


def render_table(name: str, schema: Dict[str, Any]) -> List[str]:
    fields = fields_of(name, schema)
    lines = ["", f"{name}._wire = {{"]
    lines += [f'    "{wire}": ("{attr}", {codec(prop)}),' for wire, attr, prop, _ in fields]
    lines.append("}")
    required = [attr for _, attr, _, req in fields if req]
    lines.append(f"{name}._required = {tuple(required)!r}")
    return lines


def generate(doc: Dict[str, Any]) -> str:
    """The text of _models.py for an OpenAPI document."""
    schemas = doc["components"]["schemas"]
    names = sorted(schemas)
    for n in names:
        if schemas[n].get("type") != "object":
            raise ValueError(f"schema {n}: only object schemas are supported")
    mixins = sorted({MIXINS[n] for n in names if n in MIXINS})
    out = [
        "# Code generated by scripts/gen_models.py from api/openapi.json. DO NOT EDIT.",
        '"""The wire types of the daemon\'s API, one dataclass per schema of its OpenAPI document',
        f'(version {doc.get("info", {}).get("version", "?")}). Attributes are the fields\' snake_case names;',
        'date-times are RFC 3339 strings as the daemon sends them."""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from dataclasses import field as _field",
        "from typing import Any, Dict, List, Literal, Optional, Type, Union",
        "",
        "from ._model import Model, finish",
    ]
    if mixins:
        out.append(f"from ._handles import {', '.join(mixins)}")
    out += ["", "__all__ = ["] + [f'    "{n}",' for n in names] + ['    "SCHEMAS",', "]"]
    for n in names:
        out += render_class(n, schemas[n])
    out += ["", "", "# The tables Model decodes and encodes with (after the classes: they refer to each other)."]
    for n in names:
        out += render_table(n, schemas[n])
    out += [
        "",
        "#: Every schema of the document, by its name.",
        "SCHEMAS: Dict[str, Type[Model]] = {",
    ]
    out += [f'    "{n}": {n},' for n in names]
    out += [
        "}",
        "",
        "finish(SCHEMAS.values())",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 when the file is out of date")
    ap.add_argument("--document", type=Path, default=DOCUMENT)
    ap.add_argument("--output", type=Path, default=OUTPUT)
    args = ap.parse_args()
    text = generate(json.loads(args.document.read_text(encoding="utf-8")))
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
    if args.check:
        if current != text:
            print(f"{args.output} is out of date with {args.document}: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
