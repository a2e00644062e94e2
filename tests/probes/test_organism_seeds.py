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


def _per_request_study(n: int = 16) -> dict:
    """Both organisms have gap 1 on every request; ablating R removes the sycophant's gap only."""
    import numpy as np

    keys = ("base_no_res", "add_R_no_res", "random_R_no_res", "base_res", "ablate_random_res", "ablate_M_res")
    study = {}
    for kind, after in (("sycophant", np.zeros(n)), ("schemer", np.ones(n))):
        per = {f"{p}_{k}": np.ones(n) for p in ("gap", "mgap") for k in keys}
        per |= {"gap_ablate_R_res": after, "mgap_ablate_R_res": np.ones(n), "request_id": np.arange(n)}
        row = {"layer": "all", "mgap_base_res": 10.0, "per_request": per}
        row |= {f"{p}_effect_{k}": 0.0 for p in ("gap", "mgap") for k in ("add_R", "ablate_R", "random")}
        row |= {"gap_effect_ablate_R": float(after.mean() - 1), "gap_effect_ablate_random": 0.0}
        row |= {"mgap_effect_ablate_random": 0.0}
        beh, probes = {"spec_agreement_af": 1.0}, [{"auroc_researcher": 0.9}]
        study[kind] = {"steering": [row], "behaviour": beh, "probes": probes}
    return study


def test_a_report_without_the_count_is_recomputed_from_its_per_request_data(tmp_path):
    """A held-out-era report written before the predicted-side count gets it from its own per-request
    data, after the recomputation reproduced its stored intervals; a report whose intervals it does not
    reproduce is refused."""
    from probes.organism_study import organism_verdict
    from probes.report import to_jsonable

    study = _per_request_study()
    verdict = organism_verdict(study, n_boot=200, seed=3)
    for t in TESTS:
        del verdict[t]["difference_predicted_side"]
    report = {
        "experiment": "organisms",
        "config": {"seed": 3, "n_boot": 200},
        "study": study,
        "verdict": verdict,
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(to_jsonable(report)))
    (got,) = load([path])
    side = got["verdict"]["gap_effect_ablate_R"]["difference_predicted_side"]
    assert got["recomputed"] and (side["k"], side["n"]) == (8, 8)
    assert "counted from the report's per-request data" in summarize([got])[0]
    report["verdict"]["gap_effect_ablate_R"]["difference_ci"] = {"mean": 0.0, "lo": -1.0, "hi": 1.0}
    path.write_text(json.dumps(to_jsonable(report)))
    with pytest.raises(ValueError, match="does not reproduce"):
        load([path])
