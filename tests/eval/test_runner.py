"""The runner: resumable after a kill, refuses to overwrite, shards across processes, reports."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eval.report import summarize
from eval.run_state import load_results
from eval.run_state.files import read_done
from eval.runner import EvalConfig, evaluate

ARGS = dict(limit=6, methods="single,latent_mas", max_new_tokens=4)


# The child kills itself (SIGKILL, no clean-up) right after its N-th flushed batch is on disk, so the
# crash point is deterministic however fast the machine is. Only fsyncs of a results file count: the
# manifest is written durably too.
_DIE_AFTER_FSYNC = """
import os, signal, sys
real_fsync, calls, die_after = os.fsync, [0], int(os.environ["DIE_AFTER_FSYNC"])
def fsync_then_die(fd):
    real_fsync(fd)
    if not os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
        return
    calls[0] += 1
    if calls[0] == die_after:
        os.kill(os.getpid(), signal.SIGKILL)
os.fsync = fsync_then_die
from latentworks.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _cli(model_dir, out, extra=(), env=None):
    launcher = ["-c", _DIE_AFTER_FSYNC] if env and "DIE_AFTER_FSYNC" in env else ["-m", "latentworks"]
    cmd = [
        sys.executable,
        *launcher,
        "eval",
        "--model",
        model_dir,
        "--task",
        "arith",
        "--limit",
        str(ARGS["limit"]),
        "--methods",
        ARGS["methods"],
        "--batch-size",
        "2",  # the batch size and latent steps of `tiny_eval` (tests/eval/conftest.py)
        "--latent-steps",
        "1",
        "--max-new-tokens",
        str(ARGS["max_new_tokens"]),
        "--out",
        str(out),
        "--no-progress",
        "--no-report",
        *extra,
    ]
    return subprocess.Popen(
        cmd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def test_killed_run_resumes_to_the_same_table(tiny_eval, model_dir, tmp_path):
    """Kill a run after its second flushed batch, add a torn line, resume: same records as a clean run."""
    clean = evaluate(tiny_eval(tmp_path / "clean", **ARGS))
    killed = tmp_path / "killed"
    proc = _cli(model_dir, killed, env={"DIE_AFTER_FSYNC": "2"})
    assert proc.wait(timeout=300) == -signal.SIGKILL, proc.stdout.read().decode()[-2000:]
    results = killed / "results.jsonl"
    assert len(results.read_text().splitlines()) == 4, "two flushed batches of 2 survive the kill"
    with open(results, "a") as fh:
        fh.write('{"item_id": "arith-0-5", "meth')  # a torn write
    evaluate(tiny_eval(killed, resume=True, **ARGS))
    a = {(r["item_id"], r["method"]): r["prediction"] for r in load_results(clean)}
    b = {(r["item_id"], r["method"]): r["prediction"] for r in load_results(killed)}
    assert a == b and len(b) == 12
    assert len(results.read_text().splitlines()) == 12  # nothing duplicated
    assert summarize(load_results(clean)) and read_done(results) == set(a)


def test_refuses_to_overwrite(tiny_eval, tmp_path):
    """Same dir without --resume, or a different run's manifest: clear errors, files untouched."""
    out = evaluate(tiny_eval(tmp_path / "r", **{**ARGS, "limit": 2}))
    before = (out / "results.jsonl").read_text()
    with pytest.raises(ValueError, match="--resume"):
        evaluate(tiny_eval(out, **{**ARGS, "limit": 2}))
    with pytest.raises(ValueError, match="different run's manifest"):
        evaluate(tiny_eval(out, resume=True, **{**ARGS, "limit": 3}))
    assert (out / "results.jsonl").read_text() == before


def test_resume_refuses_a_graph_whose_edges_changed(tiny_eval, tmp_path):
    """The manifest records the graph's edges, not only its name: a graph file edited between a run and its
    resume (or a preset whose hand-offs changed) is refused before anything is written."""
    graph = tmp_path / "g.yaml"
    spec = "agents: [{name: planner, role: planner}, {name: judger, role: judger}]\nedges: [{src: planner, dst: judger, mode: %s}]\n"
    graph.write_text(spec % "kv")
    out = evaluate(tiny_eval(tmp_path / "r", graph=str(graph), **{**ARGS, "limit": 2}))
    before = (out / "results.jsonl").read_text()
    assert json.loads((out / "manifest.json").read_text())["identity"]["graph_edges"] == [
        "planner->judger:kv"
    ]
    graph.write_text(spec % "latent")
    with pytest.raises(ValueError, match="graph_edges"):
        evaluate(tiny_eval(out, graph=str(graph), resume=True, **{**ARGS, "limit": 2}))
    assert (out / "results.jsonl").read_text() == before


def test_two_processes_shard_and_merge(model_dir, tmp_path):
    """Two processes (as `accelerate launch` starts them) split the items; the report merges both files."""
    out = tmp_path / "sharded"
    out.mkdir()
    procs = [_cli(model_dir, out, env={"RANK": str(r), "WORLD_SIZE": "2"}) for r in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stdout.read().decode()[-2000:]
    files = sorted(p.name for p in Path(out).glob("results*.jsonl"))
    assert files == ["results.rank0.jsonl", "results.rank1.jsonl"]
    recs = load_results(out)
    assert len(recs) == 12 and len({r["item_id"] for r in recs}) == 6


def test_bad_config():
    """Unknown method and empty selection are rejected before anything loads."""
    with pytest.raises(ValueError, match="methods"):
        EvalConfig(methods="single,debate")
    with pytest.raises(ValueError, match="empty selection"):
        EvalConfig(limit=0)


def test_report_cli_on_a_run(tiny_eval, tmp_path, capsys):
    """`latentworks report DIR` prints the table and writes report.md, report.png, summary.json."""
    from latentworks.cli import main

    out = evaluate(tiny_eval(tmp_path / "rep", **{**ARGS, "limit": 2}))
    assert main(["report", str(out)]) == 0
    assert "latent_mas" in capsys.readouterr().out
    assert {"report.md", "report.png", "summary.json"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "summary.json").read_text())["methods"][0]["n"] == 2
