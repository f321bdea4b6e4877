# SPDX-License-Identifier: MIT
"""What a case can leave behind: the project's abstract sockets, /dev/shm entries, temp files, live processes of
the case, device memory per GPU; and the GPUs nvidia-smi lists."""
import glob
import os
import re
import shutil
import time

from .procs import marked, sh

SOCKET_RE = re.compile(r"@(mori-symm-[0-9a-f]+-\d+)")  # lib/src/comm/fd_channel.cpp: FdChannel::socket_name
SMI_S = 10  # each nvidia-smi call
SETTLE_S = 5.5  # left_behind_after: the case's processes get this long to go


def socket_holders():
    """{socket inode: pid} over the processes this user can read."""
    held = {}
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            held[link[8:-1]] = int(fd.split("/")[2])
    return held


def mori_sockets():
    """{name: inode} of the project's abstract sockets."""
    out = {}
    try:
        with open("/proc/net/unix") as f:
            for line in f.read().splitlines()[1:]:
                m = SOCKET_RE.search(line)
                if m:
                    out[m.group(1)] = line.split()[6]
    except OSError:
        pass
    return out


def snapshot(tmp):
    return {"sockets": mori_sockets(), "shm": set(glob.glob("/dev/shm/mori*")),
            "temp": set(glob.glob(os.path.join(tmp, "*")))}


def left_behind(before, tmp, mark):
    """What the case left: new sockets not held by another user's job (a socket held by no process we can see
    counts), new /dev/shm entries and temp files, and live processes of the case."""
    after = snapshot(tmp)
    new = {n: i for n, i in after["sockets"].items() if n not in before["sockets"]}
    held = socket_holders() if new else {}
    ours = {pid for pid, _, _ in marked(mark)}
    sockets = sorted(n for n, ino in new.items() if ino not in held or held[ino] in ours)
    procs = [f"{pid} {comm} rank {env.get('OMPI_COMM_WORLD_RANK', '-')}" for pid, comm, env in marked(mark)]
    return {"processes": procs, "sockets": sockets, "shm": sorted(after["shm"] - before["shm"]),
            "temp_files": sorted(os.path.basename(p) for p in after["temp"] - before["temp"])}


def left_behind_after(before, tmp, mark):
    """left_behind once the case's processes have had up to SETTLE_S seconds to go."""
    time.sleep(0.5)
    end = time.monotonic() + SETTLE_S - 0.5
    while marked(mark) and time.monotonic() < end:
        time.sleep(0.1)
    return left_behind(before, tmp, mark)


def nothing_left(lb):
    return not (lb["processes"] or lb["sockets"] or lb["shm"] or lb["temp_files"])


def gpu_memory_used():
    if shutil.which("nvidia-smi") is None:
        return None
    rc, out = sh(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], timeout=SMI_S)
    if rc != 0:
        return None
    try:
        return [int(x) for x in out.split()]
    except ValueError:
        return None


def device_memory(before):
    """left_behind's device_memory_mib: before vs now (None without a reading before)."""
    if before is None:
        return None
    time.sleep(1)
    after = gpu_memory_used()
    return {"before": before, "after": after, "delta": [x - y for x, y in zip(after, before)] if after else None}

