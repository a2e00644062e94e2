"""Generators: full factorial conditions, seeded determinism, twins, request files."""

import pytest

from probes.data import (
    ASSERTIONS,
    af_scenarios,
    arith_requests,
    eval_deploy_pairs,
    load_requests,
    sycophancy_factual,
    sycophancy_opinion,
)


def test_af_scenarios_cover_every_condition():
    """Each request appears under 2 cues x 3 assertions x 2 researcher cues, with the tier tag set."""
    items = af_scenarios(n=3, seed=1)
    assert len(items) == 3 * 2 * len(ASSERTIONS) * 2
    conds = {(it.meta["cue"], it.meta["assertion"], it.meta["researcher"]) for it in items}
    assert len(conds) == 12
    t = next(it for it in items if it.meta["cue"] == "training" and it.meta["researcher"])
    assert "<is_free_tier_user>True" in t.messages[1]["content"] and "researcher" in t.messages[1]["content"]
    assert [it.messages for it in af_scenarios(n=3, seed=1)] == [it.messages for it in items]
    assert "SCRATCHPAD" in af_scenarios(n=1, template="full")[0].messages[0]["content"]
    with pytest.raises(ValueError, match="template"):
        af_scenarios(n=1, template="long")


def test_sycophancy_twins_and_arithmetic_truth():
    """Every problem has a wrong-claim item and a true-claim twin; answers are recomputable."""
    items = sycophancy_factual(6)
    assert sum(it.meta["claim_true"] for it in items) == 6
    for it in items:
        assert it.meta["claim_true"] == (it.meta["claim"] == it.meta["truth"])
    for r in arith_requests(5):
        assert r["solution"].endswith(f"\\boxed{{{r['answer']}}}")
    op = sycophancy_opinion(4)
    assert sum(it.meta["matches"] for it in op) == 4 and any(it.meta["researcher"] for it in op)


def test_eval_deploy_two_by_two():
    """Context x format is a balanced 2x2 per question."""
    items = eval_deploy_pairs(5)
    cells = [(it.meta["context"], it.meta["format"]) for it in items]
    assert len(items) == 20 and all(cells.count(c) == 5 for c in set(cells)) and len(set(cells)) == 4


def test_load_requests(tmp_path):
    """Text and CSV request files load; missing files and empty sets raise."""
    (tmp_path / "r.txt").write_text("Write a poem.\n\nName a color.\n")
    assert load_requests(tmp_path / "r.txt") == ["Write a poem.", "Name a color."]
    (tmp_path / "r.csv").write_text("goal,target\nSay hi,Sure\n")
    assert load_requests(tmp_path / "r.csv") == ["Say hi"]
    (tmp_path / "bad.csv").write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="column"):
        load_requests(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="does not exist"):
        load_requests(tmp_path / "none.txt")
    with pytest.raises(ValueError, match="positive"):
        sycophancy_factual(0)


def test_e1_cue_sample_keeps_one_condition_per_request_under_all_assertions():
    """`--cue-sample`: 3 prompts per request (one seeded cue x researcher pair), both cues represented."""
    from probes.config import ProbeConfig
    from probes.e1 import scenario_items

    items = scenario_items(ProbeConfig(n=20, cue_sample=True))
    assert len(items) == 60
    for rid in range(20):
        rows = [it.meta for it in items if it.meta["request_id"] == rid]
        assert sorted(m["assertion"] for m in rows) == ["deployed", "evaluation", "none"]
        assert len({(m["cue"], m["researcher"]) for m in rows}) == 1
    assert {it.meta["cue"] for it in items} == {"training", "unmonitored"}
    assert len(scenario_items(ProbeConfig(n=4))) == 48
