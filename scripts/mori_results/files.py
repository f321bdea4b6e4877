# SPDX-License-Identifier: MIT
"""The one writer of the scripts' output files, and the checks of output paths (docs/reliability.md, "Files the
scripts write").

An output file goes only to a regular file or a new name: the tools' rule (lib/include/mori/symm/base/files.hpp
write_output, which tests/scripts/output_policy_agree_test.py holds this file to). A symlink to a regular file is
followed, component by component, as the tools follow it (resolve): a dangling symlink, a symlink loop and a
symlink in a sticky world-writable folder owned by another user (the kernel's protected_symlinks rule) are
refused. A path that exists and is anything else (a FIFO, a device such as /dev/null, a socket, a folder), a
name ending in '/', an empty path and a folder that does not exist or cannot be written are usage errors: each
is checked before any work (check_output_file), so nothing runs and nothing is left behind. The writer
(replacing, write_text) writes a fresh temporary file in the same folder (created exclusively, links not
followed) and renames it over the target after checking the target once more: a FIFO or a device swapped in
meanwhile is refused, never replaced. A replaced file keeps its permission bits; a new one is 0666 less the
umask. '-' is stdout where a script says so.
A write the system refuses (ENOSPC, EDQUOT, EIO) is WriteFailed, a system error (exit 3), never "bad input".

An output folder (--out DIR) is a folder, a symlink to one, or a new name whose nearest existing parent is a
writable folder (check_output_folder); a file, a FIFO, a device, a symlink loop or a link to nothing is refused.
"""
import contextlib
import errno
import os
import secrets
import shutil
import stat
import sys

from .errors import Usage, WriteFailed

_KIND = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
ONLY = "an output file is written only to a regular file or a new name"


def kind(mode):
    """What a file that is not a regular file is: 'a FIFO', 'a folder', ..."""
    return next((name for test, name in _KIND if test(mode)), "not a regular file")


def _symlink(path):
    """'a symlink loop', 'a symlink to nothing' or 'a symlink' for the link at path."""
    try:
        os.stat(path)
    except OSError as e:
        return "a symlink loop" if e.errno == errno.ELOOP else "a symlink to nothing"
    return "a symlink"


def _untrusted(link_st, name, folder):
    """The tools' protected_symlinks rule: a link in a sticky world-writable folder is followed only where its
    owner is this user or the folder's; else why not."""
    try:
        d = os.stat(folder)
    except OSError:
        return ""
    shared = stat.S_ISVTX | stat.S_IWOTH
    if d.st_mode & shared != shared or link_st.st_uid in (os.geteuid(), d.st_uid):
        return ""
    return f"goes through the symlink '{name}' of uid {link_st.st_uid} in the sticky world-writable folder " \
        f"'{folder}' of uid {d.st_uid}, which is not followed"


def _components(path):
    """path's names in reverse order (the next one last), without empty ones and '.'."""
    return [c for c in path.split("/") if c not in ("", ".")][::-1]


def resolve(path):
    """(the file an output to path is written to, None) or (None, why path is refused), following symlinks one
    component at a time as the tools do (files.hpp resolve_output_path). OSError on a path the system refuses."""
    if len(path) > 1 and path.endswith("/"):
        return None, "ends in '/', which names a folder"
    todo = _components(path)
    at = "/" if path.startswith("/") else os.getcwd()
    hops, last_from_link = 0, False
    while todo:
        name = todo.pop()
        nxt = os.path.dirname(at) if name == ".." else os.path.join(at, name)
        try:
            st = None if name == ".." else os.lstat(nxt)
        except FileNotFoundError:
            if todo:
                raise
            if last_from_link:
                return None, f"is a symlink to nothing (the new name '{nxt}'): no file is created through a link"
            return nxt, None
        if st is None or not stat.S_ISLNK(st.st_mode):
            at = nxt
            continue
        hops += 1
        if hops > 40:
            return None, "leads into a symlink loop"
        why = _untrusted(st, nxt, at)
        if why:
            return None, why
        target = os.readlink(nxt)
        at = "/" if target.startswith("/") else at
        last_from_link = last_from_link or not todo
        todo.extend(_components(target))
    return at, None


def check_output_file(path, option, stdout=False):
    """Usage unless path can take an output file: '' never; '-' where stdout (the script documents it); an
    existing entry only as a regular file (a symlink to one followed as resolve follows it); its folder must
    exist and be writable."""
    if path is None:
        return
    if path == "":
        raise Usage(f"{option}: an empty value")
    if path == "-" and stdout:
        return
    where = f"{option} '{path}'"
    rule = ONLY + (" ('-' = stdout)" if stdout else "")
    try:
        target, why = resolve(path)
        st = os.stat(target) if not why and os.path.lexists(target) else None
    except OSError as e:  # ENOTDIR, ENAMETOOLONG, ELOOP in a folder of the path, EACCES
        raise Usage(f"{where}: {e.strerror or e}")
    if why:
        raise Usage(f"{where} {why}; {rule}")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise Usage(f"{where} is {kind(st.st_mode)}; {rule}")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise Usage(f"{where}: no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Usage(f"{where}: folder {folder} is not writable")
    if st is not None and not os.access(target, os.W_OK):
        raise Usage(f"{where} exists and is not writable")
    return target


def check_output_folder(path, option):
    """Usage unless path is a folder this process can write (a symlink to one is followed), or a new name whose
    nearest existing parent is one. Checked before anything is built or run."""
    if path is None:
        return
    if path == "":
        raise Usage(f"{option}: an empty value")
    where = f"{option} '{path}'"
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        p = os.path.dirname(p)
    try:
        st = os.stat(p)
    except OSError as e:
        raise Usage(f"{where}: {p} is {_symlink(p)}" if os.path.islink(p) else f"{where}: {e.strerror or e}")
    if not stat.S_ISDIR(st.st_mode):
        raise Usage(f"{where}: {p} is {kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else 'a file'}, "
                    "not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise Usage(f"{where}: {p} is not writable (a read-only mount, or its permissions)")


# What the system refuses for a reason of its own (not of the path, which was checked): a system error, exit 3.
SYSTEM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.ENOMEM)


def make_folders(path, option):
    """os.makedirs(path) for an output folder checked by check_output_folder; -> the topmost folder it made (None:
    path was there), so that a caller that fails before writing anything can remove what it made. A full file
    system (ENOSPC, ...) is WriteFailed, any other refusal Usage."""
    top = None
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        top, p = p, os.path.dirname(p)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        if top is not None:
            remove_made(top)
        if e.errno in SYSTEM_ERRNOS:
            raise WriteFailed(path, option, e)
        raise Usage(f"{option}: cannot make {path}: {e.strerror or e}")
    return top


def remove_made(top):
    """Removes a folder tree this process made (make_folders' result); None: nothing."""
    if top is not None:
        shutil.rmtree(top, ignore_errors=True)


def check_folder_entries(folder, option):
    """Usage unless every entry under folder (at any depth) is a regular file or a folder: a symlink, a FIFO, a
    device or a socket where a script writes its files (an evidence folder continued by --resume) is refused
    before any work, never written through or opened."""
    for top, dirs, names in os.walk(folder):
        for name in sorted(dirs + names):
            p = os.path.join(top, name)
            try:
                st = os.lstat(p)
            except OSError as e:
                raise Usage(f"{option}: {p}: {e.strerror or e}")
            if stat.S_ISLNK(st.st_mode):
                raise Usage(f"{option}: {p} is {_symlink(p)}; {ONLY}")
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise Usage(f"{option}: {p} is {kind(st.st_mode)}; {ONLY}")


def _new_temporary(folder):
    """(fd, path) of a fresh file in folder: created exclusively, never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(8):
        tmp = os.path.join(folder, f".mori-out-{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no fresh temporary name", folder)


@contextlib.contextmanager
def replacing(path, option, binary=False):
    """A file to write path's new content into. On a clean exit of the block it replaces path (checked again
    first); on any exception the temporary file is removed and path is left as it was. OSError becomes
    WriteFailed naming the file and the error's name (ENOSPC where the file system is full: a system error)."""
    path = check_output_file(path, option)  # the file written: a symlink to a regular file is followed
    folder = os.path.dirname(path)
    tmp = None
    try:
        fd, tmp = _new_temporary(folder)
        try:
            st = os.stat(path)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))  # a replaced file keeps its permission bits
        except FileNotFoundError:
            pass
        except OSError:
            os.close(fd)
            raise
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as f:
            yield f
        check_output_file(path, option)  # a FIFO or a device swapped in meanwhile is refused, not replaced
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise WriteFailed(path, option, e)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_text(path, text, option, stdout=False):
    """Writes text to path through replacing(); '-' is stdout where stdout is true."""
    if path == "-" and stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with replacing(path, option) as f:
        f.write(text)
