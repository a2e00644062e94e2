"""`latentworks report DIR`: the comparison table of a results directory, plus plots and report.md."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path


def problem_warnings(problems: dict) -> list[str]:
    """Warning lines for a report: duplicated records and skipped lines."""
    lines = []
    dup = problems.get("duplicates") or {}
    if dup:
        extra = sum(n - 1 for n in dup.values())
        example = ", ".join(f"{i}/{m}" for i, m in list(dup)[:3])
        lines.append(
            f"warning: {len(dup)} (item, method) pairs were written more than once ({extra} extra records, "
            f"e.g. {example}); the table counts the last record of each. Two processes may have written "
            "to this directory."
        )
    if problems.get("unreadable"):
        why = "; ".join(f"{n}x {r}" for r, n in list((problems.get("reasons") or {}).items())[:3])
        lines.append(
            f"warning: {problems['unreadable']} line(s) that are not records of this run were skipped"
            + (f" ({why})" if why else "")
            + "; `latentworks eval ... --resume` quarantines and recomputes them."
        )
    return lines


def coverage_warnings(manifest: dict, records: list[dict]) -> list[str]:
    """Warning lines for methods of the run with no records, or with fewer items than the run has: a run
    that stopped midway (an error, a kill) leaves them out of the table, and the table alone would not
    say so."""
    methods = (manifest.get("identity") or {}).get("methods")
    items = manifest.get("item_ids")
    if not isinstance(methods, list):
        return []
    done: dict[str, int] = {}
    for r in records:
        done[r["method"]] = done.get(r["method"], 0) + 1
    lines = []
    for m in methods:
        n, total = done.get(m, 0), len(items) if isinstance(items, list) else None
        if n == 0:
            lines.append(
                f"warning: method {m} has no records: the run stopped before it ran, so the table leaves it "
                "out. Fix what stopped it, then `latentworks eval ... --resume` runs it."
            )
        elif total is not None and n < total:
            lines.append(
                f"warning: method {m} has {n} of {total} items: the run stopped before the rest, so its row "
                "covers those only. Fix what stopped it, then `latentworks eval ... --resume` runs the rest."
            )
    return lines


def overflow_warnings(records: list[dict]) -> list[str]:
    """One warning line counting, per method, the items recorded as failures because they ran past the
    model's context (`eval.runner` records them instead of stopping the run)."""
    from eval.run_state.records import CONTEXT_OVERFLOW

    per: dict[str, int] = {}
    for r in records:
        if str(r.get("error", "")).startswith(CONTEXT_OVERFLOW):
            per[r["method"]] = per.get(r["method"], 0) + 1
    if not per:
        return []
    counts = ", ".join(f"{m} {n}" for m, n in per.items())
    return [
        f"warning: {sum(per.values())} item(s) ran past the model's context and are scored as failures "
        f"({counts}); their records carry the reason in `error`. Shorten the prompts, or lower --latent-steps / "
        "--max-new-tokens, or use a model with a longer context to score them."
    ]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion. Written out (six lines) rather than imported: the libraries that
    have it (scipy, statsmodels) are not core dependencies (scipy alone is 146 MB installed); a test checks
    it against statsmodels' `proportion_confint(method="wilson")`."""
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # Rounding can put an end a hair inside the estimate (ci_high 0.9999999999999999 at 6/6), which
    # would give a negative error bar: the interval always holds p, and 0 and 1 exactly at the ends.
    lo = 0.0 if k == 0 else min(p, max(0.0, mid - half))
    hi = 1.0 if k == n else max(p, min(1.0, mid + half))
    return (lo, hi)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test of paired right/wrong outcomes: `b` items only the first method got
    right, `c` only the second. Under equal accuracy the b + c discordant items split as Binomial(b + c,
    1/2); the p-value doubles the smaller tail (at most 1). Items both got right or wrong carry no
    information about which is better, so they do not enter."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_counts(records: list[dict], first: str, second: str) -> dict:
    """Paired outcomes of two methods on the items both ran: both right, only `first`, only `second`,
    both wrong, and the exact McNemar p-value."""
    a = {r["item_id"]: bool(r["correct"]) for r in records if r["method"] == first}
    b = {r["item_id"]: bool(r["correct"]) for r in records if r["method"] == second}
    both = a.keys() & b.keys()
    only_first = sum(a[i] and not b[i] for i in both)
    only_second = sum(b[i] and not a[i] for i in both)
    return {
        "n": len(both),
        "both_right": sum(a[i] and b[i] for i in both),
        f"only_{first}": only_first,
        f"only_{second}": only_second,
        "both_wrong": sum(not a[i] and not b[i] for i in both),
        "p_mcnemar": mcnemar_exact(only_first, only_second),
    }


def summarize(records: list[dict]) -> list[dict]:
    """One row per method: n, accuracy with CI, mean output tokens, mean seconds per item.

    An item that could not run (a record with an `error`, e.g. past the model's context) counts as wrong
    in the accuracy and in `failed`, and is left out of the token and time means (it decoded nothing)."""
    rows = []
    for method in ("single", "text_mas", "latent_mas"):
        rs = [r for r in records if r["method"] == method]
        if not rs:
            continue
        k, n = sum(r["correct"] for r in rs), len(rs)
        lo, hi = wilson(k, n)
        ran = [r for r in rs if not r.get("error")]
        rows.append(
            {
                "method": method,
                "n": n,
                "accuracy": k / n,
                "ci_low": lo,
                "ci_high": hi,
                "output_tokens": sum(r["output_tokens"] for r in ran) / max(len(ran), 1),
                "seconds_per_item": sum(r["wall_s"] for r in ran) / max(len(ran), 1),
                "failed": n - len(ran),
                "latent_steps": max((a["latent_steps"] for r in rs for a in r["agents"]), default=0),
                # code: pass@1 is `accuracy`; this is the mean share of each item's tests that passed
                "test_pass_fraction": _mean_fraction(rs),
            }
        )
    return rows


def _mean_fraction(records: list[dict]) -> float | None:
    fracs = [r["tests_passed"] / r["tests_total"] for r in records if r.get("tests_total")]
    return sum(fracs) / len(fracs) if fracs else None


def time_ratio_spread(records: list[dict], slow: str = "text_mas", fast: str = "latent_mas") -> dict | None:
    """Ratio of `slow`'s to `fast`'s seconds per item, one per batch (the runner interleaves the methods
    batch by batch, so each pair ran under the same machine load): median, min and max over batches.
    On a shared machine a single ratio is noise; the spread says how much."""
    import statistics

    slow_s = {r["item_id"]: r["wall_s"] for r in records if r["method"] == slow and not r.get("error")}
    fast_s = {r["item_id"]: r["wall_s"] for r in records if r["method"] == fast and not r.get("error")}
    # items of one batch share their per-item time, so equal ratios are one batch
    ratios = sorted({round(slow_s[i] / max(fast_s[i], 1e-12), 9) for i in slow_s.keys() & fast_s.keys()})
    if not ratios:
        return None
    return {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1], "batches": len(ratios)}


def format_table(rows: list[dict], spread: dict | None = None) -> str:
    lines = [
        f"| {'method':<10} | {'n':>4} | {'accuracy':>8} | {'95% CI':>13} | {'output tokens':>13} | {'s / item':>8} |",
        "|" + "|".join("-" * w for w in (12, 6, 10, 15, 15, 10)) + "|",
    ]
    for r in rows:
        ci = f"{r['ci_low']:.1%}-{r['ci_high']:.1%}"
        lines.append(
            f"| {r['method']:<10} | {r['n']:>4} | {r['accuracy']:>8.1%} | {ci:>13} | {r['output_tokens']:>13.1f} | "
            f"{r['seconds_per_item']:>8.3f} |"
        )
    for r in rows:
        if r.get("test_pass_fraction") is not None:
            lines.append(
                f"{r['method']}: pass@1 {r['accuracy']:.1%}, mean per-test pass fraction {r['test_pass_fraction']:.1%}"
            )
    by = {r["method"]: r for r in rows}
    if "text_mas" in by and "latent_mas" in by:
        t, lat = by["text_mas"], by["latent_mas"]
        speed = t["seconds_per_item"] / max(lat["seconds_per_item"], 1e-9)
        fewer = 1 - lat["output_tokens"] / max(t["output_tokens"], 1e-9)
        lines.append("")
        span = (
            f" (per batch: median {spread['median']:.2f}x, range {spread['min']:.2f}-{spread['max']:.2f}x over "
            f"{spread['batches']} batches)"
            if spread
            else ""
        )
        lines.append(
            f"text_mas / latent_mas: {speed:.2f}x wall time{span}, latent_mas uses {fewer:.1%} fewer output "
            f"tokens, accuracy {lat['accuracy'] - t['accuracy']:+.1%} points"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    from latent.plotting import figure, save_figure

    fig, axes = figure(1, 2, figsize=(9, 3.6), extra="eval")
    for ax, key, label in (
        (axes[0], "output_tokens", "output tokens / item"),
        (axes[1], "seconds_per_item", "seconds / item"),
    ):
        for r in rows:
            err = [[max(0.0, r["accuracy"] - r["ci_low"])], [max(0.0, r["ci_high"] - r["accuracy"])]]
            ax.errorbar(r[key], r["accuracy"], yerr=err, fmt="o", capsize=3, label=r["method"])
            ax.annotate(
                r["method"], (r[key], r["accuracy"]), textcoords="offset points", xytext=(5, 5), fontsize=8
            )
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    fig.suptitle("accuracy vs cost (95% Wilson CI)")
    fig.tight_layout()
    # Drawn to a fresh name and renamed over `path`, so a link planted at `path` is replaced, not followed.
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{os.urandom(4).hex()}.png")
    try:
        save_figure(fig, tmp, dpi=120)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_summary(out: str | Path, problems: dict | None = None) -> list[dict]:
    """Write `summary.json` (one row per method, plus the per-batch time-ratio spread); returns the rows."""
    from eval.run_state.store import load_results

    out = Path(out)
    records = load_results(out, problems)
    rows = summarize(records)
    payload = {"methods": rows, "time_ratio_text_over_latent": time_ratio_spread(records)}
    _write(out / "summary.json", json.dumps(payload, indent=2))
    return rows


def _write(path: Path, text: str) -> None:
    """Write a report file by a fresh file renamed over it: a link planted at `path` is replaced, never
    followed."""
    from eval.run_state.files import write_new

    write_new(path, text.encode(), "write")


def _dtype_shown(manifest: dict) -> str:
    """The dtype the run computed in: recorded by the runner since runs record it; for an older run, the
    one it asked for, or what the loader's default was."""
    used = manifest.get("dtype_used") or (manifest.get("config") or {}).get("dtype")
    return used or "not recorded (the default then: float32 on CPU, the checkpoint's own on GPU)"


def print_report(out: str | Path) -> str:
    """Print the table, write report.md, summary.json and (with matplotlib) report.png; returns the table."""
    from eval.run_state.store import load_results, run_manifest

    out = Path(out)
    problems: dict = {}
    records = load_results(out, problems)
    rows = write_summary(out)
    warnings = problem_warnings(problems)
    manifest = run_manifest(out)
    if manifest is None:
        warnings.append(f"warning: no manifest.json in {out}: the run's settings are unknown.")
        manifest = {}
    warnings += coverage_warnings(manifest, records) + overflow_warnings(records)
    for w in warnings:
        print(w, file=sys.stderr)
    ident = manifest.get("identity", {})
    head = (
        f"model {ident.get('model')} | task {ident.get('task')} | graph {ident.get('graph')} | "
        f"latent steps {ident.get('latent_steps')} | max new tokens {ident.get('max_new_tokens')} | "
        f"prompts {ident.get('prompts', 'default')} | dtype {_dtype_shown(manifest)}"
        + (f" | thoughts {ident['thoughts']} (ablation)" if ident.get("thoughts", "real") != "real" else "")
    )
    table = format_table(rows, time_ratio_spread(records))
    print(head)
    print(table)
    notes = "".join(f"\n> {w}\n" for w in warnings)
    body = f"# Evaluation report\n\n{head}\n{notes}\n{table}\n\n"
    _write(out / "report.md", body)  # before the plot: a plot error never costs the report
    from latent.plotting import can_plot

    if not can_plot():
        print('(no report.png: plots need matplotlib, pip install "latentworks[eval]")')
        return table
    try:
        plot(rows, out / "report.png")
    except Exception as err:  # noqa: BLE001 - any plotting failure leaves the table and report.md
        line = f"(no report.png: the plot failed: {str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__})"
        print(line, file=sys.stderr)
        _write(out / "report.md", body + line + "\n")
    else:
        _write(out / "report.md", body + "![accuracy vs cost](report.png)\n")
    return table


@dataclass
class ReportOptions:
    """`latentworks report DIR`."""

    out: str = field(metadata={"positional": True, "help": "output directory of `latentworks eval`"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from latent.args import add_config_arguments

    add_config_arguments(parser, ReportOptions, files=False)


def run(args: argparse.Namespace) -> int:
    from latent.args import config_from_args

    print_report(
        config_from_args(ReportOptions, args, files=False).out
    )  # a ValueError (not a results directory) is printed as `error: ...` by the CLI
    return 0
