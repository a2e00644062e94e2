"""Limits that hold for a sandbox's whole process tree, and a uid of its own for each concurrent sandbox.

- `RunCgroup`: a fresh cgroup per run with a memory limit (swap included) and a process/thread limit
  for every process of the run together; cgroup v2 when its memory and pids controllers are
  delegated to us, else the v1 `memory` and `pids` hierarchies; None when neither is writable.
- `tree_rss_bytes`: the measured fallback without cgroups: the resident memory of every process
  of one uid, polled by `eval.sandbox` while the run lasts.
- `UidSlot`: a uid from a reserved range, held (by a lock file) for the length of one run, so that
  concurrent sandboxes never share a per-uid process limit, cannot signal or trace each other, and
  never read each other's files. The lock files live in one fixed, root-owned folder
  (`UID_LOCK_DIR`), the same for every scorer on the machine whatever its `TMPDIR`: two scorers
  with different temporary folders (per-job folders under a batch scheduler) still see each
  other's slots, so neither can take the other's uid and kill its processes at the end of a run.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import signal
import stat
import time
import uuid
from pathlib import Path

SANDBOX_UID_BASE = 2_000_000_000  # far above any real account; no passwd entry is needed
SANDBOX_UID_SLOTS = 256
# Not under `tempfile.gettempdir()`: that depends on each process's TMPDIR, and slots must be
# coordinated between every scorer on the machine. /run is root-owned and local to the machine.
UID_LOCK_DIR = Path("/run/latentworks-sandbox-uids")
_CG_ROOT = Path("/sys/fs/cgroup")


def _own_cgroup(controller: str | None) -> Path | None:
    """Where this process sits in the hierarchy of `controller` (None: the v2 unified one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (controller is None and names == "") or (controller and controller in names.split(",")):
            return Path(path.lstrip("/"))
    return None


@functools.cache
def cgroup_support() -> dict:
    """Which cgroup parent directories a run can create its cgroup under, probed once.

    Keys: `version` ("v2", "v1" or None), `memory` and `pids` (parent directories, or None), `why`.
    """
    if os.geteuid() != 0 and not os.access(_CG_ROOT, os.W_OK):
        return {
            "version": None,
            "memory": None,
            "pids": None,
            "why": "not root and /sys/fs/cgroup not writable",
        }
    # cgroup v2: the unified hierarchy mounted at /sys/fs/cgroup (or /sys/fs/cgroup/unified).
    own = _own_cgroup(None)
    for mount in (_CG_ROOT, _CG_ROOT / "unified"):
        ctl = mount / "cgroup.controllers"
        if own is None or not ctl.is_file():
            continue
        parent = mount / own
        try:
            available = (parent / "cgroup.subtree_control").read_text().split()
        except OSError:
            continue
        if {"memory", "pids"} <= set(available) and _probe(parent):
            return {"version": "v2", "memory": str(parent), "pids": str(parent), "why": ""}
    mem, pids = _own_cgroup("memory"), _own_cgroup("pids")
    mem_parent = _CG_ROOT / "memory" / mem if mem is not None else None
    pids_parent = _CG_ROOT / "pids" / pids if pids is not None else None
    if mem_parent and pids_parent and _probe(mem_parent) and _probe(pids_parent):
        return {"version": "v1", "memory": str(mem_parent), "pids": str(pids_parent), "why": ""}
    return {"version": None, "memory": None, "pids": None, "why": "no writable memory and pids controllers"}


def _probe(parent: Path) -> bool:
    probe = parent / f"lw-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


class RunCgroup:
    """One run's cgroup(s); `procs` are the files the launcher writes its pid into to join."""

    def __init__(self, memory_bytes: int, max_tasks: int):
        sup = cgroup_support()
        if sup["version"] is None:
            raise OSError(sup["why"])
        self.version = sup["version"]
        name = f"latentworks-sandbox-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.dirs = [Path(sup["memory"]) / name]
        if self.version == "v1":
            self.dirs.append(Path(sup["pids"]) / name)
        created = []
        try:
            for d in self.dirs:
                d.mkdir()
                created.append(d)
            mem, pids = self.dirs[0], self.dirs[-1]
            if self.version == "v2":
                (mem / "memory.max").write_text(str(memory_bytes))
                if (mem / "memory.swap.max").exists():
                    (mem / "memory.swap.max").write_text("0")
            else:
                (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            (pids / "pids.max").write_text(str(max_tasks))
        except OSError:
            for d in reversed(created):
                _rmdir(d)
            raise
        self.procs = [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in Path(self.procs[0]).read_text().split()]
        except OSError:
            return []

    def oom_killed(self) -> bool:
        """True if the memory limit made the kernel kill a process of the run."""
        mem = self.dirs[0]
        try:
            if self.version == "v2":
                events = dict(ln.split() for ln in (mem / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0)) > 0
            oom = dict(ln.split() for ln in (mem / "memory.oom_control").read_text().splitlines())
            return int(oom.get("oom_kill", 0)) > 0 or int((mem / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def peak_bytes(self) -> int | None:
        mem = self.dirs[0]
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((mem / name).read_text())
        except (OSError, ValueError):
            return None

    def kill_and_remove(self, wait_s: float = 5.0) -> None:
        """SIGKILL every process left in the run, wait until it is empty, remove the cgroup(s)."""
        deadline = time.monotonic() + wait_s
        if self.version == "v2" and (self.dirs[0] / "cgroup.kill").exists():
            try:
                (self.dirs[0] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        while True:
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        for d in reversed(self.dirs):
            _rmdir(d, deadline)


def _rmdir(d: Path, deadline: float | None = None) -> None:
    while True:
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:  # EBUSY while the last processes are being reaped
            if e.errno != errno.EBUSY or deadline is None or time.monotonic() > deadline:
                return
            time.sleep(0.01)


def tree_rss_bytes(uid: int) -> int:
    """Total resident memory of every process owned by `uid` (the fallback tree-wide measurement)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
        if int(fields.get("Uid", "-1").split()[0]) != uid:
            continue
        rss = fields.get("VmRSS")
        if rss:
            total += int(rss.split()[0]) * 1024
    return total


def pids_of_uid(uid: int) -> list[int]:
    """Processes owned by `uid` (used to kill a run's stragglers and by the leak tests)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    found.append(int(pid))
            except OSError:
                pass
    return found


def uid_lock_dir() -> Path:
    """`UID_LOCK_DIR`, created if missing; refused unless it is a real folder owned by root that no
    one else can write (anyone who could would be able to hand two runs the same uid)."""
    lock_dir = UID_LOCK_DIR
    try:
        lock_dir.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(lock_dir)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise OSError(
            f"{lock_dir} (where concurrent sandboxes take their uids) is not a folder owned by root and "
            "writable by root only; remove it (it is recreated at the next run)"
        )
    return lock_dir


class UidSlot:
    """An exclusive uid for one run, held by an flock on a root-only lock file until `release()`."""

    def __init__(self) -> None:
        lock_dir = uid_lock_dir()
        start = os.getpid() % SANDBOX_UID_SLOTS  # spread concurrent processes over the slots
        for k in range(SANDBOX_UID_SLOTS):
            slot = (start + k) % SANDBOX_UID_SLOTS
            fd = os.open(
                lock_dir / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            uid = SANDBOX_UID_BASE + slot
            if pids_of_uid(uid):  # a previous holder's stragglers: kill them before reuse
                for pid in pids_of_uid(uid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.fd, self.uid = fd, uid
            return
        raise OSError(f"all {SANDBOX_UID_SLOTS} sandbox uid slots are in use")

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
