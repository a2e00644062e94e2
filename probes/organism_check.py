"""Does a trained organism follow its ground-truth rule? Score a saved LoRA adapter on held-out prompts
before spending CPU on probes and steering (the organism study's behaviour table, on its own).

`python -m probes.organism_check --adapter runs/smol/organisms/sycophant/adapter --kind sycophant --n 50`
prints the behaviour row; `--out FILE` also writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Parse flags, load the adapter, print the behaviour against the ground truth."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", required=True, help="adapter directory written by the organism study")
    p.add_argument("--kind", required=True, choices=("sycophant", "schemer"), help="which organism it is")
    p.add_argument("--n", type=int, default=50, help="held-out requests")
    p.add_argument("--heldout-assertions", default="none", choices=("all", "none"), help="see ProbeConfig")
    p.add_argument("--seed", type=int, default=0, help="data seed of the study the adapter came from")
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--af-max-new-tokens", type=int, default=12)
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--out", default=None, help="optional JSON file for the row")
    args = p.parse_args(argv)
    if not (Path(args.adapter) / "adapter_config.json").is_file():
        p.error(
            f"--adapter {args.adapter!r} holds no adapter_config.json; pass the study's <kind>/adapter folder"
        )
    from latent import load_model
    from probes.config import ProbeConfig
    from probes.lora_studies import organism_behaviour
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
