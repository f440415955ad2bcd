"""Hypothesis strategies for any protobuf request, read from its descriptor: every field
filled or left out, strings from the whole of Unicode (controls, bidi marks, very long
ones), numbers at their limits, enum numbers no value has, nested messages a few levels
deep, lists of a few items."""

from __future__ import annotations

from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

_INT32 = st.one_of(st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)]), st.integers(-1000, 1000))
_INT64 = st.one_of(st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63)]), st.integers(-(2**40), 2**40))
_UINT = st.integers(0, 2**32 - 1)
_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "0", "1", "𝟙", "١", "-1", "9" * 30, "a\u202eb", "\x00", "../x"]),
    st.just("x" * 5000),
)
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_STRING: _TEXT,
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=64),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_INT32: _INT32,
    FieldDescriptor.TYPE_SINT32: _INT32,
    FieldDescriptor.TYPE_SFIXED32: _INT32,
    FieldDescriptor.TYPE_INT64: _INT64,
    FieldDescriptor.TYPE_SINT64: _INT64,
    FieldDescriptor.TYPE_SFIXED64: _INT64,
    FieldDescriptor.TYPE_UINT32: _UINT,
    FieldDescriptor.TYPE_FIXED32: _UINT,
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: st.integers(0, 2**64 - 1),
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True, allow_infinity=True),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32, allow_nan=True, allow_infinity=True),
}


def requests(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of ``descriptor``'s type, any of their fields set or not."""
    cls = message_factory.GetMessageClass(descriptor)
    fields = {f.name: st.none() | _value(f, depth) for f in descriptor.fields}
    return st.fixed_dictionaries(fields).map(lambda values: _build(cls, values))


def _value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = (
            field.message_type.fields_by_name["key"],
            field.message_type.fields_by_name["value"],
        )
        return st.dictionaries(_single(key, depth), _single(value, depth), max_size=3)
    one = _single(field, depth)
    return st.lists(one, max_size=3) if field.is_repeated else one


def _single(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.message_type is not None:
        if depth >= 3:
            return st.just(message_factory.GetMessageClass(field.message_type)())
        return requests(field.message_type, depth + 1)
    if field.enum_type is not None:
        known = [v.number for v in field.enum_type.values]
        return st.sampled_from(known) | st.integers(-5, 1000)
    return _SCALARS[field.type]


def _build(cls: type[Message], values: dict[str, Any]) -> Message:
    message = cls()
    for name, value in values.items():
        if value is None:
            continue
        target = getattr(message, name)
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, Message):
                    target[k].CopyFrom(v)
                else:
                    target[k] = v
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    target.add().CopyFrom(item)
                else:
                    target.append(item)
        elif isinstance(value, Message):
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


# --- mutations of a valid request ---------------------------------------------------------

FieldPath = tuple[str, ...]


def field_paths(descriptor: Descriptor, depth: int = 0) -> list[tuple[FieldPath, FieldDescriptor]]:
    """Every field of the message, and of its singular message fields two levels down."""
    found: list[tuple[FieldPath, FieldDescriptor]] = []
    for field in descriptor.fields:
        found.append(((field.name,), field))
        message = field.message_type
        if message is not None and not field.is_repeated and depth < 2:
            found += [((field.name, *p), f) for p, f in field_paths(message, depth + 1)]
    return found


def mutations(seed: Message) -> st.SearchStrategy[Message]:
    """``seed`` (a valid request) with one field, at any depth, cleared or set to any value
    of its type: requests that get past the first checks and reach deeper code."""
    paths = field_paths(seed.DESCRIPTOR)
    if not paths:  # a request without fields has one form
        return st.just(seed)
    return st.sampled_from(paths).flatmap(
        lambda chosen: (st.none() | _value(chosen[1], 1)).map(
            lambda value: _mutated(seed, chosen[0], value)
        )
    )


def _mutated(seed: Message, path: FieldPath, value: Any) -> Message:
    out = type(seed)()
    out.CopyFrom(seed)
    target = out
    for name in path[:-1]:
        target = getattr(target, name)
    target.ClearField(path[-1])
    if value is not None:
        filled = _build(type(target), {path[-1]: value})
        target.MergeFrom(filled)
    return out


# --- JSON bodies --------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


def json_like(shape: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects shaped like ``shape`` (a valid body), with any of its keys left out, set to
    any JSON value, or kept, and at times a key of its own added."""
    keys = {key: st.just(value) | JSON_VALUES for key, value in shape.items()}
    extra = {key: JSON_VALUES for key in ("frobnicate", "")}
    return st.fixed_dictionaries({}, optional={**keys, **extra})
