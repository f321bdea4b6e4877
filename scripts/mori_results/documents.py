# SPDX-License-Identifier: MIT
"""A tool's JSON document with its schema name and version checked before anything else is read."""
from dataclasses import dataclass

from .constants import SCHEMAS
from .errors import Malformed
from .reader import json_files, read_json


@dataclass(frozen=True)
class Document:
    path: str
    schema: str      # e.g. "mori.a2a"
    version: int     # e.g. 2
    doc: dict        # the parsed document (strict JSON)

    @property
    def tag(self):
        return f"{self.schema}/{self.version}"


def schema_of(doc, path):
    """(name, version) of a parsed document: an object whose "schema" is "NAME/N" (Malformed otherwise)."""
    if not isinstance(doc, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
            type(doc), "null")
        raise Malformed(path, f"the document is {kind}, not a JSON object")
    s = doc.get("schema")
    if not isinstance(s, str) or "/" not in s:
        raise Malformed(path, f"no schema field of the form NAME/VERSION (found {s!r})")
    name, _, v = s.rpartition("/")
    if not v.isdigit() or v.startswith("0"):
        raise Malformed(path, f"schema {s!r}: the version is not a positive integer")
    return name, int(v)


def load_document(path, accept=None):
    """The Document at path. accept: schema names the caller reads (None: every name in constants.SCHEMAS); a
    known name of an unknown version is Malformed, a name outside accept returns None (another tool's file)."""
    doc = read_json(path)
    name, version = schema_of(doc, path)
    names = SCHEMAS if accept is None else {n: SCHEMAS[n] for n in accept}
    if name not in names:
        return None
    if version not in names[name]:
        raise Malformed(path, f"schema {name}/{version}: this reader knows {name} versions "
                              f"{', '.join(map(str, names[name]))}")
    return Document(path, name, version, doc)


def load_documents(paths, accept=None, skip_folders=("schema",)):
    """The Documents under paths (files or folders) of the accepted schemas, in path order."""
    out = []
    for f in json_files(paths, skip_folders):
        d = load_document(f, accept)
        if d is not None:
            out.append(d)
    return out
