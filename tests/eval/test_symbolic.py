"""The symbolic helper can be started ahead, so a run's first math score does not wait for sympy."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("math_verify")

_FIRST_COMPARISON = """
import time
from eval.scoring import symbolic
starts = []
real = symbolic._start
symbolic._start = lambda: starts.append(1) or real()
symbolic.prestart()
if {wait}:
    symbolic._starting.join(60)
t = time.perf_counter()
assert symbolic.symbolic_equal("\\\\sqrt{{196}}", "14") is True
print(round(time.perf_counter() - t, 3), len(starts))
"""


def _first(wait: bool) -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_COMPARISON.format(wait=wait)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    seconds, starts = out.stdout.split()
    return float(seconds), int(starts)


def test_a_prestarted_helper_makes_the_first_comparison_fast():
    """After `prestart` has had its time (a model load), the first comparison costs no import."""
    seconds, starts = _first(wait=True)
    assert starts == 1 and seconds < 0.5


def test_a_comparison_during_the_prestart_waits_for_it_rather_than_starting_another():
    """Asked before the prestarted helper is ready, the comparison uses it: one helper, one import."""
    _, starts = _first(wait=False)
    assert starts == 1


def test_a_math_run_prestarts_the_helper_before_its_model_loads(tiny_eval, tmp_path, monkeypatch):
    """`evaluate` on a math task calls `prestart` before `load_model`."""
    import latent
    from eval.runner import evaluate
    from eval.scoring import symbolic

    calls = []
    monkeypatch.setattr(symbolic, "prestart", lambda: calls.append("prestart"))
    real_load = latent.load_model
    monkeypatch.setattr(latent, "load_model", lambda *a, **k: calls.append("load") or real_load(*a, **k))
    evaluate(tiny_eval(tmp_path / "r", limit=1, methods="single", max_new_tokens=2))
    assert calls[:2] == ["prestart", "load"]
