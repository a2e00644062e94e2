"""Run untrusted (model-written) Python in a separate, resource-limited, network-less process tree.

Model-written code must never run inside our process (the official LatentMAS code `exec`s it in a
`multiprocessing.Process` with no limits). `run_python` writes the code to a fresh temp dir and runs
it through a small launcher (`eval/sandbox/launcher.py`) that sets up isolation and then `execv`s an
isolated interpreter (`python -I -S`: no site-packages, no user site, `PYTHON*` variables ignored,
so only the standard library is importable).

What is contained, and on which machines, is written down in `eval/sandbox/README.md` (the threat
model). In short, as root on Linux every run gets: its own PID, IPC, network and mount namespaces;
every inherited mount read-only and private tmpfs views of `/tmp`, `/var/tmp`, `/dev/shm`, `/run`
(so `/run/lock` and `/var/lock`); a uid of its own (one per concurrent run); one cgroup for the
whole tree (memory with swap, and tasks); a seccomp filter that refuses `socket(AF_UNIX)` and
io_uring (no host Unix socket is reachable); rlimits on CPU, address space, file size, open files
and core dumps; and an environment built from scratch. `isolation_report()` says what a given
machine provides.

Example:
```python
from eval.sandbox import run_python

result = run_python("print(sum(range(10)))", timeout=5)
assert result.ok and result.stdout.strip() == "45"
```
"""

from __future__ import annotations

import functools
import glob
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from eval.sandbox.limits import RunCgroup, UidSlot, cgroup_support, pids_of_uid, tree_rss_bytes

__all__ = ["SandboxLimits", "SandboxResult", "SandboxRun", "isolation_report", "run_python", "run_sandboxed"]

logger = logging.getLogger(__name__)

MAX_CAPTURE_CHARS = 20_000  # tail of stdout/stderr kept in the result
_MAX_NOFILE = 64
_LAUNCHER = str(Path(__file__).with_name("launcher.py"))
# Host directories every process may write to; each gets a private tmpfs inside the sandbox.
_PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/var/lock", "/var/run")
_POLL_S = 0.02  # how often the fallback (no cgroup) measures the tree's memory


@dataclass
class SandboxResult:
    """Outcome of one sandboxed run: `ok` is True only for exit code 0 within the time limit."""

    ok: bool
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    reason: str
    peak_memory_mb: float | None = field(default=None, compare=False)


def _blocked_ancestor(path: str) -> str | None:
    """The top-most ancestor of `path` that `nobody` cannot traverse (no o+x), or None."""
    parts = os.path.abspath(path).split(os.sep)[1:]
    cur = ""
    for part in parts:
        cur = cur + os.sep + part
        try:
            if not os.stat(cur).st_mode & 0o001:
                return cur
        except OSError:
            return cur
    return None


PACKAGES_DIR = "/lw-packages"  # where allowed package directories appear inside the sandbox
# What a solution needs of /usr: programs and shared libraries (and time zones), not /usr/share or
# /usr/local, where data sets, documentation and other installs may live.
_SYSTEM_DIRS = (
    *("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec"),
    *("/usr/share/zoneinfo", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"),
)
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_DEV_LINKS = (
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
)


def _site_dirs(prefix: str) -> list[str]:
    pats = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "local/lib/python3*/*-packages")
    return sorted({os.path.realpath(p) for pat in pats for p in glob.glob(os.path.join(prefix, pat))})


def root_fs_layout(python: str, packages: tuple[str, ...] = ()) -> dict:
    """What the run's own root filesystem holds: binds (host path -> path inside), symlinks, device
    nodes and masked directories.

    The interpreter's directory, its prefix's lib/ and the system's programs and libraries are bound
    read-only with every site-packages/dist-packages directory in them hidden; each allowed package directory appears
    as `/lw-packages/<name>`. Nothing else of the host exists inside: not the project, not a home
    directory, not a virtual environment, not a dataset or hub cache.
    """
    binds, symlinks = [], []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            symlinks.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            binds.append((d, d))
    binds += [(f, f) for f in _SYSTEM_FILES if os.path.exists(f) and not os.path.islink(f)]
    prefix = os.path.realpath(sys.base_prefix)
    covered = [dst for _, dst in binds]
    # The interpreter's own directory and its prefix's lib/ (stdlib, libpython), not the whole prefix:
    # a conda or pyenv root also holds other environments and package caches.
    libs = [os.path.join(prefix, d) for d in ("lib", "lib64")]
    symlinks += [(d, os.readlink(d)) for d in libs if os.path.islink(d) and not d.startswith("/usr/")]
    roots = [os.path.realpath(d) for d in libs if os.path.isdir(d)] + [os.path.dirname(python)]
    for r in roots:
        if not any(r == c or r.startswith(c.rstrip("/") + "/") for c in covered):
            binds.append((r, r))
            covered.append(r)
    masks = sorted(
        {m for r in ("/usr", prefix, os.path.dirname(os.path.dirname(python))) for m in _site_dirs(r)}
    )
    for pkg in packages:
        real = os.path.realpath(pkg)
        binds.append((real, f"{PACKAGES_DIR}/{os.path.basename(real)}"))
    return {
        "binds": binds,
        "symlinks": [*symlinks, *_DEV_LINKS],
        "devices": [d for d in _DEVICES if os.path.exists(d)],
        "masks": masks,
    }


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - MAX_CAPTURE_CHARS))
        return f.read().decode("utf-8", errors="replace")


def _reason(returncode: int | None, timed_out: bool, signum: int, stderr: str) -> str:
    if timed_out:
        return "timeout"
    if returncode == 0:
        return "ok"
    if signum:
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
        hint = {"SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)"}.get(name, "")
        return f"killed by {name}{hint}"
    if returncode == 125 and "sandbox setup failed" in stderr:
        return "sandbox setup failed: " + stderr.strip().splitlines()[-1]
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return f"exit code {returncode}" + (f": {last[:300]}" if last else "")


_LIMIT_MAX = {"timeout": 86_400, "memory_mb": 1 << 22, "max_procs": 1 << 15, "max_file_mb": 1 << 20}


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed run may use (see `eval/sandbox/README.md`); checked when it is made.

    `memory_mb` and `max_procs` hold for the whole process tree where cgroups are available (else per
    process, with the tree's memory measured and the tree killed past the limit). A non-positive,
    infinite or absurdly large limit (a day, 4 TiB, 32768 processes, 1 TiB files) is a `ValueError`
    naming the field.
    """

    timeout: float = 10.0  # wall-clock seconds; the CPU-time rlimit is one second more
    memory_mb: int = 1024  # address space per process, and the tree's total under a cgroup
    max_procs: int = 32  # processes and threads of the run together
    max_file_mb: int = 16  # largest file it may write (stdout and stderr included)
    network: bool = False  # False: a network namespace of its own with no interface up

    def __post_init__(self) -> None:
        for name, top in _LIMIT_MAX.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"`{name}` must be a positive number, got {value!r}.")
            if not math.isfinite(value) or value > top:
                raise ValueError(f"`{name}` must be a finite number of at most {top}, got {value!r}.")


class SandboxRun(NamedTuple):
    """Everything one `run_sandboxed` call gives back."""

    result: SandboxResult
    isolation: dict  # the launcher's own report of which isolation steps worked
    verdict: bytes | None  # what the script wrote to its verdict descriptor (only with a payload)


def run_python(
    code: str,
    *,
    timeout: float = 10.0,
    memory_mb: int = 1024,
    max_procs: int = 32,
    max_file_mb: int = 16,
    network: bool = False,
) -> SandboxResult:
    """Run `code` as a script in a sandboxed `python -I -S` within the given `SandboxLimits`.

    Returns a `SandboxResult`; never raises for anything the code does. Raises `ValueError` for a bad
    limit (see `SandboxLimits`) or non-str code.
    """
    limits = SandboxLimits(timeout, memory_mb, max_procs, max_file_mb, network)
    return run_sandboxed(code, limits=limits).result


def _launcher_config(
    python: str,
    script: str,
    argv: list[str],
    uid: int,
    root: bool,
    cgroup: RunCgroup | None,
    limits: SandboxLimits,
    root_dir: str = "",
    packages: tuple[str, ...] = (),
) -> dict:
    """What the launcher needs to contain one run: namespaces, mounts, uid, rlimits, environment."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
    rlimits = {
        "RLIMIT_CPU": int(math.ceil(limits.timeout)) + 1,
        "RLIMIT_AS": int(limits.memory_mb * 1024 * 1024),
        "RLIMIT_FSIZE": int(limits.max_file_mb * 1024 * 1024),
        "RLIMIT_NOFILE": _MAX_NOFILE,
        "RLIMIT_CORE": 0,
    }
    if root:  # per uid, and the uid is this run's own: a per-run process limit
        rlimits["RLIMIT_NPROC"] = int(limits.max_procs)
    cfg = {
        "network": bool(limits.network),
        "python": python,
        "interpreter_traversable": not root or _blocked_ancestor(python) is None,
        "root_dir": root_dir,
        **root_fs_layout(python, packages),
        "drop": root,
        "uid": uid,
        "script": script,
        "argv": argv,
        "private_dirs": sorted({os.path.realpath(d) for d in _PRIVATE_DIRS if os.path.isdir(d)} | {"/tmp"}),
        "tmpfs_mb": max(4 * int(limits.max_file_mb), 16),
        "seccomp": sys.platform == "linux",
        "cgroup_procs": cgroup.procs if cgroup else [],
        "env": env,
        "limits": rlimits,
    }
    return cfg


def run_sandboxed(
    code: str,
    *,
    limits: SandboxLimits,
    payload: bytes | None = None,
    packages: tuple[str, ...] = (),
    cgroups: bool = True,
) -> SandboxRun:
    """`run_python` with its limits as one `SandboxLimits`, plus the launcher's own report of which
    isolation steps worked.

    With `payload`, the script gets two extra arguments: a file descriptor it can read `payload`
    from, and one whose contents (the script's verdict) come back as the third value. Both are
    unlinked files: no path leads to them, so only processes handed the descriptors can use them.
    `packages` are host package directories shown read-only at `/lw-packages/<name>` inside.
    `cgroups=False` skips the per-run cgroup (the measured fallback; tests use it).
    """
    if not isinstance(code, str):
        raise ValueError(f"`code` must be a str, got {type(code).__name__}.")
    memory_mb, max_procs, timeout = limits.memory_mb, limits.max_procs, limits.timeout
    root = os.geteuid() == 0
    python = os.path.realpath(sys.executable)
    slot = UidSlot() if root else None
    uid = slot.uid if slot else os.getuid()
    cgroup = None
    if cgroups and cgroup_support()["version"]:
        try:
            cgroup = RunCgroup(int(memory_mb * 1024 * 1024), int(max_procs) + 4)  # + launcher, PID 1
        except OSError as e:
            logger.debug("no cgroup for this run: %s", e)
    workdir = tempfile.mkdtemp(prefix="lw-sandbox-")
    outdir = tempfile.mkdtemp(prefix="lw-sandbox-out-")  # ours only: unreachable for the sandbox uid
    channels = []
    try:
        script = os.path.join(workdir, "main.py")
        with open(script, "w", encoding="utf-8", errors="replace") as f:  # lone surrogates -> "?"
            f.write(code)
        if root:
            os.chown(workdir, uid, uid)
            os.chown(script, uid, uid)
        argv = []
        if payload is not None:
            channels = [tempfile.TemporaryFile(dir=outdir), tempfile.TemporaryFile(dir=outdir)]
            channels[0].write(payload)
            channels[0].flush()
            channels[0].seek(0)
            argv = [str(channels[0].fileno()), str(channels[1].fileno())]
        root_dir = os.path.join(workdir, ".root")  # the run's own root filesystem is mounted here
        os.mkdir(root_dir, 0o700)
        cfg = _launcher_config(python, script, argv, uid, root, cgroup, limits, root_dir, packages)
        fds = tuple(ch.fileno() for ch in channels)
        result, info = _launch(cfg, workdir, outdir, timeout, fds, cgroup, memory_mb, slot)
        verdict = None
        if channels:
            channels[1].seek(0)
            verdict = channels[1].read(64 << 20)
        return SandboxRun(result, info, verdict)
    finally:
        for ch in channels:
            ch.close()
        if cgroup is not None:
            cgroup.kill_and_remove()
        if slot is not None:
            _kill_uid(slot.uid)
            slot.release()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(outdir, ignore_errors=True)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of a sandbox uid (stragglers where there is no PID namespace)."""
    for pid in pids_of_uid(uid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait(proc: subprocess.Popen, timeout: float, poll_uid: int | None, memory_mb: int) -> tuple[bool, bool]:
    """Wait for the launcher; returns (timed out, killed for the tree's measured memory)."""
    if poll_uid is None:
        try:
            proc.wait(timeout=timeout)
            return False, False
        except subprocess.TimeoutExpired:
            return True, False
    deadline = time.monotonic() + timeout
    limit = memory_mb * 1024 * 1024
    while True:
        try:
            proc.wait(timeout=_POLL_S)
            return False, False
        except subprocess.TimeoutExpired:
            pass
        if tree_rss_bytes(poll_uid) > limit:
            return False, True
        if time.monotonic() > deadline:
            return True, False


def _launch(
    cfg: dict,
    workdir: str,
    outdir: str,
    timeout: float,
    fds: tuple[int, ...],
    cgroup: RunCgroup | None,
    memory_mb: int,
    slot: UidSlot | None,
) -> tuple[SandboxResult, dict]:
    status_r, status_w = os.pipe()
    cfg["status_fd"] = status_w
    out_path, err_path = os.path.join(outdir, "stdout"), os.path.join(outdir, "stderr")
    timed_out = measured_oom = False
    # stdout/stderr go to files, not pipes: RLIMIT_FSIZE caps them and a stray child holding a
    # pipe open can never hang us.
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                [cfg["python"], "-I", "-S", _LAUNCHER, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=workdir,
                env=cfg["env"],
                start_new_session=True,
                pass_fds=(status_w, *fds),
            )
        except OSError as e:
            os.close(status_r)
            os.close(status_w)
            return SandboxResult(False, None, "", "", False, f"sandbox could not start: {e}"), {}
        os.close(status_w)
        # Without a cgroup, the tree's memory is measured (possible when the run has its own uid).
        poll_uid = slot.uid if cgroup is None and slot is not None else None
        try:
            timed_out, measured_oom = _wait(proc, timeout, poll_uid, memory_mb)
        finally:
            # Kill the whole group, also after a normal exit (stray background children).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    with os.fdopen(status_r, "rb") as f:
        lines = [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]
    info = lines[0] if lines else {}
    info["cgroup"] = cgroup.version if cgroup else None
    info["tree_memory_limit"] = "cgroup" if cgroup else ("measured" if poll_uid is not None else None)
    signum = lines[1].get("signal", 0) if len(lines) > 1 else 0
    stdout, stderr = _tail(out_path), _tail(err_path)
    returncode = None if timed_out else proc.returncode
    if signum and returncode is not None:
        returncode = -signum
    if measured_oom:
        returncode, signum = -signal.SIGKILL, signal.SIGKILL
    reason = _reason(returncode, timed_out, signum, stderr)
    if measured_oom or (cgroup is not None and returncode != 0 and cgroup.oom_killed()):
        reason = f"memory limit of the process tree ({memory_mb} MiB) exceeded"
    ok = returncode == 0 and not timed_out and not measured_oom
    peak = cgroup.peak_bytes() if cgroup else None
    return SandboxResult(
        ok, returncode, stdout, stderr, timed_out, reason, None if peak is None else peak / 2**20
    ), info


@functools.cache
def isolation_report() -> dict:
    """What this machine's sandbox provides, probed once by running a tiny script in it.

    Keys: `works`, `netns`, `pidns`, `mountns`, `ipcns`, `userns`, `private_tmp`, `readonly_root`,
    `proc`, `seccomp`, `dropped_privileges` (bools, observed from inside where possible),
    `private_dirs` (host directories replaced by a private tmpfs), `cgroup` ("v2", "v1" or None),
    `tree_memory_limit` ("cgroup", "measured" or None), `uid` (ours) and `errors` (what failed and
    why). Tests use it to skip checks a machine cannot make.
    """
    probe = "import os, json\nprint(json.dumps({'uid': os.getuid(), 'pid': os.getpid()}))\n"
    result, info, _ = run_sandboxed(probe, limits=SandboxLimits())
    if not result.ok:
        return {**info, "works": False, "errors": [*info.get("errors", []), result.reason]}
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    # Observed facts override the launcher's claims: the code really runs as an unprivileged uid,
    # and as the first child of the namespace's PID 1.
    return {
        **info,
        "works": True,
        "dropped_privileges": seen["uid"] != 0 and seen["uid"] != os.getuid(),
        "pidns": seen["pid"] == 2,
        "cgroup_support": cgroup_support(),
    }
