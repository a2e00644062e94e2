"""The command-line contract every family demo shares, in one place so the demos cannot drift apart:
`--quick`, `--seeds`, `--out` (and `--workers` where jobs run in parallel), the table printed with the wall
time, and one `results.json` holding the payload, the table, the seeds, the wall time and the arguments."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DemoParser", "finish_demo", "load_results"]


class DemoParser(argparse.ArgumentParser):
    """`argparse` parser with the shared demo flags; add family flags with `add_argument` as usual.

    Example:
        ```python
        parser = DemoParser("gwf", "Generative Wasserstein flows demo.", seeds=5)
        args = parser.parse_demo(["--quick"])  # args.seeds == 1, args.out == "runs/gwf"
        ```
    """

    def __init__(
        self,
        name: str,
        description: str,
        *,
        seeds: int,
        quick_seeds: int = 1,
        min_seeds: int = 1,
        workers: int | None = None,
    ) -> None:
        if min(seeds, quick_seeds) < min_seeds:
            raise ValueError(
                f"default seeds ({seeds}, quick {quick_seeds}) must be >= min_seeds={min_seeds}."
            )
        super().__init__(prog=f"latentworks family {name}", description=description)
        self._seeds, self._quick_seeds, self._min_seeds = seeds, quick_seeds, min_seeds
        self._workers = workers
        self.add_argument("--quick", action="store_true", help="seconds-long smoke run with tiny sizes")
        self.add_argument(
            "--seeds",
            type=int,
            default=None,
            help=f"seeds per setting (default {seeds}, quick {quick_seeds})",
        )
        self.add_argument("--out", type=str, default=f"runs/{name}", help="output folder for results.json")
        if workers is not None:
            self.add_argument(
                "--workers", type=int, default=workers, help="parallel worker processes (1 thread each)"
            )

    def parse_demo(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """Parse, fill the seed default for the mode, and reject bad values before anything runs."""
        args = self.parse_args(argv)
        if args.seeds is None:
            args.seeds = self._quick_seeds if args.quick else self._seeds
        if args.seeds < self._min_seeds:
            self.error(f"--seeds must be >= {self._min_seeds}, got {args.seeds}")
        if self._workers is not None and args.workers < 1:
            self.error(f"--workers must be >= 1, got {args.workers}")
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            self.error(f"--out {args.out!r} is an existing file; pass a folder")
        return args


def _jsonable(value: Any) -> Any:
    """NaN/inf become null (strict JSON); tuples, numpy scalars and arrays become plain lists and numbers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays/scalars, torch tensors
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def finish_demo(args: argparse.Namespace, table: str, payload: dict[str, Any], wall_s: float) -> Path:
    """Print the table and wall time, write `<out>/results.json`, return its path."""
    print(table)
    print(f"\nwall time {wall_s:.0f} s, {args.seeds} seed(s)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {**payload, "table": table, "seeds": args.seeds, "wall_time_s": wall_s, "args": vars(args)}
    path = out / "results.json"
    path.write_text(json.dumps(_jsonable(record), indent=1))
    print(f"wrote {path}")
    return path


def load_results(out: str | Path) -> dict[str, Any]:
    """Read back what `finish_demo` wrote into folder `out`."""
    path = Path(out) / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results.json in {out}; run the demo with --out {out} first.")
    return json.loads(path.read_text())
