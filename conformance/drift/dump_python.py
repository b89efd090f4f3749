#!/usr/bin/env python3
"""Dump the protobuf message schema of a Python SDK, in the SDK's own process.

Standalone: uses only the standard library and ``google.protobuf`` (run it with the SDK
virtualenv's interpreter, never with the project's). It imports the SDK's generated ``*_pb2``
modules and prints JSON to stdout::

    {"<message full name>": {"<field number>": [name, type, label], ...}, ...}

* ``type`` is the scalar type name (``string``, ``int32``, ...), the full name of the message or
  enum type (``google.protobuf.StringValue``, ``WorkflowInstance``), or ``map<K,V>`` for map
  fields (map-entry messages are folded into the field and not listed themselves).
* ``label`` is ``repeated``, ``optional`` (proto3 explicit presence), ``oneof:<name>`` (member of
  a real oneof), ``required`` (proto2) or ``""`` (plain singular field).

Nested messages are listed with their full names. Only messages defined in the files of the
given modules are dumped (imports such as google/protobuf/*.proto are left out).

Usage::

    python dump_python.py PACKAGE_OR_MODULE [...]

A package argument is walked for submodules whose names end in ``_pb2``.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
import sys

from google.protobuf.descriptor import FieldDescriptor

SCALARS = {  # proto type number -> its .proto spelling
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_SFIXED32: "sfixed32",
    FieldDescriptor.TYPE_SFIXED64: "sfixed64",
    FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
}


def _is_repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)
    if isinstance(flag, bool):
        return flag
    return field.label == FieldDescriptor.LABEL_REPEATED


def _is_map_entry(message) -> bool:
    try:
        return bool(message.GetOptions().map_entry)
    except Exception:  # pragma: no cover - very old runtimes
        return False


def field_type(field) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE or field.type == FieldDescriptor.TYPE_GROUP:
        msg = field.message_type
        if _is_map_entry(msg):
            key = field_type(msg.fields_by_name["key"])
            value = field_type(msg.fields_by_name["value"])
            return f"map<{key},{value}>"
        return msg.full_name
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.full_name
    return SCALARS.get(field.type, f"type{field.type}")


def field_label(field) -> str:
    if field_type(field).startswith("map<"):
        return ""  # maps are repeated entries on the wire; reported as plain map<K,V>
    if _is_repeated(field):
        return "repeated"
    oneof = field.containing_oneof
    if oneof is not None:
        # proto3 `optional` is a synthetic single-member oneof named "_<field>".
        if oneof.name == "_" + field.name and len(oneof.fields) == 1:
            return "optional"
        return "oneof:" + oneof.name
    is_required = getattr(field, "is_required", None)
    if is_required is True or (is_required is None and field.label == FieldDescriptor.LABEL_REQUIRED):
        return "required"
    return ""


def dump_message(message, out: dict) -> None:
    if _is_map_entry(message):
        return
    out[message.full_name] = {
        str(f.number): [f.name, field_type(f), field_label(f)]
        for f in sorted(message.fields, key=lambda f: f.number)
    }
    for nested in message.nested_types:
        dump_message(nested, out)


def dump_files(file_descriptors) -> dict:
    out: dict = {}
    seen = set()
    for fd in file_descriptors:
        if fd.name in seen:
            continue
        seen.add(fd.name)
        for message in fd.message_types_by_name.values():
            dump_message(message, out)
    return dict(sorted(out.items()))


def _modules(target: str):
    mod = importlib.import_module(target)
    yield mod
    path = getattr(mod, "__path__", None)
    if path is None:
        return
    for info in pkgutil.iter_modules(path, mod.__name__ + "."):
        if info.name.endswith("_pb2"):
            yield importlib.import_module(info.name)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    files = []
    for target in argv:
        for mod in _modules(target):
            fd = getattr(mod, "DESCRIPTOR", None)
            if fd is not None and hasattr(fd, "message_types_by_name"):
                files.append(fd)
    if not files:
        print(f"no *_pb2 modules found under {argv}", file=sys.stderr)
        return 1
    json.dump(dump_files(files), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
