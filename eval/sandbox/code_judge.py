"""The code judge: runs a task's tests against a candidate that lives in another process.

Run by `eval.sandbox.code_verdict` as the sandbox's main script, `python -I -S code_judge.py PAYLOAD_FD
VERDICT_FD` (standard library only). The tests, the expected outputs and the verdict stay in
this process, which is not dumpable (a same-uid process cannot read its memory or trace it). The
candidate runs in a fresh interpreter (`eval/sandbox/code_worker.py`) that gets neither descriptor: each
call of a candidate function is sent there as plain data, and only the plain-data result comes
back, so every comparison happens here, on honest built-in values. Each top-level assertion (and
each iteration of a top-level test loop) is one test; its outcome is recorded here and written,
with the run's secret, to the verdict descriptor.
"""

import builtins
import ctypes
import json
import os
import select
import signal
import struct
import sys
import time
import types

PAYLOAD_FD, VERDICT_FD = int(sys.argv[1]), int(sys.argv[2])
MAX_RESTARTS = 5
MAX_FAILURES_KEPT = 5


def _not_dumpable():
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except (OSError, AttributeError):
        pass


_not_dumpable()
with os.fdopen(PAYLOAD_FD, "rb") as _f:
    PAYLOAD = json.loads(_f.read().decode("utf-8", "surrogatepass"))
os.set_inheritable(VERDICT_FD, False)
codec = types.ModuleType("lw_codec")
exec(compile(PAYLOAD["codec"], "lw_codec.py", "exec"), codec.__dict__)
codec.allow_big_ints()
DEADLINE = time.monotonic() + PAYLOAD["timeout"]


class CandidateFailure(BaseException):
    """A call into the candidate failed (died, timed out, exited, unsendable value).

    A BaseException, so a test's own `except Exception:` never swallows it.
    """


class Worker:
    """The candidate's process, (re)started on demand."""

    def __init__(self):
        self.proc = None
        self.starts = 0
        self.load_error = None

    def _spawn(self):
        if self.starts > MAX_RESTARTS:
            raise CandidateFailure(f"the candidate's process died {MAX_RESTARTS} times")
        self.starts += 1
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        os.set_inheritable(req_r, True)
        os.set_inheritable(rep_w, True)
        argv = [sys.executable, "-I", "-S", "-c", PAYLOAD["worker"], str(req_r), str(rep_w)]
        # The candidate's stdout and stderr are discarded, as the official harnesses do: what it
        # prints never counts, and printing a lot must not reach the run's file-size limit.
        quiet = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        self.pid = os.posix_spawn(sys.executable, argv, {}, file_actions=quiet)
        self.proc = True
        os.close(req_r)
        os.close(rep_w)
        os.set_blocking(self.req_w, False)
        init = {"codec": PAYLOAD["codec"], "source": PAYLOAD["candidate"], "paths": PAYLOAD["extra_paths"]}
        try:
            self._send(json.dumps(init).encode("utf-8", "surrogatepass"))
            ready = self._recv()
        except CandidateFailure as e:
            self.load_error = "the code did not load: " + str(e).replace(" during the call", " while loading")
            raise
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            err = ready.get("error") if isinstance(ready, dict) else None
            self.load_error = "the code failed to load: " + _describe(err)
            self.kill()
            raise CandidateFailure(self.load_error)

    def kill(self):
        if self.proc is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self._close_pipes()
            self.proc = None

    def exit_status(self, wait_s):
        """The worker's exit status once it has ended (within `wait_s`), else None."""
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.proc = None
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.01)
        return None

    def _remaining(self):
        left = DEADLINE - time.monotonic()
        if left <= 0:
            self.kill()
            raise CandidateFailure("time limit reached")
        return left

    def _send(self, data):
        data = struct.pack(">Q", len(data)) + data
        while data:
            _, w, _ = select.select([], [self.req_w], [], self._remaining())
            if not w:
                continue
            try:
                data = data[os.write(self.req_w, data) :]
            except BrokenPipeError:
                self._died()

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            r, _, _ = select.select([self.rep_r], [], [], self._remaining())
            if not r:
                continue
            chunk = os.read(self.rep_r, min(n - len(buf), 1 << 20))
            if not chunk:
                self._died()
            buf += chunk
        return buf

    def _recv(self):
        (n,) = struct.unpack(">Q", self._read(8))
        if n > codec.MAX_BYTES:
            self.kill()
            raise CandidateFailure("the candidate's reply is too large")
        try:
            return codec.loads(self._read(n))
        except ValueError:
            self.kill()
            raise CandidateFailure("the candidate's process sent a malformed reply") from None

    def _died(self):
        code = self.exit_status(0.5) if self.proc is not None else None
        self._close_after_death()
        raise CandidateFailure(f"the candidate's process ended during the call (exit status {code})")

    def _close_after_death(self):
        if self.proc is not None:
            self.kill()
            return
        self._close_pipes()

    def _close_pipes(self) -> None:
        for fd in (self.req_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def call(self, name, args, kwargs):
        if self.load_error:
            raise CandidateFailure(self.load_error)
        try:
            enc_args = [codec.encode(a) for a in args]
            enc_kwargs = {str(k): codec.encode(v) for k, v in kwargs.items()}
        except codec.CodecError as e:
            raise CandidateFailure(f"a test argument cannot be sent to the candidate: {e}") from None
        if self.proc is None:
            self._spawn()
        self._send(codec.dumps({"name": name, "args": enc_args, "kwargs": enc_kwargs}))
        reply = self._recv()
        if not isinstance(reply, dict):
            raise CandidateFailure("the candidate's process sent a malformed reply")
        if reply.get("ok") is not True:
            _raise_candidate_error(reply.get("error"))
        try:
            value = codec.decode(reply.get("value"))
            self._remaining()  # decoding counts against the deadline too
            after = reply.get("args")
            if isinstance(after, list) and len(after) == len(args):
                for a, new in zip(args, after):
                    if new is not None and type(a) in (list, dict, set, bytearray):
                        _update_in_place(a, codec.decode(new))
        except (codec.CodecError, ValueError, TypeError, RecursionError) as e:
            raise CandidateFailure(f"the candidate returned an unusable value: {e}") from None
        return value


def _describe(err):
    if isinstance(err, list) and len(err) == 2 and all(isinstance(x, str) for x in err):
        return f"{err[0]}: {err[1]}" if err[1] else err[0]
    return "unknown error"


# Exceptions that steer iteration (a StopIteration from a call inside `all(map(...))` ends the map
# early, so `all` sees no false item): never re-raised in the judge, they fail the call.
_CONTROL_FLOW = (StopIteration, StopAsyncIteration)


def _raise_candidate_error(err):
    """Re-raise the candidate's exception as the built-in Exception of that name (tests may expect
    a ValueError); anything else, SystemExit and StopIteration included, is a CandidateFailure."""
    text = _describe(err)
    name = err[0] if isinstance(err, list) and err and isinstance(err[0], str) else ""
    cls = vars(builtins).get(name)
    if (
        isinstance(cls, type)
        and issubclass(cls, Exception)
        and not issubclass(cls, _CONTROL_FLOW)
        and cls.__module__ == "builtins"
    ):
        try:
            exc = cls(err[1])
        except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError wants five arguments
            exc = None
        if exc is not None:
            raise exc
    raise CandidateFailure("the candidate raised " + text)


def _update_in_place(arg, new):
    if type(new) is not type(arg):
        return
    if isinstance(arg, list | bytearray):
        arg[:] = new
    else:
        arg.clear()
        arg.update(new)


WORKER = Worker()


def _proxy(name):
    def call(*args, **kwargs):
        return WORKER.call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    return call


# --------------------------------------------------------------------------- tests as units

OUTCOMES = []  # (passed, message)


def _unit_pass():
    OUTCOMES.append((True, ""))


def _unit_fail(exc):
    if isinstance(exc, AssertionError):
        msg = "AssertionError" + (f": {exc}" if str(exc) else "")
    elif isinstance(exc, CandidateFailure):
        msg = str(exc)
    else:
        msg = f"{type(exc).__name__}: {exc}"
    OUTCOMES.append((False, msg[:300]))


def _candidate_loads():
    """Start the candidate's process once up front; a module that does not load fails every test."""
    try:
        WORKER._spawn()
    except CandidateFailure as e:
        WORKER.load_error = WORKER.load_error or "the code did not load: " + str(e)
        return False
    return True


def main():
    for path in PAYLOAD.get("extra_paths", []):
        sys.path.append(path)  # the allowed packages (numpy), for the tests; the worker adds them too
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # The tests' namespace is the judge's alone: builtins are this process's own module, and the
    # prompt's helpers are the task's own code. Only the names the task says are the candidate's
    # (its entry point) call into the candidate; whatever else the candidate defines (`abs`, `zip`,
    # `enumerate`, a prompt helper's name) is never seen here.
    ns = {"__name__": "__main__", "__builtins__": builtins}
    if PAYLOAD.get("prompt"):
        try:  # the task's own helpers (e.g. HumanEval's `poly`), trusted, as the tests expect them
            exec(compile(PAYLOAD["prompt"], "prompt.py", "exec"), ns)
        except Exception:  # noqa: BLE001 - a prose prompt
            pass
    if not _candidate_loads():
        return {"passed": 0, "total": 0, "failures": [WORKER.load_error], "load_error": WORKER.load_error}
    for n in PAYLOAD["call_names"]:
        ns[n] = _proxy(n)
    ns["__lw_unit_pass__"], ns["__lw_unit_fail__"] = _unit_pass, _unit_fail
    code = compile(PAYLOAD["tests"], "tests.py", "exec")  # instrumented by eval.sandbox.code_tests
    try:
        exec(code, ns)
    except BaseException as e:  # noqa: BLE001 - set-up of the tests failed outside any test
        _unit_fail(e)
    passed = sum(ok for ok, _ in OUTCOMES)
    failures = [msg for ok, msg in OUTCOMES if not ok][:MAX_FAILURES_KEPT]
    return {"passed": passed, "total": len(OUTCOMES), "failures": failures, "load_error": None}


try:
    verdict = main()
except BaseException as e:  # noqa: BLE001 - report, never crash without a verdict
    verdict = {"passed": 0, "total": 0, "failures": [], "judge_error": f"{type(e).__name__}: {e}"[:500]}
WORKER.kill()
verdict["secret"] = PAYLOAD["secret"]
os.write(VERDICT_FD, json.dumps(verdict).encode())
os._exit(0)
