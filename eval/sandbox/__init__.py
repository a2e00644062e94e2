"""The code sandbox: model-written Python runs in a separate, resource-limited, network-less process
tree (`run_python`, `run_sandboxed`: `eval.sandbox.process`, set up by the launcher script
`eval/sandbox/launcher.py` and `eval.sandbox.limits`), and code answers are judged there
(`judge_code`: `eval.sandbox.code_verdict`, whose judge and worker scripts run as separate
interpreters). Nothing here runs model-written code in the calling process. The threat model is in
eval/sandbox/README.md.

Example:
```python
from eval.sandbox import run_python

result = run_python("print(sum(range(10)))", timeout=5)
assert result.ok and result.stdout.strip() == "45"
```
"""

from eval.sandbox.code_verdict import (
    MAX_CANDIDATE_CHARS,
    MAX_CANDIDATE_LINES,
    CodeVerdict,
    SandboxImportError,
    allowed_packages,
    canary,
    canary_items,
    judge_code,
)
from eval.sandbox.process import (
    SandboxLimits,
    SandboxResult,
    SandboxRun,
    isolation_report,
    run_python,
    run_sandboxed,
)

__all__ = [
    "CodeVerdict",
    "MAX_CANDIDATE_CHARS",
    "MAX_CANDIDATE_LINES",
    "SandboxImportError",
    "SandboxLimits",
    "SandboxResult",
    "SandboxRun",
    "allowed_packages",
    "canary",
    "canary_items",
    "isolation_report",
    "judge_code",
    "run_python",
    "run_sandboxed",
]
