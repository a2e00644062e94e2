"""Judge model-written code by a verdict it cannot write: per-test outcomes from a separate judge.

`judge_code` runs `eval/sandbox/code_judge.py` in the sandbox. The judge holds the tests and writes the
verdict, with a per-run secret, to an unlinked file that only it was handed; the candidate runs in
its own fresh interpreter and only ever answers calls with plain data (`eval/sandbox/code_codec.py`). The
candidate's exit code, stdout, stderr, `atexit` hooks, `sys.excepthook`, forks, timers, rebound
builtins, `__eq__` overrides and files are all irrelevant to the verdict: a test passes only when
the judge itself saw the test's assertions hold on the values the candidate returned.

Example:
```python
from eval.sandbox.code_verdict import judge_code

v = judge_code("def add(a, b):\\n    return a + b\\n", "assert add(1, 2) == 3\\n", "add")
assert v.passed and (v.tests_passed, v.tests_total) == (1, 1)
```
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import secrets
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from eval.sandbox.code_tests import instrument
from eval.sandbox.process import PACKAGES_DIR, SandboxLimits, run_sandboxed

__all__ = [
    "CodeVerdict",
    "MAX_CANDIDATE_CHARS",
    "MAX_CANDIDATE_LINES",
    "SandboxImportError",
    "allowed_packages",
    "canary",
    "canary_items",
    "judge_code",
]

_HERE = Path(__file__).parent
_JUDGE = (_HERE / "code_judge.py").read_text()
_WORKER = (_HERE / "code_worker.py").read_text()
_CODEC = (_HERE / "code_codec.py").read_text()
_JUDGE_MARGIN_S = 5.0  # the judge's own start-up and bookkeeping, on top of the candidate's time
# A candidate longer than this is wrong before anything on our side looks at it (no regex, no parse).
MAX_CANDIDATE_CHARS = 200_000
MAX_CANDIDATE_LINES = 5_000
# Third-party packages the tests and the candidate may import, on every item (plus the stdlib).
_DEFAULT_PACKAGES = ("numpy",)
PACKAGES_ENV = "LW_SANDBOX_PACKAGES"


class SandboxImportError(ValueError):
    """The sandbox cannot import what a task's tests import: every item would score wrong."""


@dataclass
class CodeVerdict:
    """`passed` (pass@1 for this sample) is True only if every test ran and passed."""

    passed: bool
    tests_passed: int
    tests_total: int
    detail: str

    @property
    def pass_fraction(self) -> float:
        return self.tests_passed / self.tests_total if self.tests_total else 0.0


def allowed_packages() -> tuple[str, ...]:
    """Top-level packages the tests and the candidate may import: numpy, plus the comma-separated `LW_SANDBOX_PACKAGES`."""
    extra = [p.strip() for p in os.environ.get(PACKAGES_ENV, "").split(",") if p.strip()]
    return tuple(dict.fromkeys([*_DEFAULT_PACKAGES, *extra]))


@functools.cache
def _package_dirs(name: str) -> tuple[str, ...]:
    """The host directories (or module file) of package `name` and its bundled libraries."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return ()
    if spec is None:
        return ()
    if spec.submodule_search_locations:
        dirs = [os.path.realpath(d) for d in spec.submodule_search_locations]
    elif spec.origin and os.path.isfile(spec.origin):
        dirs = [os.path.realpath(spec.origin)]
    else:
        return ()
    libs = os.path.join(os.path.dirname(dirs[0]), name + ".libs")  # wheels' bundled shared libraries
    return tuple(dirs + ([os.path.realpath(libs)] if os.path.isdir(libs) else []))


def _mounts(packages: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(host paths to show the run, sys.path additions) for every allowed package installed here.

    One rule for every item: the tests and the candidate may both import the allowed packages
    (numpy by default), whatever the item's tests import, as in the official harnesses.
    """
    paths = [p for name in packages for p in _package_dirs(name)]
    # Inside the run's own root the packages are under PACKAGES_DIR; where the machine cannot build
    # one (no mount namespace) the host's own directories are used as they are.
    host_parents = sorted({os.path.dirname(p) for p in paths})
    return paths, [PACKAGES_DIR, *host_parents] if paths else []


def _oversized(candidate: str) -> str | None:
    if len(candidate) > MAX_CANDIDATE_CHARS:
        return f"the code is too long ({len(candidate)} characters; at most {MAX_CANDIDATE_CHARS})"
    if candidate.count("\n") > MAX_CANDIDATE_LINES:
        return f"the code has too many lines (more than {MAX_CANDIDATE_LINES})"
    return None


def judge_code(
    candidate: str,
    tests: str,
    entry_point: str | None,
    prompt: str = "",
    timeout: float = 10.0,
    memory_mb: int = 1024,
    call_names: Iterable[str] = (),
    packages: tuple[str, ...] | None = None,
) -> CodeVerdict:
    """Run `tests` against `candidate` (module source) in the sandbox; never raises for what either does.

    `entry_point` is the function the tests call (also as `candidate` inside HumanEval's `check`);
    `call_names` are further names the task declares as the candidate's (rare). Every other name the
    tests or the trusted `prompt` (the task's own helpers, run on the judge's side) use resolves to
    the judge's own object, builtins included, whatever the candidate defines. `packages`: the
    third-party packages the tests and the candidate may import (default `allowed_packages()`).
    """
    if not isinstance(candidate, str):
        return CodeVerdict(False, 0, 0, f"the code is not a str but {type(candidate).__name__}")
    too_big = _oversized(candidate)
    if too_big:
        return CodeVerdict(False, 0, 0, too_big)
    names = sorted({*call_names, *([entry_point] if entry_point else [])})
    if not names:
        return CodeVerdict(False, 0, 0, "the task names no function of the code to test (entry_point)")
    secret = secrets.token_hex(16)
    try:
        instrumented = instrument(tests, set(names))
    except (SyntaxError, ValueError, RecursionError) as e:
        return CodeVerdict(False, 0, 0, f"the tests do not parse: {type(e).__name__}: {e}")
    mounts, extra_paths = _mounts(allowed_packages() if packages is None else tuple(packages))
    payload = {
        "secret": secret,
        "candidate": candidate,
        "tests": instrumented,
        "call_names": names,
        "prompt": prompt,
        "timeout": float(timeout),
        "worker": _WORKER,
        "codec": _CODEC,
        "extra_paths": extra_paths,
    }
    data = json.dumps(payload).encode("utf-8", "surrogatepass")
    # The judge gets the default process, file-size and network limits; time and memory are the item's.
    limits = SandboxLimits(timeout=timeout + _JUDGE_MARGIN_S, memory_mb=memory_mb)
    result, _, raw = run_sandboxed(_JUDGE, limits=limits, payload=data, packages=tuple(mounts))
    verdict = None
    try:
        verdict = json.loads(raw) if raw else None
    except ValueError:
        verdict = None
    if not isinstance(verdict, dict) or verdict.get("secret") != secret:
        return CodeVerdict(False, 0, 0, f"no verdict from the judge ({result.reason})")
    if verdict.get("judge_error"):
        return CodeVerdict(False, 0, 0, "judge error: " + str(verdict["judge_error"]))
    passed, total = int(verdict.get("passed", 0)), int(verdict.get("total", 0))
    failures = [str(f) for f in verdict.get("failures") or [] if f]
    if total == 0:
        detail = failures[0] if failures else "the tests contain no assertion"
        return CodeVerdict(False, 0, 0, detail)
    ok = passed == total
    detail = (
        "ok" if ok else f"{total - passed} of {total} tests failed; first: {failures[0] if failures else '?'}"
    )
    return CodeVerdict(ok, passed, total, detail)


# --------------------------------------------------------------------------- canary

_CANARY_FN = "lw_canary"
_IMPORT_LINE_RE = re.compile(r"^(?:import |from \S+ import )")


def _import_lines(source: str) -> str:
    return "".join(ln + "\n" for ln in source.splitlines() if _IMPORT_LINE_RE.match(ln))


def _why_hidden(module: str, packages: tuple[str, ...]) -> str:
    dirs = _package_dirs(module)
    if not dirs:
        return (
            f"`{module}` is not installed for {sys.executable}; install it there "
            f"(`{sys.executable} -m pip install {module}`)"
        )
    if module not in packages:
        return (
            f"`{module}` (at {dirs[0]}) is not an allowed package: the sandbox shows the tests only "
            f"{', '.join(packages) or 'no third-party package'}; allow it with "
            f"{PACKAGES_ENV}={','.join([*packages, module])} (or `packages=` of judge_code)"
        )
    return (
        f"`{module}` is at {dirs[0]} on this machine but could not be imported inside the sandbox; "
        "check that the sandbox works here (`eval.sandbox.isolation_report()`)"
    )


@functools.cache
def _canary(tests_imports: str, prompt_imports: str, packages: tuple[str, ...]) -> str | None:
    candidate = prompt_imports + f"def {_CANARY_FN}():\n    return 1\n"
    tests = tests_imports + prompt_imports + f"assert {_CANARY_FN}() == 1\n"
    v = judge_code(candidate, tests, _CANARY_FN, timeout=10.0, packages=packages)
    return None if v.passed else v.detail


def canary(tests: str, prompt: str = "", packages: tuple[str, ...] | None = None) -> None:
    """Check, once per distinct set of imports, that the sandbox can run what a task's tests import.

    Raises `SandboxImportError` naming the module, where it lives on this machine and the fix,
    instead of letting every item of a benchmark score wrong. Cached: costs one sandbox run per
    distinct import set per process.
    """
    pk = allowed_packages() if packages is None else tuple(packages)
    detail = _canary(_import_lines(tests), _import_lines(prompt), pk)
    if detail is None:
        return
    m = re.search(r"No module named '([^'.]+)", detail)
    why = _why_hidden(m.group(1), pk) if m else "the sandbox itself failed"
    raise SandboxImportError(
        f"code scoring cannot work here: a canary run of the task's own imports failed ({detail}). "
        f"{why}. Nothing was scored."
    )


def canary_items(items: Iterable) -> None:
    """`canary` for every code item of a task (items with `kind == "code"` and tests)."""
    for it in items:
        if getattr(it, "kind", None) == "code" and getattr(it, "tests", None):
            canary(it.tests, (it.meta or {}).get("prompt", ""))
