"""A run whose longer items outgrow the model's context goes on: those items are recorded as failures
with the reason, every other item is scored, a resume runs nothing twice, and the report counts them."""

import json
import shutil
from pathlib import Path

import pytest

from eval.report import print_report, summarize
from eval.run_state import load_results
from eval.run_state.records import CONTEXT_OVERFLOW, RunExpectation, read_line, seal
from eval.runner import evaluate
from eval.tasks import load_task

RUN = dict(limit=6, methods="single,latent_mas", max_new_tokens=4)


@pytest.fixture(scope="module")
def measured(tiny_eval, model_dir, tmp_path_factory):
    """One item at a time on the full context: each (item, method)'s longest input in positions, and
    the records of that run (the answers every item that fits must get again)."""
    import agents
    from latent.model import LatentModel

    mp = pytest.MonkeyPatch()
    seen, needs = [], {}
    forward, run = LatentModel._forward, agents.run

    def spy_forward(self, embeds, mask, state, check=True):  # every forward (loops check the context rarely)
        start = 0 if state is None else state.next_position
        seen.append(int((start + mask.sum(1)).max()))
        return forward(self, embeds, mask, state, check)

    def spy_run(graph, model, questions, config=None, **kw):
        seen.clear()
        out = run(graph, model, questions, config=config, **kw)
        needs[questions[0], config.method] = max(seen)
        return out

    mp.setattr(LatentModel, "_forward", spy_forward)
    mp.setattr(agents, "run", spy_run)
    cfg = tiny_eval(tmp_path_factory.mktemp("full") / "run", batch_size=1, **RUN)
    try:
        out = evaluate(cfg)
    finally:
        mp.undo()
    items = load_task("arith", limit=RUN["limit"], seed=cfg.run.seed).items
    by_pair = {(it.id, m): n for it in items for (q, m), n in needs.items() if q.startswith(it.question)}
    assert len(by_pair) == len(needs) == 2 * RUN["limit"]
    return by_pair, {(r["item_id"], r["method"]): r for r in load_results(out)}


@pytest.fixture(scope="module")
def short_model(measured, model_dir, tmp_path_factory):
    """The tiny model with `max_position_embeddings` lowered so that about half the items fit under
    latent_mas (its prompts and thoughts are the longest) and every item fits under single; and the
    number of positions allowed."""
    needs, _ = measured
    latent = sorted(n for (_, m), n in needs.items() if m == "latent_mas")
    limit = latent[len(latent) // 2 - 1]
    assert max(n for (_, m), n in needs.items() if m == "single") <= limit < latent[-1]
    d = tmp_path_factory.mktemp("short-context") / "model"
    shutil.copytree(model_dir, d)
    config = json.loads((d / "config.json").read_text())
    config["max_position_embeddings"] = limit
    (d / "config.json").write_text(json.dumps(config))
    return str(d), limit


def _lines(out: Path) -> list[bytes]:
    return (out / "results.jsonl").read_bytes().splitlines(keepends=True)


def test_items_past_the_context_are_recorded_as_failures_and_the_rest_scored(
    tiny_eval, measured, short_model, tmp_path, capsys
):
    needs, full = measured
    model, limit = short_model
    out = evaluate(tiny_eval(tmp_path / "run", model=model, **RUN))  # batch 2: a batch mixes both kinds
    recs = load_results(out)
    pairs = [(r["item_id"], r["method"]) for r in recs]
    assert sorted(pairs) == sorted(full) and len(_lines(out)) == len(full)  # every pair, exactly once

    failed = {(r["item_id"], r["method"]) for r in recs if "error" in r}
    expected = {pair for pair, n in needs.items() if n > limit}
    assert failed == expected and 0 < len(failed) < len(full) / 2
    for r in recs:
        if (r["item_id"], r["method"]) in failed:
            assert r["error"].startswith(CONTEXT_OVERFLOW + "the input runs past the model's context")
            assert f"max_position_embeddings {limit}" in r["error"]
            assert (r["correct"], r["prediction"], r["output_tokens"]) == (False, "", 0)
        else:  # scored as it is on the full context
            f = full[r["item_id"], r["method"]]
            assert (r["prediction"], r["correct"], r["output_tokens"]) == (
                f["prediction"],
                f["correct"],
                f["output_tokens"],
            )

    rows = {row["method"]: row for row in summarize(recs)}
    assert rows["latent_mas"]["failed"] == len(failed) and rows["single"]["failed"] == 0
    assert rows["latent_mas"]["n"] == RUN["limit"]  # the failures count in the accuracy

    capsys.readouterr()
    print_report(out)
    err = capsys.readouterr().err
    assert f"warning: {len(failed)} item(s) ran past the model's context and are scored as failures" in err
    assert f"(latent_mas {len(failed)})" in err
    assert f"latent_mas {len(failed)}" in (out / "report.md").read_text()

    # A resume runs nothing: every pair, the failures included, is done.
    before = _lines(out)
    evaluate(tiny_eval(tmp_path / "run", model=model, resume=True, **RUN))
    assert _lines(out) == before

    # Cut the run after its first four records (a kill): the resume runs each missing pair once.
    kept = before[:4]
    (out / "results.jsonl").write_bytes(b"".join(kept))
    evaluate(tiny_eval(tmp_path / "run", model=model, resume=True, **RUN))
    after = _lines(out)
    assert after[:4] == kept and len(after) == len(before)
    assert sorted((r["item_id"], r["method"]) for r in load_results(out)) == sorted(full)
    assert {(r["item_id"], r["method"]) for r in load_results(out) if "error" in r} == failed


def test_another_error_still_stops_the_run(tiny_eval, short_model, tmp_path, monkeypatch):
    import agents

    def broken(*args, **kw):
        raise ValueError("something else went wrong")

    monkeypatch.setattr(agents, "run", broken)
    with pytest.raises(ValueError, match="something else went wrong"):
        evaluate(tiny_eval(tmp_path / "run", model=short_model[0], **RUN))


def test_an_error_field_only_on_a_wrong_record():
    base = {
        "item_id": "a",
        "method": "single",
        "correct": False,
        "prediction": "",
        "output_tokens": 0,
        "wall_s": 0.1,
        "agents": [],
        "error": CONTEXT_OVERFLOW + "the input runs past the model's context",
    }
    expect = RunExpectation(run_id="r")

    def read(rec):
        return read_line((json.dumps(seal(rec, "r")) + "\n").encode(), expect)

    assert read(base)[1] is None
    assert "`error`" in read({**base, "correct": True})[1]
    assert "`error`" in read({**base, "error": 3})[1]
    line = json.dumps(seal(base, "r")).replace("context overflow", "context overfloW") + "\n"
    assert "checksum" in read_line(line.encode(), expect)[1]  # the reason is sealed like every field
