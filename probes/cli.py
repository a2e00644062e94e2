"""`latentworks probe e1|e2|e3|organisms --model M --out DIR ...`: flags built from `ProbeConfig`."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from latent.args import add_config_arguments
from latent.args import config_from_args as build_config
from probes.config import EXPERIMENTS, ProbeConfig

__all__ = ["add_arguments", "config_from_args", "main", "run"]

QUICK = dict(n=4, n_boot=20, af_max_new_tokens=8, lora_epochs=1.0, train_requests=2, train_sycophancy=4)


@dataclass
class ProbeOptions:
    """Which study runs, and the `--quick` preset that shrinks it."""

    experiment: str = field(
        metadata={"positional": True, "choices": EXPERIMENTS, "help": "which study to run"}
    )
    quick: bool = field(
        default=False,
        metadata={"help": "seconds-long smoke run: n=4, 2 layers, 1 LoRA epoch", "switch": True},
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment positional and one flag per `ProbeConfig` field."""
    add_config_arguments(parser, ProbeOptions, files=False)
    add_config_arguments(parser, ProbeConfig, skip=("experiment",))


def config_from_args(args: argparse.Namespace) -> ProbeConfig:
    """A validated `ProbeConfig` from parsed flags (`--quick` shrinks sizes)."""
    opts = build_config(ProbeOptions, args, files=False)
    fixed: dict = {"experiment": opts.experiment}
    if opts.quick:
        fixed.update(QUICK, alphas=[-0.5, 0.5])
        fixed["max_new_tokens"] = min(getattr(args, "max_new_tokens", 48), 12)
        fixed["layers"] = getattr(args, "layers", None) or [0, -1]
    return build_config(ProbeConfig, args, **fixed)


def run(args: argparse.Namespace) -> int:
    """Run the experiment named in `args`; prints where the results went."""
    from probes.experiments import run_experiment

    cfg = config_from_args(args)
    from latent.entry import on_interrupt

    on_interrupt(
        f"the experiment did not finish; {cfg.out}/{cfg.experiment}/ holds no report. Rerun the command"
    )
    t0 = time.perf_counter()
    result = run_experiment(cfg)
    print(
        f"probe {cfg.experiment}: done in {time.perf_counter() - t0:.0f} s -> {cfg.out}/{cfg.experiment}/{cfg.experiment}.md"
    )
    if "verdict" in result:
        print(result["verdict"])
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probes.cli e1 --model ...` == `latentworks probe e1 --model ...`."""
    from latent.entry import run_script

    return run_script("latentworks probe", __doc__.split("\n\n")[0], add_arguments, run, argv, extra="probes")


if __name__ == "__main__":
    raise SystemExit(main())
