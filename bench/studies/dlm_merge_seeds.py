"""Pool `latentworks dlm eval` results of disjoint training seeds into one table (rliable intervals over all
seeds), e.g. seeds 0-1 evaluated earlier and seed 2 evaluated later with the same preset and start states.

`python bench/studies/dlm_merge_seeds.py A/results.json B/results.json --preset lbf_smollm2_cpu --seeds 0 1 2 --sets eval.episodes=16 --out DIR`
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from latent.args import UsageError, add_config_arguments, config_from_args, run_script


@dataclass
class MergeSeedsBench:
    """Flags of the seed-pooling report."""

    results: list[str] = field(
        metadata={"positional": True, "help": "results.json files of `latentworks dlm eval`, in seed order"}
    )
    out: str = field(metadata={"help": "folder for the pooled results.json and results.md"})
    preset: str = field(
        default="lbf_smollm2_cpu", metadata={"help": "the preset (or YAML path) every part was run with"}
    )
    seeds: list[int] = field(
        default_factory=list, metadata={"help": "the pooled training seeds (for the header)"}
    )
    sets: list[str] = field(
        default_factory=list, metadata={"help": "KEY=VALUE overrides the parts were run with (repeatable)"}
    )


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(MergeSeedsBench, ns)
    from finetune.dlm.cli import CONFIG_DIR
    from finetune.dlm.config import load_config
    from finetune.dlm.report import merge_results, results_markdown

    missing = [p for p in args.results if not Path(p).is_file()]
    if missing:
        raise UsageError(f"no results file {', '.join(missing)}: run `latentworks dlm eval` first")
    parts = [json.loads(Path(p).read_text()) for p in args.results]
    try:
        merged = merge_results(parts)
    except ValueError as e:
        raise UsageError(str(e)) from e
    overrides = [*args.sets, f"train_seeds=[{','.join(map(str, args.seeds))}]"] if args.seeds else args.sets
    preset = args.preset if Path(args.preset).is_file() else CONFIG_DIR / f"{args.preset}.yaml"
    if not Path(preset).is_file():
        raise UsageError(f"--preset: no preset or file {args.preset!r}; presets are in {CONFIG_DIR}")
    cfg = load_config(preset, overrides)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = results_markdown(merged, cfg)
    (out / "results.json").write_text(json.dumps(merged, indent=2))
    (out / "results.md").write_text(md)
    print(md)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "python bench/studies/dlm_merge_seeds.py",
        __doc__.splitlines()[0],
        partial(add_config_arguments, cls=MergeSeedsBench),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
