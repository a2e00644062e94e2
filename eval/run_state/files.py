"""Results files that never lose a valid record, one writer at a time, resumed only into the same run.

- `read_done` reads a results file for resume. A line that is not a record of this run (a torn last
  write, a corrupted byte, a stray `[1, 2]`, a record of another run, an item outside the task, a
  wrong type, a checksum that does not match: `eval.run_state.records`) is moved, verbatim and with its
  reason, to `<file>.quarantine`; every valid record stays, and only the quarantined items run again.
- `read_manifest` refuses a missing or damaged manifest with one line naming the file and the fix.
- A write that fails (disk full, read-only directory) is a `RunStoreError` naming the file.
- `RunLock` is an exclusive lock (`flock`) on `<file>.lock`, held from the moment a process reads
  the file for resume until it has appended its last record: a second writer on the same `--out` gets a clear error instead of
  duplicating records. The lock dies with its process, so a killed run never leaves it stale.
- `check_resume` refuses a resume whose model weights (fingerprint) or dtype changed since the
  run started, and records other changes (batch size, device) in the manifest's `resumes` list.
- Every file of a run folder is opened without following a symbolic link (`open_run_file`), and
  must be a regular file: a link planted in the folder could otherwise make a run append, truncate
  or read a file outside it. `refuse_links` names such a link before anything is loaded.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from eval.run_state.records import (
    RunExpectation,
    checksum,
    json_damage,
    manifest_problem,
    parse_line,
    read_line,
    run_id_of,
)

logger = logging.getLogger(__name__)

# Resuming with a different value of these would mix two different computations in one table.
REFUSED_CHANGES = ("dtype",)
# These change only how the same computation is batched or placed; a resume records them.
RECORDED_CHANGES = ("batch_size", "device")


class RunDirectoryBusy(ValueError):
    """Another process holds the results file's lock."""


class RunStoreError(ValueError):
    """A results directory that cannot be read or written: the message names the file and the fix."""


class LineTooLong(RunStoreError):
    """A line of a run-folder file longer than any record (`MAX_LINE_BYTES`)."""


_WRITE_FIXES = {
    errno.ENOSPC: "free disk space (or choose another --out), then continue with --resume; "
    "the records written so far are kept",
    errno.EDQUOT: "free space in your quota (or choose another --out), then continue with --resume",
    errno.EROFS: "the file system is read-only: choose another --out directory",
    errno.EACCES: "the directory is not writable: fix its permissions or choose another --out directory",
    errno.EPERM: "the directory is not writable: fix its permissions or choose another --out directory",
}


def write_error(err: OSError, path: Path, doing: str = "write") -> RunStoreError:
    """An `OSError` of a write as one line naming the file and what to do."""
    reason = err.strerror or str(err) or type(err).__name__
    fix = _WRITE_FIXES.get(err.errno, "check the path and the disk, or choose another --out directory")
    return RunStoreError(f"cannot {doing} {path} ({reason}); {fix}")


@contextlib.contextmanager
def writing(path: Path, doing: str = "write") -> Iterator[None]:
    """Turn an `OSError` raised inside the block into a `RunStoreError` naming `path`."""
    try:
        yield
    except OSError as err:
        raise write_error(err, path, doing) from None


# The longest results line read. A record holds one model answer per agent (and, with
# `inspect_latents`, the logit lens of its latent thoughts): far below this. A longer "line" is not a
# record, and reading it whole could exhaust memory.
MAX_LINE_BYTES = 64 << 20
# Names of the files a run folder holds (`results*` covers shards, `.quarantine` and `.lock`).
RUN_FILE_PATTERNS = ("manifest.json", "summary.json", "report.md", "report.png", "handoff.md", "results*")


def _link_error(path: Path) -> RunStoreError:
    return RunStoreError(
        f"{path} is a symbolic link; the files of a run folder are never opened through a link (it could "
        "make the run read or write a file outside the folder). Replace the link with the file itself, "
        "or remove it, or choose another --out directory"
    )


def open_run_file(path: Path, flags: int, doing: str = "open", mode: int = 0o644) -> int:
    """A descriptor of the run-folder file `path`, opened without following a link and checked to
    be a regular file (a device, FIFO or folder of that name is refused); errors name the file."""
    path = Path(path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _link_error(path) from None
        if not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise  # a read: the caller says what the file is for (the manifest's message has its own fix)
        raise write_error(err, path, doing) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunStoreError(
            f"{path} is not a regular file; a run folder's {path.name} must be one. Move it away, or "
            "choose another --out directory"
        )
    os.set_blocking(fd, True)
    return fd


def refuse_links(folder: Path) -> None:
    """Refuse (before anything is loaded or written) a run folder any of whose files is a link."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for pattern in RUN_FILE_PATTERNS:
        for path in sorted(folder.glob(pattern)):
            if path.is_symlink():
                raise _link_error(path)


def read_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes) of a run-folder file, read without following a link; a line longer
    than `MAX_LINE_BYTES` is a `RunStoreError` (no record is that long, and it is not read whole)."""
    path = Path(path)
    with os.fdopen(open_run_file(path, os.O_RDONLY, "read"), "rb") as fh:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise LineTooLong(
                    f"line {n} of {path} is longer than {MAX_LINE_BYTES >> 20} MiB, so it is no record of a "
                    "run; move the file out of the folder, or choose another --out directory"
                )
            yield n, raw


def write_new(path: Path, data: bytes, doing: str) -> None:
    """Write `data` to `path` by a fresh temporary file renamed over it (atomic; a link at `path` is
    replaced, never followed)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{os.urandom(4).hex()}")
    with writing(path, doing):
        fd = open_run_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, doing)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def read_manifest(path: Path) -> dict:
    """The run's manifest; a missing, unreadable or damaged one is one `RunStoreError` with the fix."""
    path = Path(path)
    fix = (
        "restore it from a backup, or start over with --overwrite (its results are replaced), "
        "or choose a new --out directory"
    )
    try:
        with os.fdopen(open_run_file(path, os.O_RDONLY, "read"), "rb") as fh:
            raw = fh.read(MAX_LINE_BYTES + 1)
        if len(raw) > MAX_LINE_BYTES:
            raise RunStoreError(
                f"the run manifest {path} is damaged (larger than {MAX_LINE_BYTES >> 20} MiB); {fix}"
            )
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise RunStoreError(f"no manifest at {path}; {fix}") from None
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or str(err)
        raise RunStoreError(f"cannot read the run manifest {path} ({why}); {fix}") from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as err:
        raise RunStoreError(
            f"the run manifest {path} is damaged (not JSON: {err.msg} line {err.lineno}, column {err.colno}); {fix}"
        ) from None
    except (ValueError, RecursionError) as err:  # a huge integer, nesting past the parser's limit
        raise RunStoreError(
            f"the run manifest {path} is damaged (not JSON: {json_damage(err)}); {fix}"
        ) from None
    why = manifest_problem(manifest)
    if why:
        raise RunStoreError(f"the run manifest {path} is damaged ({why}); {fix}")
    return manifest


def write_manifest(path: Path, manifest: dict) -> None:
    """Write the manifest atomically (a crash never leaves half of one)."""
    write_new(Path(path), json.dumps(manifest, indent=2).encode(), "write the run manifest")


class RunLock:
    """Exclusive, non-blocking lock on `<results file>.lock`; raises `RunDirectoryBusy` when taken.

    The lock file holds the holder's pid and is removed when the lock is released, so a finished run
    leaves no lock file behind. Removing it is safe: a process that locked the file just before its
    removal sees that the path no longer names the file it locked, and locks the new one instead.
    """

    def __init__(self, results_file: Path):
        self.path = Path(str(results_file) + ".lock")
        with writing(self.path, "create the lock file"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = open_run_file(self.path, os.O_RDWR | os.O_CREAT, "create the lock file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise RunDirectoryBusy(
                    f"another process (pid {holder}) is writing {results_file}; wait for it to finish, "
                    "or choose another --out directory."
                ) from None
            if self._still_named(fd):
                break
            os.close(fd)  # the holder before us removed this file as we opened it: lock the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd: int | None = fd

    def _still_named(self, fd: int) -> bool:
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        """Remove the lock file (while still holding it), then drop the lock."""
        if self.fd is not None:
            if self._still_named(self.fd):
                with contextlib.suppress(OSError):
                    self.path.unlink()
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _foreign_manifest(path: Path, manifest_file: Path, detail: str) -> RunStoreError:
    """The error for records none of which belong to the manifest beside them: the manifest is the
    stranger (another run's, copied or restored over this one), not the records."""
    return RunStoreError(
        f"none of the records in {path} belongs to the run in {manifest_file} ({detail}): the manifest is "
        "another run's; restore this run's manifest.json, or start over with --overwrite (its results are "
        "replaced), or choose a new --out directory"
    )


def recover(path: Path, expect: RunExpectation | None = None) -> set[tuple[str, str]]:
    """(item id, method) pairs of the valid records in `path` (checked against `expect` when given);
    every other line goes, verbatim and with its reason, to `<path>.quarantine`."""
    path = Path(path)
    done: set[tuple[str, str]] = set()
    good: list[bytes] = []
    bad: list[dict] = []
    duplicates = 0
    try:
        for n, raw in read_lines(path):
            rec, why = read_line(raw, expect)
            if why is not None:
                bad.append({"line": n, "reason": why, "raw": raw.decode("utf-8", "replace")})
                continue
            key = (rec["item_id"], rec["method"])
            duplicates += key in done
            done.add(key)
            good.append(raw)
    except FileNotFoundError:
        return done
    foreign = sorted({b["reason"] for b in bad if b["reason"].startswith("record of another run")})
    if foreign and not good:
        raise _foreign_manifest(path, path.parent / "manifest.json", f"{len(bad)} line(s); {foreign[0]}")
    if duplicates:
        logger.warning("%s holds %d duplicate record(s); the report keeps the last of each", path, duplicates)
    if bad:
        quarantine = Path(str(path) + ".quarantine")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        doing = "quarantine bad lines into"
        fd = open_run_file(quarantine, os.O_WRONLY | os.O_APPEND | os.O_CREAT, doing)
        with writing(quarantine, doing), os.fdopen(fd, "a") as q:
            for b in bad:
                q.write(json.dumps({**b, "file": path.name, "quarantined": stamp}) + "\n")
            q.flush()
            os.fsync(q.fileno())
        # atomic: a crash here leaves either the old or the cleaned file
        write_new(path, b"".join(good), "rewrite")
        reasons: dict[str, int] = {}
        for b in bad:
            reasons[b["reason"]] = reasons.get(b["reason"], 0) + 1
        logger.warning(
            "moved %d line(s) of %s that are not records of this run (lines %s: %s) to %s; "
            "they are not counted, and only their items run again",
            len(bad),
            path,
            ", ".join(str(b["line"]) for b in bad[:10]),
            "; ".join(f"{n}x {r}" for r, n in list(reasons.items())[:5]),
            quarantine,
        )
    return done


def check_belongs(path: Path, manifest_file: Path) -> None:
    """Refuse (naming both files) a results file none of whose intact records is of the manifest's run.

    A manifest copied in from another run would otherwise make every valid record look foreign:
    all would be quarantined and rerun. Checked before anything is written; records of earlier
    versions (no `run_id`) and damaged lines are left to the per-record checks.
    """
    path, manifest = Path(path), read_manifest(Path(manifest_file))
    if not os.path.lexists(path) or manifest.get("record_format", 1) < 2:
        return
    run_id, others = run_id_of(manifest), set()
    for _, raw in read_lines(path):
        rec, why = parse_line(raw)
        if why or not isinstance(rec, dict) or not isinstance(rec.get("run_id"), str):
            continue
        if rec.get("check") != checksum(rec):
            continue
        if rec["run_id"] == run_id:
            return
        others.add(rec["run_id"])
    if others:
        raise _foreign_manifest(
            path, manifest_file, f"they carry run id {sorted(others)[0]!r}, the manifest {run_id!r}"
        )


# Locks taken by `read_done`, kept until this process's `open_for_append` (or `release`) of the same
# file, so no other writer can slip in between reading what is done and appending the rest.
_HELD: dict[str, RunLock] = {}


def read_done(path: Path, expect: RunExpectation | None = None) -> set[tuple[str, str]]:
    """`recover` under the run lock, which stays held for the `open_for_append` that follows.

    Raises `RunDirectoryBusy` while another process writes the same file.
    """
    key = os.path.abspath(path)  # not the link's target: the key must name the file the lock guards
    if key not in _HELD:
        _HELD[key] = RunLock(Path(path))
    try:
        return recover(Path(path), expect)
    except BaseException:
        release(path)
        raise


def release(path: Path) -> None:
    """Drop the lock `read_done` took (when nothing is left to append)."""
    lock = _HELD.pop(os.path.abspath(path), None)
    if lock is not None:
        lock.release()


@contextlib.contextmanager
def open_for_append(path: Path) -> Iterator[IO[str]]:
    """The results file opened for appending, under the run lock for as long as it is open."""
    lock = _HELD.pop(os.path.abspath(path), None) or RunLock(Path(path))
    try:
        fd = open_run_file(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, "open for appending")
        with os.fdopen(fd, "a") as fh:
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
    manifest = read_manifest(Path(manifest_file))
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
    manifest.setdefault("run_id", run_id_of(manifest))  # a run from before records were sealed
    write_manifest(Path(manifest_file), manifest)
