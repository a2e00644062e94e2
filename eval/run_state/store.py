"""One run's state in its `--out` folder, behind one entry: `RunStore`.

`evaluate` reaches the run's folder only through a `RunStore` (check the folder, resume, write the
manifest, append records, release the lock); `load_results` is the one reader of a finished run's
records, for the report and the benchmark scripts.

Layout of an output directory:
    manifest.json          the run's identity: config, seed, task source, package versions, model fingerprint
    results.jsonl          (or results.rank<R>.jsonl per process) appended and flushed after every batch
    results.jsonl.lock     held by the one process writing the file (removed when it is done)
    results.jsonl.quarantine  lines that are not records of this run, verbatim with their reasons
    summary.json           per-method accuracy (Wilson 95% CI), tokens, seconds, time-ratio spread: the
                           report's table (`eval.report.write_summary`), computed from `load_results`

A killed run resumes with `resume=True`: every valid record is kept; a line that is not a record of
this run (a torn last write, a corrupted byte, a wrong type, a record of another run or of an item
outside the task, a checksum mismatch: `eval.run_state.records`) moves to `results.jsonl.quarantine`
with its reason, and only missing (item, method) pairs run; a resume whose model weights or dtype
changed, or whose manifest is missing or damaged, is refused (`eval.run_state.files`; the cases are
listed in docs/resume-faults.md). One process at a time writes a results file (a lock). A directory
holding another run's manifest is never overwritten unless `overwrite=True`; the manifest is written
only after every check passed and the model loaded, so a failed start leaves nothing behind. Processes
launched by `accelerate launch` (or `torchrun`) each take every N-th item and write their own file;
`load_results` merges them.

Example:
```python
store = RunStore(cfg)
store.check()  # before anything loads
done = store.resume(task, graph.name, model_path)  # (item id, method) pairs already recorded
run_id = store.start(task, graph.name, model_path, dtype_used="float32")  # after the model loaded
with store.appending() as append:
    append([json.dumps(seal(record, run_id))])
```
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from eval.run_state.files import (
    LineTooLong,
    RunStoreError,
    check_belongs,
    check_resume,
    open_for_append,
    read_done,
    read_lines,
    read_manifest,
    refuse_links,
    release,
    write_manifest,
    writing,
)
from eval.run_state.records import RECORD_FORMAT, RunExpectation, new_run_id, read_line, run_id_of

if TYPE_CHECKING:
    from eval.config import EvalConfig

__all__ = [
    "RunStore",
    "check_out_dir",
    "load_results",
    "model_fingerprint",
    "prepare_out_dir",
    "run_expectation",
    "run_manifest",
    "shard",
]


class RunStore:
    """The files of one run (manifest, lock, records, resume) in `cfg.out`, for one process of it.

    `check` before anything loads; `resume` after the task and model path are known (the (item id,
    method) pairs already recorded, read under the run lock); `start` once the model loaded (a new
    run's manifest, the run id to seal records with); `appending` for the records; `release` when
    nothing is left to append.
    """

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.rank, self.world = shard()
        self.results_file = self.out / (
            "results.jsonl" if self.world == 1 else f"results.rank{self.rank}.jsonl"
        )
        self.existing = False  # set by `resume`: the folder holds this run's manifest, which is kept
        self.run_id: str | None = None  # set by `start`

    def check(self) -> None:
        """Refuse an --out that cannot be resumed or started into (`check_out_dir`); reads only."""
        check_out_dir(self.cfg)

    def resume(self, task, graph_name: str, model_path: str) -> set[tuple[str, str]]:
        """(item id, method) pairs this process's results file already holds, with the run lock taken;
        empty for a new run. A resume into a changed model or dtype is refused here."""
        cfg = self.cfg
        self.existing = (self.out / "manifest.json").is_file() and not (cfg.overwrite and self.rank == 0)
        if not (self.existing or self.rank > 0):
            return set()
        prepare_out_dir(cfg, task, graph_name, model_path)
        return read_done(self.results_file, run_expectation(self.out, task, graph_name))

    def start(self, task, graph_name: str, model_path: str, dtype_used: str | None = None) -> str:
        """The run id records are sealed with; a new run (rank 0) first gets its manifest, after
        `--overwrite` removed the previous run's files."""
        if not self.existing and self.rank == 0:
            if self.cfg.overwrite and self.out.is_dir():
                _clear_run(self.out)
            prepare_out_dir(self.cfg, task, graph_name, model_path, dtype_used)
        self.run_id = run_id_of(read_manifest(self.out / "manifest.json"))
        return self.run_id

    @contextlib.contextmanager
    def appending(self) -> Iterator[Callable[[list[str]], None]]:
        """`append(lines)` under the run lock (a second writer is refused): each call writes, flushes
        and syncs its lines, so a crash after it loses nothing of them."""
        with open_for_append(self.results_file) as fh:

            def append(lines: list[str]) -> None:
                with writing(self.results_file, "append to"):
                    fh.write("".join(line + "\n" for line in lines))
                    fh.flush()
                    os.fsync(fh.fileno())

            yield append

    def release(self) -> None:
        """Drop the lock `resume` took, when nothing is left to append."""
        release(self.results_file)


def shard() -> tuple[int, int]:
    """(rank, world size) from accelerate/torchrun environment variables; (0, 1) when alone."""
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", 0)))
    world = int(os.environ.get("WORLD_SIZE", 1))
    return rank, world


def model_fingerprint(path: str) -> str:
    """sha256 over config.json and each weight file's size + first and last MiB (cheap for 100 GB models)."""
    h = hashlib.sha256()
    p = Path(path)
    if not p.is_dir():
        return f"hub:{path}"
    for f in sorted(p.iterdir()):
        if f.name == "config.json" or f.suffix in (".safetensors", ".bin"):
            h.update(f.name.encode())
            h.update(str(f.stat().st_size).encode())
            with open(f, "rb") as fh:
                h.update(fh.read(1 << 20))
                if f.stat().st_size > 2 << 20:
                    fh.seek(-(1 << 20), os.SEEK_END)
                    h.update(fh.read())
    return h.hexdigest()[:16]


def _versions() -> dict:
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def check_out_dir(cfg: EvalConfig) -> None:
    """Refuse, before anything loads, an --out that cannot be resumed or started into: --resume on a
    directory without a run, or results whose manifest is gone (they could not be checked)."""
    out = Path(cfg.out)
    manifest_file = out / "manifest.json"
    refuse_links(out)  # a link among the run's files is named now, before anything loads
    if manifest_file.exists() and not cfg.overwrite:
        read_manifest(manifest_file)  # a damaged one is refused here, before the task or model loads
        for results in sorted(out.glob("results*.jsonl")):
            check_belongs(results, manifest_file)  # another run's manifest over these records
    if shard()[0] > 0 or manifest_file.exists():
        return
    results = sorted(p.name for p in out.glob("results*.jsonl")) if out.is_dir() else []
    if results and not cfg.overwrite:
        raise RunStoreError(
            f"{out} holds {', '.join(results)} but no manifest.json, so its records cannot be checked "
            f"against this run; restore {manifest_file}, or pass --overwrite to replace those results, "
            "or choose a new --out directory"
        )
    if cfg.resume:
        where = "does not exist" if not out.exists() else "holds no run (no manifest.json)"
        raise RunStoreError(
            f"--resume: {out} {where}; check the --out path, or drop --resume to start a new run there"
        )


def prepare_out_dir(
    cfg: EvalConfig, task, graph_name: str, model_path: str, dtype_used: str | None = None
) -> Path:
    """Create or validate the output directory; returns it. Never overwrites another run.

    `dtype_used` (the loaded model's dtype, e.g. "float32") goes into a new manifest, so the report
    names the dtype the run computed in even when none was asked for."""
    out = Path(cfg.out)
    manifest_file = out / "manifest.json"
    rank, world = shard()
    if rank > 0:  # rank 0 writes the manifest; the others wait for it, then validate it like a resume
        deadline = time.time() + 600
        while not manifest_file.is_file() and time.time() < deadline:
            time.sleep(0.2)
    if manifest_file.is_file():
        old = read_manifest(manifest_file)
        if old.get("identity") != cfg.identity():
            diff = sorted(k for k in cfg.identity() if old.get("identity", {}).get(k) != cfg.identity()[k])
            raise ValueError(
                f"{out} holds a different run's manifest (differs in {diff}); nothing was overwritten. "
                "Choose a new --out directory."
            )
        if not cfg.resume and rank == 0 and any(out.glob("results*.jsonl")):
            raise ValueError(
                f"{out} already holds results of this run: pass --resume to continue it, "
                "or choose a new --out directory."
            )
        check_resume(manifest_file, asdict(cfg), model_fingerprint(model_path), record=rank == 0)
        return out
    with writing(out, "create the output directory"):
        out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "identity": cfg.identity(),
        "run_id": new_run_id(),
        "record_format": RECORD_FORMAT,
        "config": asdict(cfg),
        "task_source": task.source,
        "task_name": task.name,
        "graph_name": graph_name,
        "item_ids": [it.id for it in task.items],
        "model_fingerprint": model_fingerprint(model_path),
        **({"dtype_used": dtype_used} if dtype_used else {}),
        "versions": _versions(),
        "world_size": world,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    write_manifest(manifest_file, manifest)
    return out


def run_expectation(out: Path, task, graph_name: str) -> RunExpectation:
    """What every record in `out` must agree with: the manifest's run id, this task's items, the run's
    methods, task and graph."""
    manifest = read_manifest(Path(out) / "manifest.json")
    base = RunExpectation.from_manifest(manifest, item_ids=[it.id for it in task.items])
    return replace(base, task=task.name, graph=graph_name)


def _clear_run(out: Path) -> None:
    """--overwrite: remove the previous run's manifest and results (nothing else in the directory)."""
    for f in [out / "manifest.json", out / "summary.json", *out.glob("results*.jsonl")]:
        with writing(f, "remove"):
            f.unlink(missing_ok=True)


def run_manifest(out: str | Path) -> dict | None:
    """The run's manifest, None when the directory has none; a damaged one is an error naming it."""
    out = Path(out)
    return read_manifest(out / "manifest.json") if (out / "manifest.json").exists() else None


def load_results(out: str | Path, problems: dict | None = None) -> list[dict]:
    """Every record of every results*.jsonl in `out` (shards merged), last write of a pair wins.

    Only records of this run count: each line is checked like on resume (`eval.run_state.records`: schema,
    run id, item set, methods, checksum) against the directory's manifest. If `problems` is a dict, it
    receives `duplicates` ((item, method) pairs written more than once: two writers, or a resume that
    ran twice), `unreadable` (how many lines were skipped) and `reasons` (why, with counts). A
    directory without one valid record is an error naming its files.
    """
    out = Path(out)
    files = sorted(out.glob("results*.jsonl"))
    if not files:
        raise ValueError(f"no results*.jsonl in {out}. Pass the output directory of a `latentworks eval` run")
    manifest = run_manifest(out)
    expect = RunExpectation.from_manifest(manifest) if manifest is not None else RunExpectation()
    recs: dict[tuple[str, str], dict] = {}
    duplicates: dict[tuple[str, str], int] = {}
    reasons: dict[str, int] = {}
    for f in files:
        lines = read_lines(f)  # the same reading as resume: no link followed, no unbounded line
        while True:
            try:
                _, raw = next(lines)
            except StopIteration:
                break
            except LineTooLong as err:  # a line too long to be a record: the rest of the file is skipped
                why = str(err).split(";")[0]
                reasons[why] = reasons.get(why, 0) + 1
                break
            r, why = read_line(raw, expect)
            if why is not None:
                reasons[why] = reasons.get(why, 0) + 1
                continue
            key = (r["item_id"], r["method"])
            if key in recs:
                duplicates[key] = duplicates.get(key, 1) + 1
            recs[key] = r
    unreadable = sum(reasons.values())
    if problems is not None:
        problems.update(duplicates=duplicates, unreadable=unreadable, reasons=reasons)
    if not recs:
        names = ", ".join(str(f) for f in files)
        why = "; ".join(f"{n}x {r}" for r, n in list(reasons.items())[:3]) or "the files are empty"
        raise ValueError(
            f"no valid records in {names} ({unreadable} line(s) skipped: {why}). Pass the output directory "
            "of a `latentworks eval` run, or rerun it with --resume"
        )
    return list(recs.values())
