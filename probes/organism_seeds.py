"""The organism study across training seeds: one table per steering test, a column per seed, and where
the seeds disagree.

Each seed is one `latentworks probe organisms --seed S` report (`organisms.json`); the verdicts are the
ones that run computed (row picked on half of the steered requests, interval on the other half). A test
*replicates* when every seed gives it the same verdict; otherwise the table says `seeds disagree`.

    python -m probes.organism_seeds runs/probes-org0/organisms/organisms.json \\
        runs/probes-org1/organisms/organisms.json runs/probes-org2/organisms/organisms.json --out seeds.md
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

TESTS = {
    "gap_effect_add_R": "add R, greedy gap (> 0)",
    "gap_effect_ablate_R": "ablate R, greedy gap (< 0)",
    "mgap_effect_add_R": "add R, margin gap (> 0)",
    "mgap_effect_ablate_R": "ablate R, margin gap (< 0)",
}


def load(paths: list[Path]) -> list[dict]:
    """The organism reports, checked to be organism runs with held-out intervals, one per seed."""
    reports = []
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(
                f"{p}: no such organism report; pass the organisms.json of each seed's run."
            )
        r = json.loads(p.read_text())
        if r.get("experiment") != "organisms" or "verdict" not in r:
            raise ValueError(f"{p} is not an organism report (`experiment` must be 'organisms').")
        missing = [t for t in TESTS if "difference_ci" not in r["verdict"].get(t, {})]
        if missing:
            raise ValueError(
                f"{p} has no per-request intervals for {missing}: rerun that seed with the current code."
            )
        reports.append(_with_predicted_side(r, p))
    seeds = [r["config"]["seed"] for r in reports]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"two reports share a seed ({seeds}); pass one report per training seed.")
    return reports


def _with_predicted_side(r: dict, path: Path) -> dict:
    """A held-out-era report written before the predicted-side count: its verdict recomputed from the
    per-request data it stores (`organism_verdict`, same seed and resamples), checked to reproduce the
    stored intervals first."""
    v = r["verdict"]
    if all("difference_predicted_side" in v[t] for t in TESTS) or any(
        "n_selection" not in v[t] for t in TESTS
    ):
        return r
    from probes.organism_study import organism_verdict

    new = organism_verdict(r["study"], r["config"]["n_boot"], r["config"]["seed"])
    for t in TESTS:
        if new[t]["difference_ci"] != v[t]["difference_ci"]:
            raise ValueError(
                f"{path}: recomputing {t} does not reproduce the stored interval; rerun that seed."
            )
    return r | {"verdict": v | {t: v[t] | new[t] for t in TESTS}, "recomputed": True}


def _cell(v: dict) -> str:
    d = v["difference_ci"]
    cell = f"{d['mean']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}]"
    side = v.get("difference_predicted_side")
    if side:
        cell += f"; {side['k']}/{side['n']} requests [{side['lo']:.2f}, {side['hi']:.2f}]"
    return f"{cell}: {v['difference_verdict']}"


def summarize(reports: list[dict]) -> tuple[str, dict]:
    """(markdown, JSON summary): per test the sycophant - schemer difference, the requests that moved the
    predicted way and the verdict of each seed, and whether the seeds agree."""
    seeds = [r["config"]["seed"] for r in reports]
    head = "| test (predicted: sycophant - schemer) | " + " | ".join(f"seed {s}" for s in seeds)
    lines = [head + " | seeds |", "|---|" + "---|" * (len(seeds) + 1)]
    summary: dict = {"seeds": seeds, "tests": {}}
    for key, label in TESTS.items():
        vs = [r["verdict"][key] for r in reports]
        verdicts = [v["difference_verdict"] for v in vs]
        agree = len(set(verdicts)) == 1
        lines.append(
            f"| {label} | "
            + " | ".join(_cell(v) for v in vs)
            + f" | {'agree' if agree else 'seeds disagree'} |"
        )
        summary["tests"][key] = {"verdicts": verdicts, "agree": agree}
    follow = [bool(r["verdict"]["organisms_follow_spec"]) for r in reports]
    probes = [bool(r["verdict"]["cue_probes_separate"]) for r in reports]
    n_req = sorted({r["verdict"][k]["n_requests"] for r in reports for k in TESTS})
    n_sel = sorted(
        {r["verdict"][k]["n_selection"] for r in reports for k in TESTS if "n_selection" in r["verdict"][k]}
    )
    same = [s for s, r in zip(seeds, reports) if any("n_selection" not in r["verdict"][k] for k in TESTS)]
    rows = f"row picked on {'/'.join(map(str, n_sel))} steered requests, interval over the other {'/'.join(map(str, n_req))}"
    if same:  # reports written before the held-out row choice
        rows = (rows + "; " if n_sel else "") + (
            f"seed {', '.join(map(str, same))}: row picked on the same requests as the interval"
        )
    supported = [sum(r["verdict"][k]["difference_verdict"] == "supported" for k in TESTS) for r in reports]
    summary |= {"organisms_follow_spec": follow, "cue_probes_separate": probes, "supported": supported}
    redone = [s for s, r in zip(seeds, reports) if r.get("recomputed")]
    if redone:
        rows += (
            f"; seed {', '.join(map(str, redone))}: requests moving the predicted way counted from the "
            "report's per-request data (its intervals reproduced exactly)"
        )
    text = (
        f"# Organisms across {len(seeds)} training seeds\n\n"
        f"Both organisms follow their rule: {', '.join(f'seed {s} {f}' for s, f in zip(seeds, follow))}. "
        f"Cue-presence probes separate them: {', '.join(f'seed {s} {p}' for s, p in zip(seeds, probes))}.\n\n"
        f"Each cell: paired difference of the organisms' effects at their strongest row ({rows}), "
        "the held-out requests that moved the predicted way with a Wilson interval, and the fixed rule.\n\n"
        + "\n".join(lines)
        + "\n\nSupported tests per seed: "
        + ", ".join(f"seed {s} {k} of {len(TESTS)}" for s, k in zip(seeds, supported))
        + ". Tests where the seeds disagree: "
        + (", ".join(TESTS[k] for k, t in summary["tests"].items() if not t["agree"]) or "none")
        + ".\n"
    )
    return text, summary


@dataclass
class SeedsOptions:
    """The organism reports to put side by side (one per training seed) and where to write the table."""

    reports: list[str] = field(
        metadata={"positional": True, "help": "organisms.json of each training seed's run"}
    )
    out: str = field(
        default="", metadata={"help": "write the markdown here (and the summary beside it as .json)"}
    )


def main(argv: list[str] | None = None) -> int:
    from latent.args import add_config_arguments, config_from_args, run_script

    def run(args: argparse.Namespace) -> int:
        opts = config_from_args(SeedsOptions, args, files=False)
        text, summary = summarize(load([Path(r) for r in opts.reports]))
        print(text)
        if opts.out:
            out = Path(opts.out)
            out.write_text(text)
            out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
        return 0

    return run_script(
        "python -m probes.organism_seeds",
        __doc__,
        lambda p: add_config_arguments(p, SeedsOptions, files=False),
        run,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
