"""Finished chunks of a long side-by-side run, one JSON line each, so a run stopped by the end of a
sitting goes on at its next chunk (`--resume`) instead of starting again.

The first line holds the settings the chunks were measured under; a resume under other settings is
refused (two settings in one table would be a different comparison). Each chunk line is flushed and
synced before the next chunk starts; a torn last line (the process killed mid-write) is not a chunk and
runs again. Each chunk's two sides are timed in the same sitting, so its ratio stays a side-by-side one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class ChunkLogError(ValueError):
    """A chunk file that cannot be resumed as asked: names the file and the fix."""


class ChunkLog:
    def __init__(self, path: str | Path, settings: dict, resume: bool) -> None:
        self.path = Path(path)
        self.settings = settings
        self.done: dict[str, dict] = {}
        if not self.path.exists():
            return  # written with the first chunk: a run that stops before one leaves no file
        if not resume:
            raise ChunkLogError(
                f"{self.path} holds chunks of an earlier run: pass --resume to go on with it, or choose "
                "another --json (the chunks are kept beside it)"
            )
        lines = self.path.read_text().splitlines()
        header = _parse(lines[0]) if lines else None
        if not header or "settings" not in header:
            raise ChunkLogError(f"{self.path} is not a chunk file (no settings line): move it away")
        if header["settings"] != settings:
            changed = sorted(
                k for k in {**settings, **header["settings"]} if header["settings"].get(k) != settings.get(k)
            )
            raise ChunkLogError(
                f"{self.path} was measured with other settings ({', '.join(changed)}): rerun with those, "
                "or choose another --json"
            )
        for line in lines[1:]:
            rec = _parse(line)
            if rec and isinstance(rec.get("chunk"), str):
                self.done[rec["chunk"]] = rec

    def get(self, chunk: str) -> dict | None:
        """The stored record of a finished chunk, or None when it must run."""
        return self.done.get(chunk)

    def add(self, chunk: str, record: dict) -> None:
        """Store a finished chunk (durably, before the next one starts)."""
        if not self.path.exists():
            self._append({"settings": self.settings})
        self.done[chunk] = {"chunk": chunk, **record}
        self._append(self.done[chunk])

    def _append(self, obj: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(json.dumps(obj) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _parse(line: str) -> dict | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
