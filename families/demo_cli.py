"""The command-line contract every family demo shares, in one place so the demos cannot drift apart:
`--quick`, `--seeds`, `--out` (and `--workers` where jobs run in parallel) next to the family's own flags,
all fields of one config dataclass read through `latent.args` (so `--help`, `--config FILE.yaml`, `--set`
and the `error:` lines are those of every command); the table printed with the wall time, and one
`results.json` holding the payload, the table, the seeds, the wall time and the settings."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from latent.args import UsageError, add_config_arguments, config_from_args, run_script

__all__ = ["DemoArgs", "demo_config", "finish_demo", "load_results", "run_demo"]


@dataclasses.dataclass
class DemoArgs:
    """Base of every demo's config (made by `demo_config`): fills the seed default of the mode and rejects
    bad shared values before anything runs, then runs the family flags' own `__post_init__`."""

    demo_name: ClassVar[str] = ""
    demo_seeds: ClassVar[tuple[int, int, int]] = (1, 1, 1)  # (default, quick default, minimum)

    def __post_init__(self) -> None:
        seeds, quick_seeds, min_seeds = self.demo_seeds
        if self.seeds is None:
            self.seeds = quick_seeds if self.quick else seeds
        if self.seeds < min_seeds:
            raise UsageError(f"--seeds must be >= {min_seeds}, got {self.seeds}")
        if getattr(self, "workers", 1) < 1:
            raise UsageError(f"--workers must be >= 1, got {self.workers}")
        out = Path(self.out)
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {self.out!r} is an existing file; pass a folder")
        family_check = getattr(super(), "__post_init__", None)
        if family_check is not None:
            family_check()


def demo_config(
    name: str,
    flags: type | None = None,
    *,
    seeds: int,
    quick_seeds: int = 1,
    min_seeds: int = 1,
    workers: int | None = None,
) -> type:
    """The config dataclass of demo `name`: the family's `flags` dataclass (its fields, defaults, help and
    `__post_init__`) plus the shared `quick`, `seeds`, `out` and, when `workers` is given, `workers`.

    Example:
        ```python
        @dataclass
        class ToyFlags:
            steps: int = field(default=3, metadata={"help": "training steps"})

        ToyDemo = demo_config("toy", ToyFlags, seeds=5)
        run_demo(ToyDemo, "Toy demo.", print, ["--quick"])  # ToyDemo(steps=3, quick=True, seeds=1, out='runs/toy')
        ```
    """
    if min(seeds, quick_seeds) < min_seeds:
        raise ValueError(f"default seeds ({seeds}, quick {quick_seeds}) must be >= min_seeds={min_seeds}.")
    shared: list[tuple[str, Any, Any]] = [
        ("quick", bool, _field(False, "seconds-long smoke run with tiny sizes", switch=True)),
        ("seeds", int | None, _field(None, f"seeds per setting (default {seeds}, quick {quick_seeds})")),
        ("out", str, _field(f"runs/{name}", "output folder for results.json")),
    ]
    if workers is not None:
        shared.append(("workers", int, _field(workers, "parallel worker processes (1 thread each)")))
    bases = (DemoArgs,) if flags is None else (DemoArgs, flags)
    owner = flags.__module__ if flags is not None else __name__
    namespace = {"demo_name": name, "demo_seeds": (seeds, quick_seeds, min_seeds), "__module__": owner}
    return dataclasses.make_dataclass(
        f"{name.title().replace('_', '')}Demo", shared, bases=bases, namespace=namespace
    )


def _field(default: Any, text: str, switch: bool = False) -> Any:
    return dataclasses.field(default=default, metadata={"help": text, "switch": switch})


def run_demo(
    config: type, description: str, body: Callable[[Any], int | None], argv: Sequence[str] | None = None
) -> int:
    """A demo's `main`: parse `argv` into `config`, run `body(settings)`; a bad flag is one `error:` line
    with exit status 2, `--help` lists every flag with its help."""
    return run_script(
        f"latentworks family {config.demo_name}",
        description,
        partial(add_config_arguments, cls=config),
        lambda ns: body(config_from_args(config, ns)),
        argv,
    )


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


def finish_demo(args: Any, table: str, payload: dict[str, Any], wall_s: float) -> Path:
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
