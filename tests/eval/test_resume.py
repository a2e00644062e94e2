"""Resume never loses a valid record, refuses a changed model, and one writer holds a run at a time."""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.report import print_report, summarize
from eval.run_state import load_results
from eval.run_state.files import RunDirectoryBusy, RunLock, recover
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
from eval.run_state.files import RunLock
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


# ----------------------------------------------------------------------------- the resume fault table
# One row per way a results directory can lie on resume. Every row: the valid records stay byte for
# byte, no foreign or damaged record is counted, the run ends with one clear line, never a traceback.
# docs/resume-faults.md is the same table in prose.


def _reseal(line: str, **changes) -> str:
    """The record of `line` with `changes`, sealed again with its own run id (a record this run could
    have written, but with the change): only the schema or item checks can catch it."""
    from eval.run_state.records import seal

    rec = json.loads(line)
    run_id = rec.pop("run_id")
    rec.pop("check")
    rec.update(changes)
    rec = {k: v for k, v in rec.items() if v is not _DROP}
    return json.dumps(seal(rec, run_id)) + "\n"


_DROP = object()
_OTHER_RUN = "0123456789abcdef"


def _foreign(line: str, **changes) -> str:
    """The record of `line` as another run would have written it (its own run id, another answer)."""
    from eval.run_state.records import seal

    rec = json.loads(line)
    rec.pop("run_id"), rec.pop("check")
    rec.update(prediction="\\boxed{-1}", extracted="-1", correct=False, **changes)
    return json.dumps(seal(rec, _OTHER_RUN)) + "\n"


def _damage_item_id(lines):
    lines[1] = lines[1].replace('"item_id": "arith-0-', '"item_id": "arith-0-9', 1)
    return lines, {1}


def _foreign_same_item(lines):
    lines[1] = _foreign(lines[1])
    return lines, {1}


def _foreign_new_item(lines):
    lines[3] = _foreign(lines[3])  # item 4 not done by this run; another run's record of it
    return lines, {3}


def _no_correct(lines):
    lines[2] = _reseal(lines[2], correct=_DROP)
    return lines, {2}


def _correct_yes(lines):
    lines[2] = _reseal(lines[2], correct="yes")
    return lines, {2}


class _NoSpace:
    """A file whose writes fail as on a full disk."""

    def __init__(self, fh):
        self._fh = fh

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def _disk_full(monkeypatch, out):
    real_open, real_fdopen = builtins.open, os.fdopen

    def full_open(file, mode="r", *args, **kw):
        fh = real_open(file, mode, *args, **kw)
        if str(file).endswith("results.jsonl") and "a" in mode:
            return _NoSpace(fh)
        return fh

    def full_fdopen(fd, mode="r", *args, **kw):  # run-folder files are opened by descriptor
        fh = real_fdopen(fd, mode, *args, **kw)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("results.jsonl") and "a" in mode:
            return _NoSpace(fh)
        return fh

    monkeypatch.setattr(builtins, "open", full_open)
    monkeypatch.setattr(os, "fdopen", full_fdopen)


def _read_only(monkeypatch, out):
    real_open, real_os_open = builtins.open, os.open
    inside = str(out)

    def ro_open(file, mode="r", *args, **kw):
        if str(file).startswith(inside) and any(c in mode for c in "wax+"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(file, mode, *args, **kw)

    def ro_os_open(path, flags, *args, **kw):
        if str(path).startswith(inside) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_os_open(path, flags, *args, **kw)

    monkeypatch.setattr(builtins, "open", ro_open)
    monkeypatch.setattr(io, "open", ro_open)  # pathlib's write_text opens through io.open
    monkeypatch.setattr(os, "open", ro_os_open)


def _deep_line(lines):
    lines.insert(2, "[" * 100_000 + "]" * 100_000 + "\n")  # past the JSON parser's recursion limit
    return lines, {2}


def _huge_int_line(lines):
    lines.insert(1, '{"item_id": "arith-0-0", "n": ' + "9" * 5_000 + "}\n")  # past int()'s digit limit
    return lines, {1}


def _retyped_manifest(manifest):
    m = json.loads(manifest.read_text())
    m["run_id"] = 123  # JSON, but not a run id: every record would have looked foreign
    manifest.write_text(json.dumps(m))


def _foreign_manifest(manifest):
    m = json.loads(manifest.read_text())
    m["run_id"] = _OTHER_RUN  # another run's manifest over these records
    manifest.write_text(json.dumps(m))


def _deep_manifest(manifest):
    manifest.write_text('{"identity": ' + "[" * 100_000 + "]" * 100_000 + "}")


# (row id, how the directory is damaged, the fault injected while resuming, what ends the run, words of it)
FAULTS = [
    ("damaged item_id", _damage_item_id, None, "quarantined", "checksum mismatch"),
    ("foreign-run record, same item", _foreign_same_item, None, "quarantined", "another run"),
    ("foreign-run record, new item", _foreign_new_item, None, "quarantined", "another run"),
    ("record without correct", _no_correct, None, "quarantined", "no `correct` field"),
    ('correct: "yes"', _correct_yes, None, "quarantined", "not true/false"),
    ("manifest deleted", "rm-manifest", None, "error", "manifest.json"),
    ("truncated manifest", "cut-manifest", None, "error", "manifest.json is damaged"),
    ("disk full", "drop-last-two", _disk_full, "error", "No space left on device"),
    ("read-only directory", "drop-last-two", _read_only, "error", "read-only"),
    ("deeply nested line", _deep_line, None, "quarantined", "nested too deeply"),
    ("line with a 5,000-digit number", _huge_int_line, None, "quarantined", "not JSON"),
    ("manifest field of the wrong type", _retyped_manifest, None, "error", "`run_id` is int"),
    ("manifest of another run", _foreign_manifest, None, "error", "the manifest is another run's"),
    ("deeply nested manifest", _deep_manifest, None, "error", "nested too deeply"),
]


def _cli_resume(model_dir, out) -> list[str]:
    return [
        "eval",
        "--model",
        model_dir,
        "--task",
        "arith",
        "--limit",
        "4",
        "--methods",
        "single",
        "--batch-size",
        "2",
        "--latent-steps",
        "1",
        "--max-new-tokens",
        "3",
        "--out",
        str(out),
        "--resume",
        "--no-progress",
        "--no-report",
    ]  # fmt: skip  (the settings of `clean_run`, as flags)


@pytest.mark.parametrize("row, damage, fault, ending, words", FAULTS, ids=[f[0] for f in FAULTS])
def test_resume_fault_table(
    row, damage, fault, ending, words, model_dir, clean_run, tmp_path, monkeypatch, capsys
):
    from latentworks.cli import main

    clean, expected = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results, manifest = out / "results.jsonl", out / "manifest.json"
    lines = results.read_text().splitlines(keepends=True)
    bad: set[int] = set()
    if damage == "rm-manifest":
        manifest.unlink()
    elif damage == "cut-manifest":
        manifest.write_text(manifest.read_text()[:200])
    elif damage == "drop-last-two":
        lines = lines[:2]
    elif damage in (_retyped_manifest, _foreign_manifest, _deep_manifest):
        damage(manifest)
    else:
        lines, bad = damage(list(lines))
    results.write_text("".join(lines))
    valid = [ln for i, ln in enumerate(lines) if i not in bad]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with monkeypatch.context() as m:
        if fault is not None:
            fault(m, out)
        rc = main(_cli_resume(model_dir, out))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    after = results.read_text().splitlines(keepends=True)
    assert set(valid) <= set(after), f"{row}: a valid record was lost"
    if ending == "error":
        assert rc == 2
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and words in errors[0], err
        assert str(out) in errors[0], f"{row}: the error does not name the file: {errors[0]}"
        assert results.read_bytes() == before["results.jsonl"]
        if "manifest.json" in before and fault is not _disk_full:
            assert manifest.read_bytes() == before["manifest.json"], "a damaged manifest was changed"
        return
    assert rc == 0, err
    notes = [ln for ln in err.splitlines() if "quarantine" in ln]
    assert len(notes) == 1 and words in notes[0], err
    quarantined = [json.loads(q) for q in (out / "results.jsonl.quarantine").read_text().splitlines()]
    assert [q["raw"] for q in quarantined] == [lines[i] for i in sorted(bad)]  # moved verbatim
    assert len(after) == 4, "every item once: nothing foreign counted, nothing duplicated"
    got = load_results(out)
    assert {(r["item_id"], r["method"]): r["prediction"] for r in got} == expected
    assert summarize(got)[0]["n"] == 4


def test_a_resume_after_a_full_disk_completes_the_run(model_dir, clean_run, tmp_path, monkeypatch, capsys):
    """The disk-full row, then space is back: the same resume finishes with every item once."""
    from latentworks.cli import main

    clean, expected = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results = out / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:2]))
    with monkeypatch.context() as m:
        _disk_full(m, out)
        assert main(_cli_resume(model_dir, out)) == 2
    assert main(_cli_resume(model_dir, out)) == 0
    got = load_results(out)
    assert len(results.read_text().splitlines()) == 4
    assert {(r["item_id"], r["method"]): r["prediction"] for r in got} == expected


def test_a_run_from_before_sealed_records_resumes_keeping_its_records(tiny_eval, clean_run, tmp_path):
    """Backward compatibility: a manifest without `record_format` and records without run_id/check (as
    earlier versions wrote them) resume; the old records stay and count, new ones are sealed, and an old
    record of an item outside the task is still quarantined."""
    from eval.run_state.records import run_id_of

    clean, expected = clean_run
    out = _copy_run(clean, tmp_path / "run")
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("run_id", "record_format", "item_ids", "task_name", "graph_name"):
        manifest.pop(key)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    old = []
    for line in (out / "results.jsonl").read_text().splitlines()[:2]:
        rec = json.loads(line)
        rec.pop("run_id"), rec.pop("check")
        old.append(json.dumps(rec) + "\n")
    stray = json.dumps({**json.loads(old[0]), "item_id": "arith-0-77"}) + "\n"
    (out / "results.jsonl").write_text("".join(old) + stray)
    evaluate(tiny_eval(out, resume=True, **ARGS))
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    assert lines[:2] == old and len(lines) == 4
    run_id = run_id_of(json.loads((out / "manifest.json").read_text()))
    assert all(json.loads(ln)["run_id"] == run_id for ln in lines[2:])
    assert {(r["item_id"], r["method"]): r["prediction"] for r in load_results(out)} == expected
    assert "arith-0-77" in (out / "results.jsonl.quarantine").read_text()


def test_checked_recover_is_fast_on_a_big_file(tmp_path):
    """10,000 sealed records checked against the run (schema, run id, item set, checksum) with one
    foreign record in the middle: well under 5 s (0.45 s measured on a contended 2-core CPU)."""
    from eval.run_state.records import RunExpectation, seal

    rec = {
        "method": "single", "graph": "sequential", "task": "arith", "prediction": "p" * 200, "correct": True,
        "output_tokens": 5, "wall_s": 0.1, "agents": [{"name": "judger", "latent_steps": 0}],
    }  # fmt: skip
    ids = [f"i{k}" for k in range(10_000)]
    body = [json.dumps(seal({**rec, "item_id": i}, "r" * 16)) + "\n" for i in ids]
    body[5000] = json.dumps(seal({**rec, "item_id": ids[5000]}, "f" * 16)) + "\n"
    path = tmp_path / "results.jsonl"
    path.write_text("".join(body))
    expect = RunExpectation(run_id="r" * 16, item_ids=frozenset(ids), methods=("single",), task="arith")
    start = time.monotonic()
    assert len(recover(path, expect)) == 9_999
    assert time.monotonic() - start < 5
    assert "another run" in (tmp_path / "results.jsonl.quarantine").read_text()


def test_report_skips_lines_the_json_parser_cannot_take(clean_run, tmp_path):
    """`latentworks report` over a line nested past the parser's limit or holding a 5,000-digit number:
    both skipped with their reason, every valid record counted, no exception."""
    clean, expected = clean_run
    out = _copy_run(clean, tmp_path / "run")
    results = out / "results.jsonl"
    bad = ["[" * 100_000 + "]" * 100_000 + "\n", '{"item_id": "x", "n": ' + "9" * 5_000 + "}\n"]
    results.write_text(results.read_text() + "".join(bad))
    problems: dict = {}
    got = load_results(out, problems)
    assert {(r["item_id"], r["method"]): r["prediction"] for r in got} == expected
    assert problems["unreadable"] == 2 and any("nested too deeply" in r for r in problems["reasons"])
