"""Resume never loses a valid record, refuses a changed model, and one writer holds a run at a time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.report import load_results, print_report
from eval.results_store import RunDirectoryBusy, RunLock, recover
from eval.runner import evaluate

ARGS = dict(limit=4, methods="single", max_new_tokens=3)


@pytest.fixture(scope="module")
def clean_run(tiny_eval, tmp_path_factory):
    out = evaluate(tiny_eval(tmp_path_factory.mktemp("clean") / "r", **ARGS))
    return out, {(r["item_id"], r["method"]): r["prediction"] for r in load_results(out)}


def _copy_run(clean: Path, dest: Path) -> Path:
    shutil.copytree(clean, dest)
    for lock in dest.glob("*.lock"):
        lock.unlink()
    return dest


def test_corrupted_byte_in_the_middle_keeps_every_other_record(tiny_eval, clean_run, tmp_path):
    """One bad byte in line 2 of 4: lines 1, 3, 4 stay, line 2 is quarantined and recomputed, nothing else."""
    clean, expected = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    broken = bytearray(lines[1])
    broken[len(broken) // 2] = 0xFF  # not UTF-8, not JSON
    results.write_bytes(lines[0] + bytes(broken) + lines[2] + lines[3])
    kept_before = {lines[i] for i in (0, 2, 3)}
    evaluate(tiny_eval(out, resume=True, **ARGS))
    after = results.read_bytes().splitlines(keepends=True)
    assert kept_before <= set(after), "a valid record was deleted"
    assert len(after) == 4  # the three kept + the one recomputed, no duplicates
    got = {(r["item_id"], r["method"]): r["prediction"] for r in load_results(out)}
    assert got == expected
    quarantined = [json.loads(q) for q in (out / "results.jsonl.quarantine").read_text().splitlines()]
    assert len(quarantined) == 1 and quarantined[0]["line"] == 2 and "not JSON" in quarantined[0]["reason"]


def test_non_object_lines_are_quarantined_not_fatal(tiny_eval, clean_run, tmp_path):
    """`[1, 2]`, a bare string, an object without item_id and a torn tail: resume goes on, all quarantined."""
    clean, expected = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    junk = ["[1, 2]\n", '"just a string"\n', '{"item_id": 3, "method": "single"}\n']
    results.write_text(
        lines[0] + junk[0] + lines[1] + junk[1] + junk[2] + "".join(lines[2:]) + '{"item_id": "ar'
    )
    evaluate(tiny_eval(out, resume=True, **ARGS))
    assert results.read_text().splitlines(keepends=True) == lines  # nothing recomputed, junk removed
    reasons = [json.loads(q)["reason"] for q in (out / "results.jsonl.quarantine").read_text().splitlines()]
    assert len(reasons) == 4
    assert (
        any("list" in r for r in reasons)
        and any("str" in r for r in reasons)
        and any("torn" in r for r in reasons)
    )
    assert {(r["item_id"], r["method"]): r["prediction"] for r in load_results(out)} == expected


def test_changed_checkpoint_is_refused(tiny_eval, model_dir, clean_run, tmp_path):
    """Other weights at the same model path: resume refuses (fingerprint), results untouched."""
    from latent.testing import tiny_model

    clean, _ = clean_run
    model_copy = tmp_path / "model"
    shutil.copytree(model_dir, model_copy)
    out = tmp_path / "run"
    evaluate(tiny_eval(out, model=str(model_copy), **{**ARGS, "limit": 2}))
    before = (out / "results.jsonl").read_bytes()
    shutil.rmtree(model_copy)
    tiny_model("llama", model_copy, seed=1)  # other random weights, same path and architecture
    with pytest.raises(ValueError, match="fingerprint"):
        evaluate(tiny_eval(out, model=str(model_copy), resume=True, **{**ARGS, "limit": 2}))
    assert (out / "results.jsonl").read_bytes() == before


def test_dtype_change_refused_batch_size_change_recorded(tiny_eval, clean_run, tmp_path):
    """A resume with another dtype is refused; another batch size is allowed and recorded in the manifest."""
    clean, _ = clean_run
    out = _copy_run(clean, tmp_path / "run")
    with pytest.raises(ValueError, match="dtype"):
        evaluate(tiny_eval(out, resume=True, **{**ARGS, "dtype": "bfloat16"}))
    evaluate(tiny_eval(out, resume=True, **{**ARGS, "batch_size": 4}))
    resumes = json.loads((out / "manifest.json").read_text())["resumes"]
    assert resumes[-1]["changed"] == {"batch_size": [2, 4]}


_HOLD = """
import sys, time
from pathlib import Path
from eval.results_store import RunLock
lock = RunLock(Path(sys.argv[1]))
print("locked", flush=True)
time.sleep(60)
"""


def test_second_writer_is_refused(tiny_eval, clean_run, tmp_path):
    """While another process holds the run, a resume on the same --out is refused and writes nothing."""
    clean, _ = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:2]))  # two items left to run
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(results)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirectoryBusy, match=f"pid {holder.pid}"):
            evaluate(tiny_eval(out, resume=True, **ARGS))
        assert results.read_text() == "".join(lines[:2])
    finally:
        holder.kill()
        holder.wait()
    evaluate(tiny_eval(out, resume=True, **ARGS))  # the lock died with it
    assert len(results.read_text().splitlines()) == 4


def test_lock_is_exclusive_within_one_process_too(tmp_path):
    """Two RunLocks on one file conflict even in one process (flock is per open file)."""
    path = tmp_path / "results.jsonl"
    with RunLock(path):
        with pytest.raises(RunDirectoryBusy):
            RunLock(path)
    RunLock(path).release()


def test_report_warns_on_duplicates(clean_run, tmp_path, capsys):
    """Duplicated records (two writers) are counted once and the report says so."""
    clean, _ = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines) + lines[0] + lines[1])
    problems: dict = {}
    assert len(load_results(out, problems)) == 4 and len(problems["duplicates"]) == 2
    print_report(out)
    err = capsys.readouterr().err
    assert "2 (item, method) pairs were written more than once" in err
    assert "written more than once" in (out / "report.md").read_text()
    assert len(recover(results)) == 4


def test_recover_is_fast_on_a_big_file(tmp_path):
    """10,000 records with a bad line in the middle recover in well under a second per 10k lines."""
    path = tmp_path / "results.jsonl"
    rec = {"item_id": "x", "method": "single", "prediction": "p" * 200}
    body = [json.dumps({**rec, "item_id": f"i{k}"}) + "\n" for k in range(10_000)]
    body[5000] = "garbage\n"
    path.write_text("".join(body))
    start = time.monotonic()
    assert len(recover(path)) == 9_999
    assert time.monotonic() - start < 5
