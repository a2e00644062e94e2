"""Run untrusted (model-written) Python in a separate, resource-limited, network-less process.

Model-written code must never run inside our process (the official LatentMAS code `exec`s it in a
`multiprocessing.Process` with no limits). `run_python` writes the code to a fresh temp dir and runs
it through a small launcher interpreter that sets up isolation and then `execv`s an isolated
interpreter (`python -I -S`: no site-packages, no user site, `PYTHON*` variables ignored, so only
the standard library is importable).

The launcher is a separate process rather than a `preexec_fn`, because `preexec_fn` is unsafe when
the parent has threads (progress bars, data loaders) and cannot outlive `execve` to act as the
sandbox's reaper.

Guarantees (every POSIX platform):
- own session and process group; the whole group is SIGKILLed on wall-clock timeout and again after
  a normal exit, so background children do not outlive the call;
- `RLIMIT_CPU` (ceil(timeout) + 1 s), `RLIMIT_AS` (`memory_mb`), `RLIMIT_FSIZE` (`max_file_mb`, also
  caps the captured stdout/stderr, which go to files, not pipes), `RLIMIT_NPROC` (`max_procs`),
  `RLIMIT_NOFILE` (64), `RLIMIT_CORE` (0);
- a fresh temp working dir, deleted afterwards; an environment built from scratch (`PATH`, `LANG`,
  `PYTHONHASHSEED` only; nothing inherited, so no tokens or keys leak in);
- on Linux, `PR_SET_NO_NEW_PRIVS`, so setuid binaries cannot regain privileges.

Extra guarantees when we run as root on Linux (checked here: all of them work; see
`isolation_report()`):
- new network namespace (only a downed loopback: every connection fails, 127.0.0.1 included);
- new PID namespace: the launcher's child is PID 1 of it, so when it dies the kernel kills every
  process in the namespace, even ones that called `setsid` to leave the process group;
- new mount namespace: fresh tmpfs on `/tmp`, `/var/tmp`, `/dev/shm` (writes there vanish; the
  working dir is re-created at the same path inside it) and a fresh `/proc` (host processes are
  invisible);
- the code runs as `nobody` (uid/gid 65534, no supplementary groups), so it cannot write outside its
  working dir and the tmpfs mounts, and `RLIMIT_NPROC` is enforced (the kernel ignores it for root).
  If the interpreter lives under a directory `nobody` cannot traverse (e.g. pyenv under `/root`),
  that directory is replaced by an empty tmpfs inside the sandbox and only the interpreter's prefix
  is bind-mounted back, read-only.

Not root: an unprivileged user namespace is tried for the network and PID namespaces (checked
here as uid 65534: both work; kernels or AppArmor profiles that forbid user namespaces make it
fail, and then there is no network isolation). The code runs as our own user, so it can write
wherever we can, and `/tmp` is shared.
Not Linux: only the rlimits, the process group and the environment apply. `isolation_report()`
says what a given machine provides. This is a defence against buggy or careless code, not a
security boundary against a determined attacker (no seccomp, shared kernel).

Example:
```python
from eval.sandbox import run_python

result = run_python("print(sum(range(10)))", timeout=5)
assert result.ok and result.stdout.strip() == "45"
```
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

__all__ = ["SandboxResult", "isolation_report", "run_python"]

logger = logging.getLogger(__name__)

NOBODY = 65534
MAX_CAPTURE_CHARS = 20_000  # tail of stdout/stderr kept in the result
_MAX_NOFILE = 64

# Runs as `python -I -S -c _LAUNCHER CONFIG_JSON` in the sandbox's own session. It unshares the
# namespaces, forks the namespace's PID 1 (which sets up mounts and reports what worked on the
# status fd), which forks the user process (drop uid, rlimits, execv). Kept stdlib-only.
_LAUNCHER = r"""
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
libc = ctypes.CDLL(None, use_errno=True)
NEWNS, NEWUSER, NEWPID, NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
info = {"uid": os.getuid(), "netns": False, "pidns": False, "mountns": False, "userns": False,
        "private_tmp": False, "proc": False, "dropped_to_nobody": False, "errors": []}

def err(what):
    e = ctypes.get_errno()
    info["errors"].append(what + ": " + os.strerror(e))

def unshare(flags):
    fn = getattr(libc, "unshare", None)  # Linux only
    return fn is not None and fn(flags) == 0

def prctl(option, value):
    fn = getattr(libc, "prctl", None)  # Linux only
    return fn is not None and fn(option, value, 0, 0, 0) == 0

def mount(src, tgt, fstype, flags, data):
    enc = lambda s: None if s is None else s.encode()
    return libc.mount(enc(src), enc(tgt), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0

root = os.geteuid() == 0
net = NEWNET if not cfg["network"] else 0
if root:
    if unshare(NEWNS | NEWPID | net):
        info.update(mountns=True, pidns=True, netns=bool(net))
    else:
        err("unshare")
else:
    uid, gid = os.getuid(), os.getgid()
    if unshare(NEWUSER | NEWPID | net):
        info.update(userns=True, pidns=True, netns=bool(net))
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open("/proc/self/" + name, "w") as f:
                    f.write(text)
        except OSError as e:
            info["errors"].append("id map: " + str(e))
    else:
        err("unshare(user)")

def setup_mounts():
    # Everything created below lives in this mount namespace only and vanishes with it.
    if not mount(None, "/", None, MS_REC | MS_PRIVATE, None):
        return err("make / private")
    with open(cfg["script"], "rb") as f:  # re-created inside the private /tmp below
        script = f.read()
    size = "size=" + str(cfg["tmpfs_mb"]) + "m,mode=1777"
    ok = True
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(d) and not mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, size):
            ok = False
            err("tmpfs " + d)
    if not ok:
        return
    workdir = os.path.dirname(cfg["script"])
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    with open(cfg["script"], "wb") as f:
        f.write(script)
    if cfg["drop"]:
        os.chown(workdir, cfg["nobody"], cfg["nobody"])
        os.chown(cfg["script"], cfg["nobody"], cfg["nobody"])
    os.chdir(workdir)
    info["private_tmp"] = True
    if mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None):
        info["proc"] = True
    else:
        err("mount proc")
    hidden = cfg["hide_dir"]
    if hidden:  # bind the interpreter prefix aside, hide the untraversable dir, bind it back
        stage = "/tmp/.lw-stage"
        os.mkdir(stage, 0o755)
        if not mount(cfg["prefix"], stage, None, MS_BIND | MS_REC, None):
            return err("bind prefix")
        if not mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755"):
            return err("hide " + hidden)
        os.makedirs(cfg["prefix"], mode=0o755, exist_ok=True)
        if not mount(stage, cfg["prefix"], None, MS_BIND | MS_REC, None):
            return err("rebind prefix")
        mount(None, cfg["prefix"], None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        libc.umount2(stage.encode(), 2)  # MNT_DETACH
        os.rmdir(stage)
    info["interpreter_reachable"] = True

def run_user():
    os.close(status_fd)
    if info["dropped_to_nobody"]:
        os.setgroups([])
        os.setgid(cfg["nobody"])
        os.setuid(cfg["nobody"])
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    for name, value in cfg["limits"].items():
        lim = getattr(resource, name)
        resource.setrlimit(lim, (value, value))
    env = cfg["env"]
    os.execve(cfg["python"], [cfg["python"], "-I", "-S", cfg["script"]], env)

pid = os.fork()
if pid:  # launcher: outside the PID namespace, just relay the exit status
    _, st = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))

# PID 1 of the new namespace (or a plain child when namespaces failed)
prctl(1, 9)  # PR_SET_PDEATHSIG=SIGKILL: die with the launcher
info["interpreter_reachable"] = not cfg["hide_dir"]
if info["mountns"]:
    setup_mounts()
info["dropped_to_nobody"] = root and info["interpreter_reachable"] and cfg["drop"]
if root and not info["dropped_to_nobody"]:
    info["errors"].append("running as root: could not make the interpreter reachable for nobody")
os.write(status_fd, (json.dumps(info) + "\n").encode())
child = os.fork()
if child == 0:
    try:
        run_user()
    except BaseException as e:
        os.write(2, ("sandbox setup failed: " + repr(e) + "\n").encode())
        os._exit(125)
_, st = os.waitpid(child, 0)
sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
os.write(status_fd, (json.dumps({"signal": sig}) + "\n").encode())
os._exit(os.waitstatus_to_exitcode(st) if not sig else 128 + sig)
"""


@dataclass
class SandboxResult:
    """Outcome of one sandboxed run: `ok` is True only for exit code 0 within the time limit."""

    ok: bool
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    reason: str


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


def run_python(
    code: str,
    timeout: float = 10.0,
    memory_mb: int = 1024,
    max_procs: int = 32,
    max_file_mb: int = 16,
    network: bool = False,
) -> SandboxResult:
    """Run `code` as a script in a sandboxed `python -I -S` (see the module docstring for the limits).

    Returns a `SandboxResult`; never raises for anything the code does. Raises `ValueError` for
    non-positive limits or non-str code.
    """
    return _run(code, timeout, memory_mb, max_procs, max_file_mb, network)[0]


def _run(
    code: str, timeout: float, memory_mb: int, max_procs: int, max_file_mb: int, network: bool
) -> tuple[SandboxResult, dict]:
    """`run_python` plus the launcher's own report of which isolation steps worked."""
    for name, value in (
        ("timeout", timeout),
        ("memory_mb", memory_mb),
        ("max_procs", max_procs),
        ("max_file_mb", max_file_mb),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"`{name}` must be a positive number, got {value!r}.")
    if not isinstance(code, str):
        raise ValueError(f"`code` must be a str, got {type(code).__name__}.")
    root = os.geteuid() == 0
    python = os.path.realpath(sys.executable)
    workdir = tempfile.mkdtemp(prefix="lw-sandbox-")
    outdir = tempfile.mkdtemp(prefix="lw-sandbox-out-")  # ours only: unreachable for nobody
    try:
        script = os.path.join(workdir, "main.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(code)
        if root:
            os.chown(workdir, NOBODY, NOBODY)
            os.chown(script, NOBODY, NOBODY)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        cfg = {
            "network": bool(network),
            "python": python,
            "prefix": os.path.realpath(sys.base_prefix),
            "hide_dir": _blocked_ancestor(python) if root else None,
            "drop": root,
            "nobody": NOBODY,
            "script": script,
            "tmpfs_mb": max(4 * int(max_file_mb), 16),
            "env": env,
            "limits": {
                "RLIMIT_CPU": int(math.ceil(timeout)) + 1,
                "RLIMIT_AS": int(memory_mb * 1024 * 1024),
                "RLIMIT_FSIZE": int(max_file_mb * 1024 * 1024),
                "RLIMIT_NPROC": int(max_procs),
                "RLIMIT_NOFILE": _MAX_NOFILE,
                "RLIMIT_CORE": 0,
            },
        }
        return _launch(cfg, workdir, outdir, timeout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(outdir, ignore_errors=True)


def _launch(cfg: dict, workdir: str, outdir: str, timeout: float) -> tuple[SandboxResult, dict]:
    status_r, status_w = os.pipe()
    cfg["status_fd"] = status_w
    out_path, err_path = os.path.join(outdir, "stdout"), os.path.join(outdir, "stderr")
    timed_out = False
    # stdout/stderr go to files, not pipes: RLIMIT_FSIZE caps them and a stray child holding a
    # pipe open can never hang us.
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                [cfg["python"], "-I", "-S", "-c", _LAUNCHER, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=workdir,
                env=cfg["env"],
                start_new_session=True,
                pass_fds=(status_w,),
            )
        except OSError as e:
            os.close(status_r)
            os.close(status_w)
            return SandboxResult(False, None, "", "", False, f"sandbox could not start: {e}"), {}
        os.close(status_w)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
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
    signum = lines[1].get("signal", 0) if len(lines) > 1 else 0
    stdout, stderr = _tail(out_path), _tail(err_path)
    returncode = None if timed_out else proc.returncode
    if signum and returncode is not None:
        returncode = -signum
    reason = _reason(returncode, timed_out, signum, stderr)
    ok = returncode == 0 and not timed_out
    return SandboxResult(ok, returncode, stdout, stderr, timed_out, reason), info


@functools.cache
def isolation_report() -> dict:
    """What this machine's sandbox provides, probed once by running a tiny script in it.

    Keys: `works`, `netns`, `pidns`, `mountns`, `userns`, `private_tmp`, `proc`,
    `dropped_to_nobody` (bools, observed from inside where possible), `uid` (ours) and `errors`
    (what failed and why). Tests use it to skip checks a machine cannot make.
    """
    probe = "import os, json\nprint(json.dumps({'uid': os.getuid(), 'pid': os.getpid()}))\n"
    result, info = _run(probe, 10.0, 1024, 32, 16, False)
    if not result.ok:
        return {**info, "works": False, "errors": [*info.get("errors", []), result.reason]}
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    # Observed facts override the launcher's claims: the code really runs as nobody, and as the
    # first child of the namespace's PID 1.
    return {
        **info,
        "works": True,
        "dropped_to_nobody": seen["uid"] == NOBODY != os.getuid(),
        "pidns": seen["pid"] == 2,
    }
