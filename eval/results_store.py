"""Results files that never lose a valid record, one writer at a time, resumed only into the same run.

- `read_done` reads a results file for resume. A line that is not a complete JSON object with a
  string `item_id` and `method` (a torn last write, a corrupted byte, a stray `[1, 2]`) is moved,
  verbatim, to `<file>.quarantine`; every valid record stays, and only the quarantined items run
  again.
- `RunLock` is an exclusive lock (`flock`) on `<file>.lock`, held from the moment a process reads
  the file for resume until it has appended its last record: a second writer on the same `--out` gets a clear error instead of
  duplicating records. The lock dies with its process, so a killed run never leaves it stale.
- `check_resume` refuses a resume whose model weights (fingerprint) or dtype changed since the
  run started, and records other changes (batch size, device) in the manifest's `resumes` list.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

# Resuming with a different value of these would mix two different computations in one table.
REFUSED_CHANGES = ("dtype",)
# These change only how the same computation is batched or placed; a resume records them.
RECORDED_CHANGES = ("batch_size", "device")


class RunDirectoryBusy(ValueError):
    """Another process holds the results file's lock."""


class RunLock:
    """Exclusive, non-blocking lock on `<results file>.lock`; raises `RunDirectoryBusy` when taken."""

    def __init__(self, results_file: Path):
        self.path = Path(str(results_file) + ".lock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            raise RunDirectoryBusy(
                f"another process (pid {holder}) is writing {results_file}; wait for it to finish, "
                "or choose another --out directory."
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _problem(raw: bytes) -> str | None:
    """Why a results line is not a usable record, or None if it is one."""
    if not raw.endswith(b"\n"):
        return "torn line (no newline)"
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return f"not JSON ({e.msg if hasattr(e, 'msg') else e})"
    if not isinstance(rec, dict):
        return f"not a JSON object but {type(rec).__name__}"
    if not isinstance(rec.get("item_id"), str) or not isinstance(rec.get("method"), str):
        return "no string item_id and method"
    return None


def recover(path: Path) -> set[tuple[str, str]]:
    """(item id, method) pairs of the valid records in `path`; bad lines go to `<path>.quarantine`."""
    path = Path(path)
    done: set[tuple[str, str]] = set()
    if not path.is_file():
        return done
    good: list[bytes] = []
    bad: list[dict] = []
    duplicates = 0
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            why = _problem(raw)
            if why is not None:
                bad.append({"line": n, "reason": why, "raw": raw.decode("utf-8", "replace")})
                continue
            rec = json.loads(raw)
            key = (rec["item_id"], rec["method"])
            duplicates += key in done
            done.add(key)
            good.append(raw)
    if duplicates:
        logger.warning("%s holds %d duplicate record(s); the report keeps the last of each", path, duplicates)
    if bad:
        quarantine = Path(str(path) + ".quarantine")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(quarantine, "a") as q:
            for b in bad:
                q.write(json.dumps({**b, "file": path.name, "quarantined": stamp}) + "\n")
            q.flush()
            os.fsync(q.fileno())
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        with open(tmp, "wb") as out:
            out.writelines(good)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)  # atomic: a crash here leaves either the old or the cleaned file
        logger.warning(
            "moved %d unreadable line(s) of %s (lines %s) to %s; only their items run again",
            len(bad),
            path,
            ", ".join(str(b["line"]) for b in bad[:10]),
            quarantine,
        )
    return done


# Locks taken by `read_done`, kept until this process's `open_for_append` (or `release`) of the same
# file, so no other writer can slip in between reading what is done and appending the rest.
_HELD: dict[str, RunLock] = {}


def read_done(path: Path) -> set[tuple[str, str]]:
    """`recover` under the run lock, which stays held for the `open_for_append` that follows.

    Raises `RunDirectoryBusy` while another process writes the same file.
    """
    key = os.path.realpath(path)
    if key not in _HELD:
        _HELD[key] = RunLock(Path(path))
    return recover(Path(path))


def release(path: Path) -> None:
    """Drop the lock `read_done` took (when nothing is left to append)."""
    lock = _HELD.pop(os.path.realpath(path), None)
    if lock is not None:
        lock.release()


@contextlib.contextmanager
def open_for_append(path: Path) -> Iterator[IO[str]]:
    """The results file opened for appending, under the run lock for as long as it is open."""
    lock = _HELD.pop(os.path.realpath(path), None) or RunLock(Path(path))
    try:
        with open(path, "a") as fh:
            yield fh
    finally:
        lock.release()


def _flat(config: dict) -> dict:
    """An eval config with its nested `run` settings (batch size, decoding) lifted to the top level."""
    return {**config, **(config.get("run") or {})}


def check_resume(manifest_file: Path, config: dict, fingerprint: str, record: bool = True) -> None:
    """Refuse a resume into a run whose model or dtype changed; record batch-size/device changes.

    `config` is the resuming run's full config (as in the manifest), `fingerprint` its model's.
    """
    manifest = json.loads(Path(manifest_file).read_text())
    old_fp = manifest.get("model_fingerprint")
    if old_fp is not None and old_fp != fingerprint:
        raise ValueError(
            f"the model changed since this run started (weights fingerprint {old_fp}, now {fingerprint}); "
            "resuming would mix two models' results in one table. Choose a new --out directory."
        )
    old_cfg = _flat(manifest.get("config", {}))
    config = _flat(config)
    for key in REFUSED_CHANGES:
        if key in old_cfg and old_cfg.get(key) != config.get(key):
            raise ValueError(
                f"this run started with {key}={old_cfg.get(key)!r}, the resume asks for {config.get(key)!r}; "
                f"resume with the same --{key.replace('_', '-')}, or choose a new --out directory."
            )
    changed = {
        k: [old_cfg.get(k), config.get(k)]
        for k in RECORDED_CHANGES
        if k in old_cfg and old_cfg[k] != config.get(k)
    }
    if changed:
        logger.warning("resuming with changed %s (recorded in the manifest)", changed)
    if not record:
        return
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(), "changed": changed}
    manifest.setdefault("resumes", []).append(entry)
    tmp = Path(manifest_file).with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, manifest_file)
