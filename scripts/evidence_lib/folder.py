# SPDX-License-Identifier: MIT
"""The evidence folder of scripts/evidence (docs/evidence.md "Where it writes"): every file written through the
scripts' one writer, the manifest and its steps, the lock that lets one run write a folder at a time, opening the
folder (a new one, or the one --resume continues), and --archive's tar.gz of it."""
import fcntl
import json
import os
import shutil
import sys
import tarfile
import time

from evidence_lib.common import SCHEMA, Usage
from evidence_lib.jobs import boot_id
from mori_results.errors import Malformed
from mori_results.evidence import load_manifest
from mori_results.files import check_folder_entries, make_folders, replacing, write_text


def lock_folder(folder):
    """An exclusive lock on the folder itself (flock of its descriptor, released when the process ends, nothing
    left behind); a second scripts/evidence on the same folder is a usage error, whether it starts or resumes."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise Usage(f"{folder}: another scripts/evidence is writing it (one run per folder at a time)")
    return fd


def archive_folder(folder, results, path):
    """A tar.gz of folder through the scripts' one writer (mori_results/files.py): a regular file or a new name."""
    with replacing(path, "--archive", binary=True) as f:
        with tarfile.open(fileobj=f, mode="w:gz") as t:
            t.add(folder, arcname=os.path.relpath(folder, results))
    print(f"evidence: archive {path}", flush=True)


class Folder:
    """Evidence's folder (self.dir) and manifest (self.man)."""

    def write(self, name, text):
        """NAME (relative to the folder) written through the scripts' one writer (mori_results/files.py): a
        symlink, a FIFO or a device there is exit 2, never written through; a full file system is exit 3."""
        write_text(os.path.join(self.dir, name), text, "--out")

    def save(self):
        self.write("manifest.json", json.dumps(self.man, indent=2) + "\n")

    def record(self, step):
        self.man["steps"] = [s for s in self.man["steps"] if s["name"] != step["name"]] + [step]
        self.man["skipped"] = [s for s in self.man["skipped"] if s["name"] != step["name"]]
        self.save()

    def skip(self, name, reason, cut=True):
        """Lists a step in skipped[]; cut: the deadline left it out (the call exits 4), not the machine kind."""
        if cut:
            self.cut.add(name)
        self.man["skipped"] = [s for s in self.man["skipped"] if s["name"] != name] + [{"name": name,
                                                                                         "reason": reason}]
        self.save()

    def archive(self, results):
        """--archive FILE: one tar.gz of the folder (RESULTS-relative paths), also after a failed build."""
        if self.a.archive:
            archive_folder(self.dir, results, self.a.archive)

    def open_folder(self, folder, head, stage):
        """Makes (or, with --resume, continues) the folder, locked for this run, and moves what the staging folder
        holds (build.txt) into it."""
        a = self.a
        self.dir = folder
        if a.resume and not os.path.isfile(os.path.join(self.dir, "manifest.json")):
            raise Usage(f"--resume: no run to continue: {self.dir} holds no manifest.json (start without --resume)")
        # A folder this call makes is removed again where the first write fails (a full file system): nothing of
        # it is left (docs/reliability.md "Files the scripts write").
        self.made = make_folders(self.dir, "--out")
        # One run writes a folder at a time, a first start and a --resume alike (docs/evidence.md "Where it
        # writes"): the folder itself is locked for as long as this process runs, then checked.
        self.lock = lock_folder(self.dir)
        # Every entry of a folder continued is a regular file or a folder: a step's NAME.txt replaced by a symlink,
        # a FIFO or a device is exit 2 here, before any step runs (the writer refuses it too, if swapped in later).
        check_folder_entries(self.dir, "--resume" if a.resume else "--out")
        if os.path.lexists(os.path.join(self.dir, "manifest.json")) and not a.resume:
            raise Usage(f"{self.dir} exists: --resume continues it (or remove it)")
        if a.resume and os.path.lexists(os.path.join(self.dir, "manifest.json")):
            self.resume(head)
        for f in os.listdir(stage):  # build.txt, through the one writer like every file of the folder
            with open(os.path.join(stage, f), "rb") as src, replacing(os.path.join(self.dir, f), "--out",
                                                                      binary=True) as dst:
                shutil.copyfileobj(src, dst)

    def resume(self, head):
        """--resume: the folder's manifest, checked to be this revision's run of this preset, becomes this run's,
        with this call added to its resumes."""
        a = self.a
        try:  # the results model's strict reader and the manifest's checked fields (docs/evidence.md)
            old = load_manifest(self.dir).doc
        except Malformed as e:
            raise Usage(f"--resume: {e}")
        if old.get("schema") != SCHEMA or old.get("revision") != head or old.get("preset") != a.preset:
            raise Usage(f"--resume: {self.dir}/manifest.json is not this revision's {a.preset} run")
        if not isinstance(old.get("resumes", []), list):
            raise Usage(f"--resume: {self.dir}/manifest.json: resumes is not a list")
        old["resumes"] = old.get("resumes", []) + [{"start_id": boot_id(), "argv": sys.argv[1:],
                                                    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]
        old["build"] = self.man.get("build")
        self.man = old
