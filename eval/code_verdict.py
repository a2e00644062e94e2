"""Judge model-written code by a verdict it cannot write: per-test outcomes from a separate judge.

`judge_code` runs `eval/code_judge.py` in the sandbox. The judge holds the tests and writes the
verdict, with a per-run secret, to an unlinked file that only it was handed; the candidate runs in
its own fresh interpreter and only ever answers calls with plain data (`eval/code_codec.py`). The
candidate's exit code, stdout, stderr, `atexit` hooks, `sys.excepthook`, forks, timers, rebound
builtins, `__eq__` overrides and files are all irrelevant to the verdict: a test passes only when
the judge itself saw the test's assertions hold on the values the candidate returned.

Example:
```python
from eval.code_verdict import judge_code

v = judge_code("def add(a, b):\\n    return a + b\\n", "assert add(1, 2) == 3\\n", "add")
assert v.passed and (v.tests_passed, v.tests_total) == (1, 1)
```
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from eval.code_tests import candidate_names, instrument
from eval.sandbox import _run

__all__ = ["CodeVerdict", "judge_code"]

_HERE = Path(__file__).parent
_JUDGE = (_HERE / "code_judge.py").read_text()
_WORKER = (_HERE / "code_worker.py").read_text()
_CODEC = (_HERE / "code_codec.py").read_text()
_JUDGE_MARGIN_S = 5.0  # the judge's own start-up and bookkeeping, on top of the candidate's time


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


def _extra_paths(tests: str) -> list[str]:
    """Site directories of the tests' own third-party imports (numpy in HumanEval+/MBPP+), judge only."""
    if "numpy" not in tests:
        return []
    try:
        import numpy
    except ImportError:
        return []
    return [str(Path(numpy.__file__).resolve().parent.parent)]


def judge_code(
    candidate: str,
    tests: str,
    entry_point: str | None,
    prompt: str = "",
    timeout: float = 10.0,
    memory_mb: int = 1024,
) -> CodeVerdict:
    """Run `tests` against `candidate` (module source) in the sandbox; never raises for what either does.

    `entry_point` is the function the tests call (also as `candidate` inside HumanEval's `check`);
    `prompt` is the task's own code (helpers the tests use), run on the judge's side.
    """
    secret = secrets.token_hex(16)
    try:
        instrumented = instrument(
            tests, candidate_names(candidate) | ({entry_point} if entry_point else set())
        )
    except (SyntaxError, ValueError, RecursionError) as e:
        return CodeVerdict(False, 0, 0, f"the tests do not parse: {type(e).__name__}: {e}")
    payload = {
        "secret": secret,
        "candidate": candidate,
        "tests": instrumented,
        "entry_point": entry_point,
        "prompt": prompt,
        "timeout": float(timeout),
        "worker": _WORKER,
        "codec": _CODEC,
        "extra_paths": _extra_paths(tests),
    }
    data = json.dumps(payload).encode("utf-8", "surrogatepass")
    result, _, raw = _run(_JUDGE, timeout + _JUDGE_MARGIN_S, memory_mb, 32, 16, False, payload=data)
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
    failures = [str(f) for f in verdict.get("failures") or []]
    if total == 0:
        detail = failures[0] if failures else "the tests contain no assertion"
        return CodeVerdict(False, 0, 0, detail)
    ok = passed == total
    detail = (
        "ok" if ok else f"{total - passed} of {total} tests failed; first: {failures[0] if failures else '?'}"
    )
    return CodeVerdict(ok, passed, total, detail)
