"""Processes a test started, found by ancestry: the only ones a test may kill.

A Spark executor is a `CoarseGrainedExecutorBackend` JVM.  On a shared machine other
people's Spark jobs run the same class, so an executor is ours only if walking the
parent links of `/proc/<pid>/stat` from it reaches a process this test started (the
driver JVM of a `local-cluster` master, or a standalone worker the fixture launched),
and, when an application id is given, only if it serves that application.
"""

from __future__ import annotations

import os
import signal
import time


def parent_of(pid: int) -> int | None:
    """The parent pid of `pid` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')':
    # the fields after the last ')' are state, ppid, ...
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def descends_from(pid: int, ancestors: set[int]) -> bool:
    """Whether one of `ancestors` is `pid` or one of its ancestors."""
    seen = set()
    while pid and pid not in seen:
        if pid in ancestors:
            return True
        seen.add(pid)
        pid = parent_of(pid) or 0
    return False


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def descendants(ancestors: set[int]) -> list[int]:
    """Every live process below one of `ancestors` (not the ancestors themselves)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            pid = int(entry)
            if pid not in ancestors and descends_from(pid, ancestors):
                out.append(pid)
    return sorted(out)


def our_executors(ancestors: set[int], app_id: str | None = None) -> list[int]:
    """The executor JVMs below `ancestors` (serving `app_id`, if given)."""
    found = []
    for pid in descendants(ancestors):
        args = cmdline(pid)
        if any(a.endswith("CoarseGrainedExecutorBackend") for a in args):
            if app_id is None or app_id in args:
                found.append(pid)
    return found


def listening_pid(port: int, candidates: list[int]) -> int | None:
    """Which of `candidates` has a socket listening on TCP `port` (IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{inode}]")
        except OSError:
            continue
    for pid in candidates:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return pid
            except OSError:
                continue
    return None


def kill_descendants(ancestors: set[int]) -> list[int]:
    """SIGKILL every process below `ancestors`, each checked again just before."""
    killed = []
    for pid in descendants(ancestors):
        if descends_from(pid, ancestors):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed


def terminate(pids: list[int], grace: float = 10.0) -> None:
    """SIGTERM each of `pids`, then SIGKILL whichever is still there after `grace` s."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    for pid in pids:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False            # a child of ours, now reaped
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")       # a zombie is as good as gone
