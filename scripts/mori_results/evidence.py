# SPDX-License-Identifier: MIT
"""An evidence folder's manifest (schema mori.evidence/1, docs/evidence.md): checked fields, the step behind a file."""
import os
from dataclasses import dataclass

from .documents import load_document
from .errors import Malformed

MANIFEST = "manifest.json"


@dataclass
class Manifest:
    path: str
    folder: str
    revision: str
    clean: bool
    machine: str
    start_id: object
    complete: bool
    steps: list
    skipped: list
    waived: list
    doc: dict

    def step_of(self, path):
        """The step whose outputs include the file at path (None if none)."""
        rel = os.path.relpath(os.path.abspath(path), self.folder)
        return next((s for s in self.steps if rel in s["outputs"]), None)


def _need(path, obj, key, types, where, nullable=False):
    if key not in obj:
        raise Malformed(path, f"not a valid mori.evidence/1 manifest: {where}{key}: missing")
    v = obj[key]
    if v is None and nullable:
        return v
    if isinstance(v, bool) and bool not in types or not isinstance(v, types):
        raise Malformed(path, f"not a valid mori.evidence/1 manifest: {where}{key}: wrong type "
                              f"({type(v).__name__})")
    return v


def load_manifest(folder, required=True):
    """The Manifest of an evidence folder (None where there is none and required is False)."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.lexists(path):
        if required:
            raise Malformed(path, "no manifest.json: not an evidence folder (docs/evidence.md)")
        return None
    d = load_document(path, accept=["mori.evidence"])
    if d is None:
        raise Malformed(path, "not a mori.evidence document")
    m = d.doc
    steps = []
    for i, s in enumerate(_need(path, m, "steps", (list,), "")):
        if not isinstance(s, dict):
            raise Malformed(path, f"not a valid mori.evidence/1 manifest: steps[{i}] is not an object")
        w = f"steps[{i}]."
        _need(path, s, "name", (str,), w)
        _need(path, s, "status", (str,), w)
        _need(path, s, "exit_code", (int,), w, nullable=True)
        wall = _need(path, s, "wall_s", (int, float), w, nullable=True)
        if wall is not None and wall < 0:
            raise Malformed(path, f"not a valid mori.evidence/1 manifest: {w}wall_s: negative")
        outs = _need(path, s, "outputs", (list,), w)
        if not all(isinstance(o, str) for o in outs):
            raise Malformed(path, f"not a valid mori.evidence/1 manifest: {w}outputs: not all strings")
        steps.append(s)
    lists = {}
    for key in ("skipped", "waived"):
        lists[key] = m.get(key) or []
        if not isinstance(lists[key], list) or not all(isinstance(x, dict) and isinstance(x.get("name"), str)
                                                       for x in lists[key]):
            raise Malformed(path, f"not a valid mori.evidence/1 manifest: {key}: expected objects with a name")
    return Manifest(path=path, folder=os.path.abspath(folder), revision=_need(path, m, "revision", (str,), ""),
                    clean=_need(path, m, "clean", (bool,), ""), machine=_need(path, m, "machine", (str,), ""),
                    start_id=m.get("start_id"), complete=_need(path, m, "complete", (bool,), ""), steps=steps,
                    skipped=lists["skipped"], waived=lists["waived"], doc=m)


def same_revision(a, b):
    """Two revisions name one commit: one is a prefix of the other (short and full hashes), neither dirty."""
    if not a or not b:
        return False
    return a.startswith(b) or b.startswith(a)
