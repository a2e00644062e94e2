"""The organism study across seeds: the table marks each test where the seeds' verdicts differ, and bad
inputs are refused with the fix."""

from __future__ import annotations

import json

import pytest

from probes.organism_seeds import TESTS, load, main, summarize


def _report(seed: int, verdicts: dict[str, str], selection: bool = True) -> dict:
    def test(v: str) -> dict:
        ci = {"mean": -1.0, "lo": -1.5, "hi": -0.5}
        out = {"difference_ci": ci, "difference_verdict": v, "n_requests": 8}
        out |= {"n_selection": 8, "difference_predicted_side": {"k": 7, "n": 8, "lo": 0.53, "hi": 0.98}}
        return (
            out if selection else {k: out[k] for k in ("difference_ci", "difference_verdict", "n_requests")}
        )

    verdict = {k: test(verdicts.get(k, "supported")) for k in TESTS}
    verdict |= {"organisms_follow_spec": True, "cue_probes_separate": False}
    return {"experiment": "organisms", "config": {"seed": seed}, "verdict": verdict}


def test_the_table_says_where_seeds_disagree(tmp_path):
    odd = {"gap_effect_add_R": "not measurable on this model"}
    paths = []
    for seed, v in ((0, {}), (1, odd), (2, {})):
        paths.append(tmp_path / f"s{seed}.json")
        paths[-1].write_text(json.dumps(_report(seed, v)))
    text, summary = summarize(load(paths))
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["add R, greedy gap (> 0)"].endswith("| seeds disagree |")
    assert rows["ablate R, greedy gap (< 0)"].endswith("| agree |")
    assert "7/8 requests [0.53, 0.98]" in rows["ablate R, greedy gap (< 0)"]
    assert summary["supported"] == [4, 3, 4] and not summary["tests"]["gap_effect_add_R"]["agree"]
    assert "row picked on 8 steered requests, interval over the other 8" in text
    out = tmp_path / "seeds.md"
    assert main([*map(str, paths), "--out", str(out)]) == 0
    assert out.read_text() == text and json.loads(out.with_suffix(".json").read_text())["seeds"] == [0, 1, 2]


def test_old_reports_are_named_and_bad_inputs_refused(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_report(0, {}, selection=False)))
    new.write_text(json.dumps(_report(1, {})))
    text, _ = summarize(load([old, new]))
    assert "seed 0: row picked on the same requests as the interval" in text
    with pytest.raises(ValueError, match="share a seed"):
        load([new, new])
    with pytest.raises(FileNotFoundError, match="organisms.json"):
        load([tmp_path / "missing.json"])
    e1 = tmp_path / "e1.json"
    e1.write_text(json.dumps({"experiment": "e1", "verdict": {}}))
    with pytest.raises(ValueError, match="not an organism report"):
        load([e1])
    bare = _report(2, {})
    del bare["verdict"]["mgap_effect_add_R"]["difference_ci"]
    e1.write_text(json.dumps(bare))
    with pytest.raises(ValueError, match="rerun that seed"):
        load([e1])
