"""Symbolic answer comparison (`math_verify`) in helper processes, bounded in time and memory from any thread.

sympy can run for minutes inside C (`\\boxed{(99!)!}`, `99!!!`), where no Python-level timeout
reaches, and `math_verify`'s own timeout is SIGALRM, which works in the main thread only. Here
each comparison runs in a process forked from a helper that has `math_verify` imported already
(a fork costs milliseconds, the import only once per helper); the helper kills that process when
it is not done within `TIMEOUT_S` or grows past `MEMORY_MB`, and the answer is then "not equal".
A helper is used by one thread at a time; concurrent callers get helpers of their own.

Example:
```python
from eval.scoring.symbolic import symbolic_equal

assert symbolic_equal("\\\\sqrt{2}/2", "\\\\frac{1}{\\\\sqrt{2}}") is True
```
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time

__all__ = ["MEMORY_MB", "TIMEOUT_S", "prestart", "symbolic_equal"]

TIMEOUT_S = 1.0  # one comparison, measured inside the helper
MEMORY_MB = 2048  # address space of one comparison's process (sympy itself needs a few hundred MiB)
_START_TIMEOUT_S = 30.0  # the helper's one-time import of math_verify and sympy
_MARGIN_S = 2.0  # the helper's fork and reply, on top of TIMEOUT_S
_MAX_IDLE = 4

_HELPER = r"""
import json, os, resource, select, signal, sys
try:
    from math_verify import parse, verify
except ImportError:
    sys.stdout.write("missing\n"); sys.stdout.flush(); sys.exit(0)
for a, b in (("x^2+2x+1", "(x+1)^2"), ("\\sqrt{2}/2", "\\frac{1}{\\sqrt{2}}"), ("[1,2)", "(1,2]")):
    verify(parse("\\boxed{" + a + "}", parsing_timeout=None), parse("\\boxed{" + b + "}", parsing_timeout=None),
           timeout_seconds=None)  # warm sympy's lazy parts once here, not in every forked comparison
sys.stdout.write("ready\n"); sys.stdout.flush()
LIMIT = int(sys.argv[1]) << 20
for line in sys.stdin:
    req = json.loads(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
            g = parse("\\boxed{" + req["gold"] + "}", parsing_timeout=None)
            p = parse("\\boxed{" + req["pred"] + "}", parsing_timeout=None)
            res = bool(verify(g, p, timeout_seconds=None)) if g and p else None
        except BaseException:
            res = None
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    done = select.select([r], [], [], req["timeout"])[0]
    data = os.read(r, 64) if done else b""
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    res = json.loads(data) if data else None
    sys.stdout.write(json.dumps({"result": res, "timed_out": not done}) + "\n")
    sys.stdout.flush()
"""

_idle: list[subprocess.Popen] = []
_lock = threading.Lock()
_unavailable = False


def _readline(proc: subprocess.Popen, timeout: float) -> str | None:
    """One line from the helper within `timeout` seconds, else None."""
    end = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    return buf.decode()


def _start() -> subprocess.Popen | None:
    global _unavailable
    proc = subprocess.Popen(
        [sys.executable, "-c", _HELPER, str(MEMORY_MB)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
    )
    first = _readline(proc, _START_TIMEOUT_S)
    if first == "ready\n":
        return proc
    if first == "missing\n":
        _unavailable = True  # math_verify is optional: only numeric and text comparison apply
    _stop(proc)
    return None


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()
    for f in (proc.stdin, proc.stdout):
        f.close()


_starting: threading.Thread | None = None


def prestart() -> None:
    """Start one helper in the background, so the first comparison of a process does not wait the
    1-4 s its import of sympy takes: `eval.runner` calls this for math tasks before the model loads,
    and the import overlaps the load. Returns at once; does nothing when a helper is there already."""
    global _starting
    with _lock:
        if _unavailable or _idle or _starting is not None:
            return
        _starting = threading.Thread(target=_start_idle, name="symbolic-prestart", daemon=True)
        _starting.start()


def _start_idle() -> None:
    global _starting
    proc = _start()
    with _lock:
        if proc is not None:
            _idle.append(proc)
        _starting = None


def symbolic_equal(pred: str, gold: str) -> bool | None:
    """`math_verify`'s verdict on two answer strings; None when unavailable, unparsable or too slow."""
    starting = _starting
    if starting is not None:
        starting.join(_START_TIMEOUT_S)  # a helper is on its way: wait for it rather than start a second
    if _unavailable:
        return None
    with _lock:
        proc = _idle.pop() if _idle else None
    if proc is None or proc.poll() is not None:
        proc = _start()
        if proc is None:
            return None
    try:
        proc.stdin.write((json.dumps({"pred": pred, "gold": gold, "timeout": TIMEOUT_S}) + "\n").encode())
        proc.stdin.flush()
        line = _readline(proc, TIMEOUT_S + _MARGIN_S)
    except OSError:
        line = None
    if line is None:
        _stop(proc)
        return None
    with _lock:
        if len(_idle) < _MAX_IDLE:
            _idle.append(proc)
        else:
            _stop(proc)
    reply = json.loads(line)
    return reply["result"] if isinstance(reply.get("result"), bool) else None
