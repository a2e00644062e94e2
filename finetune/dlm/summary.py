"""One results table across finished runs: every benchmark's in-distribution and zero-shot rows side by side.

    python -m finetune.dlm.summary RUN_DIR [RUN_DIR ...]

Per scenario and method: team-return IQM with its stratified-bootstrap interval, the win rate with its Wilson
interval, and P(DLM-SFT > method) / P(DLM-GRPO > method) with wins / ties / loses. DLM rows use legal-
constrained decoding (the decoding the baselines' legal masking compares with); the free-decoding
invalid-action rate of DLM is its own column, so what the constraint hides stays visible.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from finetune.dlm.report import DLM_METHODS, row_arrays
from finetune.dlm.stats import iqm_interval, probability_of_improvement, verdict, wilson_interval

__all__ = ["main", "summary_markdown"]


def _ci(t: tuple[float, float, float], digits: int = 2) -> str:
    return f"{t[0]:.{digits}f} [{t[1]:.{digits}f}, {t[2]:.{digits}f}]"


def _poi(x, y, reps: int) -> str:
    k = min(x.shape[1], y.shape[1])  # episode k starts from the same state for every method
    p = probability_of_improvement(x[:, :k], y[:, :k], reps)
    return f"{p[0]:.2f} [{p[1]:.2f}, {p[2]:.2f}] {verdict(p)}"


def summary_markdown(run_dirs: list[str | Path], reps: int = 2000) -> str:
    """One markdown table over the runs in `run_dirs`: returns, win rates and pairwise probabilities."""
    lines = [
        "| run | scenario | method | runs x episodes | team return IQM [95% CI] | win rate [95% CI] | "
        "free-decoding invalid rate | P(DLM-SFT > method) | P(DLM-GRPO > method) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in map(Path, run_dirs):
        results = json.loads((d / "results.json").read_text())
        by_key = {(r["scenario"], r["method"], r["decoding"]): r for r in results}
        for r in results:
            if r["decoding"] == "free":
                continue
            scen, method = r["scenario"], r["method"]
            ret, win, _, _ = row_arrays(r)
            free = by_key.get((scen, method, "free"))
            inv = "-"
            if free is not None:
                _, _, n_inv, n_dec = row_arrays(free)
                inv = _ci(wilson_interval(n_inv, n_dec), 3)
            pois = []
            for dlm in DLM_METHODS:
                mine = by_key.get((scen, dlm, "legal-constrained"))
                skip = mine is None or method in DLM_METHODS or method.startswith("Scripted")
                pois.append("-" if skip else _poi(row_arrays(mine)[0], ret, reps))
            label = f"{method} ({r['decoding']})" if method.startswith("Prompted") else method
            lines.append(
                f"| `{d.name}` | {scen}{' (zero-shot)' if r['zero_shot'] else ''} | {label} | "
                f"{ret.shape[0]} x {ret.shape[1]} | {_ci(iqm_interval(ret, reps), 3)} | "
                f"{_ci(wilson_interval(int(win.sum()), win.size))} | {inv} | {pois[0]} | {pois[1]} |"
            )
    return "\n".join(lines) + "\n"


@dataclass
class SummaryConfig:
    """The summary command's settings."""

    run_dirs: list[str] = field(
        metadata={"help": "finished `latentworks dlm` run directories", "positional": True}
    )
    reps: int = field(default=2000, metadata={"help": "bootstrap resamples"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The summary flags, from `SummaryConfig`."""
    from latent.args import add_config_arguments

    add_config_arguments(parser, SummaryConfig, files=False)


def run(args: argparse.Namespace) -> int:
    """Print the summary table of the parsed run directories."""
    from latent.args import UsageError, config_from_args

    cfg = config_from_args(SummaryConfig, args, files=False)
    missing = [d for d in cfg.run_dirs if not (Path(d) / "results.json").is_file()]
    if missing:
        raise UsageError(f"no results.json in {missing}: run `latentworks dlm eval` there first")
    print(summary_markdown(cfg.run_dirs, cfg.reps), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m finetune.dlm.summary`: the same command as a script."""
    from latent.args import run_script

    return run_script("python -m finetune.dlm.summary", __doc__.splitlines()[0], add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
