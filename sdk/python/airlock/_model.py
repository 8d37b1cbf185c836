"""The base of the generated wire types (_models.py): decoding from and encoding to the
daemon's camelCase JSON, keeping fields this SDK does not know yet.

Each generated class carries a table, ``_wire``: its wire names, each with the attribute that
holds it and how to decode a nested value (another model, a list of them, or plain JSON).
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Iterable, Mapping, Optional, Tuple, Type, TypeVar, Union

M = TypeVar("M", bound="Model")

# How a field's value is decoded: None (plain JSON), a Model class, or ("list", Model class) or
# ("map", Model class) for a list or a string-keyed object of them.
Codec = Union[None, Type["Model"], Tuple[str, Type["Model"]]]


class Model:
    """A wire type of the API: a dataclass whose attributes are the snake_case names of its
    JSON fields. Fields the SDK does not know (a newer daemon's) are kept in ``_extra`` and
    sent back by :meth:`to_dict`, so nothing is lost in a round trip."""

    #: wire name → (attribute name, codec); set by the generated module.
    _wire: ClassVar[Dict[str, Tuple[str, Codec]]] = {}
    #: attribute name → wire name; set by the generated module.
    _attrs: ClassVar[Dict[str, str]] = {}
    #: the attributes a constructor must be given (the schema's required fields).
    _required: ClassVar[Tuple[str, ...]] = ()

    _extra: Dict[str, Any]

    @classmethod
    def from_dict(cls: Type[M], data: Mapping[str, Any]) -> M:
        """Decodes one JSON object of the wire into this type. A required field the object
        lacks is None; unknown fields are kept (see :meth:`to_dict`)."""
        kw: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        wire = cls._wire
        for key, value in data.items():
            entry = wire.get(key)
            if entry is None:
                extra[key] = value
                continue
            attr, codec = entry
            if codec is not None and value is not None:
                value = _decode(codec, value)
            kw[attr] = value
        for attr in cls._required:
            kw.setdefault(attr, None)
        obj = cls(**kw)
        if extra:
            obj._extra = extra
        return obj

    def to_dict(self) -> Dict[str, Any]:
        """Encodes this value as the wire's JSON object (camelCase names); fields left None are
        omitted, unknown fields kept from :meth:`from_dict` are included."""
        out: Dict[str, Any] = {}
        for attr, key in self._attrs.items():
            value = getattr(self, attr)
            if value is not None:
                out[key] = _encode(value)
        out.update(self._extra)
        return out


def _decode(codec: Codec, value: Any) -> Any:
    if isinstance(codec, tuple):
        kind, cls = codec
        if kind == "list":
            return [cls.from_dict(v) if isinstance(v, dict) else v for v in value]
        return {k: cls.from_dict(v) if isinstance(v, dict) else v for k, v in value.items()}
    assert codec is not None
    return codec.from_dict(value) if isinstance(value, dict) else value


def _encode(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def to_wire(cls: Type[Model], value: Any) -> Any:
    """Turns what a caller passed for a request field of type ``cls`` into the wire's JSON: a
    model instance, or a dict whose keys are the snake_case attribute names or the camelCase
    wire names (both may be mixed; a key that is neither is sent as it is, so that the daemon
    names it in its 400). Keys of free-form maps (environment, metadata) are never renamed."""
    if isinstance(value, Model):
        return value.to_dict()
    if not isinstance(value, Mapping):
        return value
    out: Dict[str, Any] = {}
    for key, item in value.items():
        wire_key = cls._attrs.get(str(key), str(key))
        entry = cls._wire.get(wire_key)
        codec = entry[1] if entry else None
        out[wire_key] = _to_wire_value(codec, item)
    return out


def _to_wire_value(codec: Codec, item: Any) -> Any:
    if item is None or codec is None:
        return _encode(item)
    if isinstance(codec, tuple):
        kind, cls = codec
        if kind == "list" and isinstance(item, (list, tuple)):
            return [to_wire(cls, v) for v in item]
        if kind == "map" and isinstance(item, Mapping):
            return {k: to_wire(cls, v) for k, v in item.items()}
        return _encode(item)
    return to_wire(codec, item)


def finish(classes: Iterable[Type[Model]]) -> None:
    """Completes the generated classes' tables: attribute → wire name."""
    for cls in classes:
        cls._attrs = {attr: wire for wire, (attr, _) in cls._wire.items()}


def wire_object(cls: Type[Model], spec: Optional[Mapping[str, Any]], fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The JSON body of a request of type ``cls``: ``spec`` (a wire dict, or a model) with the
    keyword arguments ``fields`` (snake_case or camelCase; None means "not given") over it."""
    body: Dict[str, Any] = dict(to_wire(cls, spec)) if spec is not None else {}
    body.update(to_wire(cls, {k: v for k, v in fields.items() if v is not None}))
    return body
