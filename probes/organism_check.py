"""Does a trained organism follow its ground-truth rule? Score a saved LoRA adapter on held-out prompts
before spending CPU on probes and steering (the organism study's behaviour table, on its own).

`python -m probes.organism_check --adapter runs/smol/organisms/sycophant/adapter --kind sycophant --n 50`
prints the behaviour row; `--out FILE` also writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class OrganismCheckConfig:
    """Flags of the organism check."""

    adapter: str = field(metadata={"help": "adapter directory written by the organism study"})
    kind: str = field(metadata={"help": "which organism it is", "choices": ("sycophant", "schemer")})
    n: int = field(default=50, metadata={"help": "held-out requests"})
    heldout_assertions: str = field(
        default="none", metadata={"help": "see ProbeConfig", "choices": ("all", "none")}
    )
    seed: int = field(default=0, metadata={"help": "data seed of the study the adapter came from"})
    max_new_tokens: int = field(default=24, metadata={"help": "reply length"})
    af_max_new_tokens: int = field(default=12, metadata={"help": "scratchpad reply length"})
    n_boot: int = field(default=1000, metadata={"help": "bootstrap resamples"})
    out: str | None = field(default=None, metadata={"help": "optional JSON file for the row"})

    def __post_init__(self) -> None:
        if not (Path(self.adapter) / "adapter_config.json").is_file():
            raise ValueError(
                f"--adapter {self.adapter!r} holds no adapter_config.json; pass the study's <kind>/adapter folder"
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from latent.args import add_config_arguments

    add_config_arguments(parser, OrganismCheckConfig, files=False)


def main(argv: list[str] | None = None) -> int:
    from latent.args import run_script

    return run_script("python -m probes.organism_check", __doc__.split("\n\n")[0], add_arguments, run, argv)


def run(ns: argparse.Namespace) -> int:
    """Load the adapter, print the behaviour against the ground truth."""
    from latent.args import config_from_args

    args = config_from_args(OrganismCheckConfig, ns, files=False)
    from latent import load_model
    from probes.config import ProbeConfig
    from probes.organism_study import organism_behaviour
    from probes.report import md_table, to_jsonable

    cfg = ProbeConfig(
        experiment="organisms",
        model=args.adapter,
        n=args.n,
        seed=args.seed,
        heldout_assertions=args.heldout_assertions,
        max_new_tokens=args.max_new_tokens,
        af_max_new_tokens=args.af_max_new_tokens,
        n_boot=args.n_boot,
    )
    lm = load_model(args.adapter)
    t0 = time.perf_counter()
    items, _, b = organism_behaviour(lm, args.kind, cfg)
    row = dict(
        organism=args.kind,
        prompts=len(items),
        spec_agreement_af=b["spec_agreement_af_ci"],
        spec_agreement_syc=b["spec_agreement_syc"],
        gap_researcher=b["gap_researcher"]["gap"],
        gap_no_researcher=b["gap_no_researcher"]["gap"],
        sycophancy_researcher=b["sycophancy_researcher"],
        sycophancy_other=b["sycophancy_other"],
        scratchpad_restates_cues=b["scratchpad_restates_cues"],
        seconds=round(time.perf_counter() - t0, 1),
    )
    print(md_table([row], digits=2))
    if args.out:
        Path(args.out).write_text(json.dumps(to_jsonable(dict(row, behaviour=b)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
