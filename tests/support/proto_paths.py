"""Field paths of protobuf messages: every path a type has, and the paths a message sets."""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message


def field_paths(descriptor: Descriptor, prefix: str = "") -> set[str]:
    """Every field path of a message type, nested messages included (maps as a whole)."""
    out: set[str] = set()
    for field in descriptor.fields:
        path = prefix + field.name
        out.add(path)
        nested = field.message_type
        if nested is not None and not nested.GetOptions().map_entry:
            out |= field_paths(nested, path + ".")
    return out


def set_paths(message: Message, prefix: str = "") -> set[str]:
    """The field paths ``message`` sets (in any element of a repeated field)."""
    out: set[str] = set()
    for field, value in message.ListFields():
        path = prefix + field.name
        out.add(path)
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        items = value if field.is_repeated else [value]
        for item in items:
            out |= set_paths(item, path + ".")
    return out
