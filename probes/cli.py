"""`latentworks probe e1|e2|e3|organisms --model M --out DIR ...`: flags built from `ProbeConfig`.

The lead's entry point calls `add_arguments(parser)` on the `probe` sub-parser and then `run(args)`.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
import typing

from probes.config import EXPERIMENTS, ProbeConfig

__all__ = ["add_arguments", "config_from_args", "main", "run"]


def _flag_type(tp: object) -> tuple[type, str | None]:
    """(element type, nargs) for a dataclass field annotation such as `list[int] | None`."""
    inner = tp
    if typing.get_origin(tp) is not list:  # unwrap `X | None`
        inner = next((a for a in typing.get_args(tp) if a is not type(None)), tp)
    if typing.get_origin(inner) is list:
        return typing.get_args(inner)[0], "+"
    return inner, None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the experiment positional and one flag per `ProbeConfig` field."""
    parser.add_argument("experiment", choices=EXPERIMENTS, help="which study to run")
    hints = typing.get_type_hints(ProbeConfig)
    for f in dataclasses.fields(ProbeConfig):
        if f.name == "experiment":
            continue
        typ, nargs = _flag_type(hints[f.name])
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if typ is bool:  # `type=bool` would read "--flag False" as True: use --flag / --no-flag
            parser.add_argument(
                f"--{f.name.replace('_', '-')}",
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=f"{f.metadata.get('help', '')} (default: {default})",
            )
            continue
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            dest=f.name,
            type=typ,
            nargs=nargs,
            default=default,
            help=f"{f.metadata.get('help', '')} (default: {default})",
        )
    parser.add_argument(
        "--quick", action="store_true", help="seconds-long smoke run: n=4, 2 layers, 1 LoRA epoch"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")


def config_from_args(args: argparse.Namespace) -> ProbeConfig:
    """A validated `ProbeConfig` from parsed flags (`--quick` shrinks sizes)."""
    kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(ProbeConfig) if hasattr(args, f.name)}
    if getattr(args, "quick", False):
        kw.update(
            n=4,
            n_boot=20,
            max_new_tokens=min(kw.get("max_new_tokens", 48), 12),
            af_max_new_tokens=8,
            lora_epochs=1.0,
            train_requests=2,
            train_sycophancy=4,
            alphas=[-0.5, 0.5],
        )
        kw.setdefault("layers", None)
        kw["layers"] = kw["layers"] or [0, -1]
    return ProbeConfig(**kw)


def run(args: argparse.Namespace) -> int:
    """Run the experiment named in `args`; prints where the results went."""
    from probes.experiments import run_experiment

    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING, format="%(message)s"
    )
    cfg = config_from_args(args)
    t0 = time.perf_counter()
    result = run_experiment(cfg)
    print(
        f"probe {cfg.experiment}: done in {time.perf_counter() - t0:.0f} s -> {cfg.out}/{cfg.experiment}/{cfg.experiment}.md"
    )
    if "verdict" in result:
        print(result["verdict"])
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probes.cli e1 --model ...` (the same flags as `latentworks probe`)."""
    parser = argparse.ArgumentParser(prog="latentworks probe", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
