"""GRPO objective ablation table from finished run directories (same data and SFT models, GRPO redone).

    python -m finetune.dlm.ablation RUN_DIR [RUN_DIR ...] --scenario 6x6-2p-2f

The first directory is the reference: P(variant > reference) is computed on the DLM-GRPO team return under
legal-constrained decoding; free decoding gives the invalid-action rate.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from finetune.dlm.report import row_arrays
from finetune.dlm.stats import iqm_interval, probability_of_improvement, verdict, wilson_interval

__all__ = ["ablation_markdown", "main"]


def _rows(run_dir: Path, scenario: str) -> dict[str, dict]:
    results = json.loads((run_dir / "results.json").read_text())
    return {r["decoding"]: r for r in results if r["method"] == "DLM-GRPO" and r["scenario"] == scenario}


def ablation_markdown(run_dirs: list[str | Path], scenario: str, reps: int = 2000) -> str:
    dirs = [Path(d) for d in run_dirs]
    ref = row_arrays(_rows(dirs[0], scenario)["legal-constrained"])[0]
    lines = [
        "| run | loss_type | beta | return reward | free-decoding invalid rate [95% CI] | "
        "return IQM, constrained [95% CI] | win rate [95% CI] | P(run > first run) [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in dirs:
        cfg = json.loads((d / "config.json").read_text())["grpo"]
        rows = _rows(d, scenario)
        _, _, inv, dec = row_arrays(rows["free"])
        ret, win, _, _ = row_arrays(rows["legal-constrained"])
        iqm, w, i = (
            iqm_interval(ret, reps),
            wilson_interval(int(win.sum()), win.size),
            wilson_interval(inv, dec),
        )
        poi = probability_of_improvement(ret, ref, reps) if d != dirs[0] else None
        poi_txt = "-" if poi is None else f"{poi[0]:.2f} [{poi[1]:.2f}, {poi[2]:.2f}] ({verdict(poi)})"
        lines.append(
            f"| `{d.name}` | {cfg['loss_type']} | {cfg['beta']} | {cfg['return_reward']} | "
            f"{i[0]:.3f} [{i[1]:.3f}, {i[2]:.3f}] | {iqm[0]:.3f} [{iqm[1]:.3f}, {iqm[2]:.3f}] | "
            f"{w[0]:.2f} [{w[1]:.2f}, {w[2]:.2f}] | {poi_txt} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args(argv)
    print(ablation_markdown(args.run_dirs, args.scenario, args.reps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
