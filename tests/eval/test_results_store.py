"""Run folders: one reading of a results line for resume and report, and no file opened through a link."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from eval.report import print_report
from eval.run_state import files as results_store
from eval.run_state import load_results
from eval.run_state.files import RunLock, RunStoreError, recover
from eval.runner import evaluate

ARGS = dict(limit=4, methods="single", max_new_tokens=3)
BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def clean_run(tiny_eval, tmp_path_factory):
    return evaluate(tiny_eval(tmp_path_factory.mktemp("clean") / "r", **ARGS))


def _copy(clean: Path, dest: Path) -> Path:
    shutil.copytree(clean, dest, symlinks=True)
    return dest


def _outside(tmp_path: Path, text: bytes = b"precious, not a results file\n") -> Path:
    target = tmp_path / "outside.txt"
    target.write_bytes(text)
    return target


def test_a_finished_run_leaves_no_lock_file(clean_run):
    """The lock file is removed with the lock: a finished run folder holds no stray `results.jsonl.lock`."""
    assert not (clean_run / "results.jsonl.lock").exists()
    assert sorted(p.name for p in clean_run.iterdir() if "lock" in p.name) == []


def test_a_lock_is_taken_again_after_its_file_was_removed(tmp_path):
    """Release removes the lock file; the next lock makes a new one and excludes a third like before."""
    path = tmp_path / "results.jsonl"
    with RunLock(path) as first:
        assert first.path.read_text() == str(os.getpid())
    assert not first.path.exists()
    with RunLock(path), pytest.raises(results_store.RunDirectoryBusy):
        RunLock(path)


@pytest.mark.parametrize(
    "change",
    ["bom first", "bom every line", "torn last", "crlf"],
)
def test_resume_and_report_read_every_line_alike(clean_run, tmp_path, change):
    """A line resume keeps is a line report counts, and the reverse: one parser for both."""
    out = _copy(clean_run, tmp_path / "run")
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    if change == "bom first":
        lines[0] = BOM + lines[0]
    elif change == "bom every line":
        lines = [BOM + ln for ln in lines]
    elif change == "torn last":
        lines[-1] = lines[-1].rstrip(b"\n")
    else:
        lines = [ln.rstrip(b"\n") + b"\r\n" for ln in lines]
    results.write_bytes(b"".join(lines))
    counted = {(r["item_id"], r["method"]) for r in load_results(out)}
    kept = recover(results)
    assert kept == counted
    assert len(load_results(out)) == len(kept)  # after the resume's rewrite too


def test_a_byte_order_mark_before_the_first_record_keeps_it_in_the_summary(tiny_eval, clean_run, tmp_path):
    """An editor's BOM before record 1: the resume has nothing to run and the report still counts 4 of 4."""
    out = _copy(clean_run, tmp_path / "run")
    results = out / "results.jsonl"
    results.write_bytes(BOM + results.read_bytes())
    evaluate(tiny_eval(out, resume=True, **ARGS))
    assert len(results.read_bytes().splitlines()) == 4
    assert len(load_results(out)) == 4
    summary = json.loads((out / "summary.json").read_text())
    assert summary["methods"][0]["n"] == 4


@pytest.mark.parametrize(
    "name", ["results.jsonl.quarantine", "results.jsonl.lock", "results.jsonl", "manifest.json"]
)
def test_a_link_in_the_run_folder_is_refused_and_its_target_untouched(tiny_eval, clean_run, tmp_path, name):
    """A link among the run's files is refused with an error naming it; the file it points to is unchanged."""
    out = _copy(clean_run, tmp_path / "run")
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(lines[0] + b"not a record\n" + b"".join(lines[1:]))  # a line to quarantine
    target = _outside(tmp_path)
    if name in ("results.jsonl", "manifest.json"):
        shutil.copy(out / name, target)  # a link to a perfectly good file is refused as well
    before_target = target.read_bytes()
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(target)
    before = {p.name: (p.is_symlink(), p.read_bytes()) for p in out.iterdir()}
    with pytest.raises(RunStoreError, match="symbolic link") as err:
        evaluate(tiny_eval(out, resume=True, **ARGS))
    assert str(out / name) in str(err.value) and "another process" not in str(err.value)
    assert target.read_bytes() == before_target
    assert {p.name: (p.is_symlink(), p.read_bytes()) for p in out.iterdir()} == before


@pytest.mark.parametrize("name", ["results.jsonl.quarantine", "results.jsonl.lock", "results.jsonl"])
def test_the_store_never_opens_a_run_file_through_a_link(clean_run, tmp_path, name):
    """Below the folder check: `recover` and `RunLock` themselves refuse a link (no race can slip one in)."""
    out = _copy(clean_run, tmp_path / "run")
    results = out / "results.jsonl"
    results.write_bytes(results.read_bytes() + b"not a record\n")
    target = _outside(tmp_path)
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(target)
    with pytest.raises(RunStoreError, match="symbolic link"):
        if name.endswith(".lock"):
            RunLock(results)
        else:
            recover(results)
    assert target.read_bytes() == b"precious, not a results file\n"


def test_report_on_a_results_link_to_dev_zero_is_one_error(clean_run, tmp_path, capsys):
    """`latentworks report` on `results.jsonl -> /dev/zero`: one error line naming the link, no traceback."""
    from latentworks.cli import main

    out = _copy(clean_run, tmp_path / "run")
    (out / "results.jsonl").unlink()
    (out / "results.jsonl").symlink_to("/dev/zero")
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "symbolic link" in err and str(out / "results.jsonl") in err


def test_a_results_file_that_is_not_a_regular_file_is_refused(clean_run, tmp_path):
    """A FIFO named results.jsonl is refused at once (reading it would block or never end)."""
    out = _copy(clean_run, tmp_path / "run")
    (out / "results.jsonl").unlink()
    os.mkfifo(out / "results.jsonl")
    with pytest.raises(RunStoreError, match="not a regular file"):
        load_results(out)


def test_a_line_longer_than_any_record_is_never_read_whole(clean_run, tmp_path, monkeypatch, capsys):
    """A newline-free tail longer than `MAX_LINE_BYTES`: report skips it with the reason; resume refuses
    it with the file named, and nothing is rewritten."""
    monkeypatch.setattr(results_store, "MAX_LINE_BYTES", 4096)
    out = _copy(clean_run, tmp_path / "run")
    results = out / "results.jsonl"
    results.write_bytes(results.read_bytes() + b"0" * 10_000)
    before = results.read_bytes()
    problems: dict = {}
    assert len(load_results(out, problems)) == 4
    assert any("longer than" in r for r in problems["reasons"])
    with pytest.raises(RunStoreError, match="line 5 of .*results.jsonl is longer than"):
        recover(results)
    assert results.read_bytes() == before
    print_report(out)
    assert "longer than" in capsys.readouterr().err


def test_a_link_is_named_before_the_task_or_model_loads(tiny_eval, clean_run, tmp_path, monkeypatch):
    """`check_out_dir` names a link among the run's files (here report.png) before anything is loaded."""
    from eval.run_state.store import check_out_dir

    out = _copy(clean_run, tmp_path / "run")
    (out / "report.png").symlink_to(_outside(tmp_path))
    with pytest.raises(RunStoreError, match="report.png is a symbolic link"):
        check_out_dir(tiny_eval(out, resume=True, **ARGS))
