"""Each check of a results record on its own: a record that fails exactly one check is refused for it."""

from __future__ import annotations

import pytest

from eval.run_state.records import RunExpectation, checksum, record_problem, seal

RUN = "a1b2c3d4e5f60718"
EXPECT = RunExpectation(
    run_id=RUN,
    item_ids=frozenset({"arith-0-0", "arith-0-1"}),
    methods=("single",),
    task="arith",
    graph="sequential",
)
LEGACY = RunExpectation(**{**EXPECT.__dict__, "legacy": True})


def _rec(**changes) -> dict:
    rec = {
        "item_id": "arith-0-0", "method": "single", "graph": "sequential", "task": "arith",
        "prediction": "\\boxed{2}", "extracted": "2", "gold": "2", "correct": True, "output_tokens": 5,
        "wall_s": 0.1, "agents": [{"name": "judger", "latent_steps": 0}],
    }  # fmt: skip
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not None}


def test_a_sealed_record_of_this_run_passes():
    assert record_problem(seal(_rec(), RUN), EXPECT) is None


@pytest.mark.parametrize(
    "record, words",
    [
        (seal(_rec(correct=None), RUN), "no `correct`"),
        (seal(_rec(correct="yes"), RUN), "not true/false"),
        (seal(_rec(correct=1), RUN), "not true/false"),
        (seal(_rec(output_tokens=-1), RUN), "output_tokens"),
        (seal(_rec(output_tokens=True), RUN), "output_tokens"),
        (seal(_rec(wall_s=float("nan")), RUN), "wall_s"),
        (seal(_rec(prediction=3), RUN), "prediction"),
        (seal(_rec(method="debate"), RUN), "method"),
        (seal(_rec(agents="x"), RUN), "agents"),
        (seal(_rec(tests_passed=3, tests_total=2), RUN), "tests_passed"),
        (seal(_rec(item_id="arith-0-9"), RUN), "not in this run's task"),
        (seal(_rec(method="latent_mas"), RUN), "not evaluated in this run"),
        (seal(_rec(task="gsm8k"), RUN), "task"),
        (seal(_rec(graph="hierarchical"), RUN), "graph"),
        (seal(_rec(), "ffffffffffffffff"), "another run"),
        ({**seal(_rec(), RUN), "correct": False}, "checksum mismatch"),
        ({**_rec(), "run_id": RUN}, "incomplete seal"),
        (_rec(), "no run_id/check"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_a_record_failing_one_check_is_refused_for_it(record, words):
    why = record_problem(record, EXPECT)
    assert why is not None and words in why, why


def test_legacy_policy_unsealed_records_pass_only_in_a_legacy_run_and_are_still_checked():
    """A run started before records were sealed: its unsealed records count if schema, item set, method,
    task and graph agree; a sealed record of another run is still refused."""
    assert record_problem(_rec(), LEGACY) is None
    assert "not in this run's task" in record_problem(_rec(item_id="arith-0-7"), LEGACY)
    assert "not true/false" in record_problem(_rec(correct="yes"), LEGACY)
    assert "another run" in record_problem(seal(_rec(), "ffffffffffffffff"), LEGACY)


def test_checksum_ignores_key_order_and_sees_any_change():
    rec = seal(_rec(), RUN)
    assert checksum(dict(reversed(list(rec.items())))) == rec["check"]
    assert checksum({**rec, "extracted": "3"}) != rec["check"]
