"""Every headline number the README, docs/ and BENCHMARKS.md quote agrees with its one source.

Each number is read from where it was measured: a report under `bench/results/`, a built-in model's card
(`latent/builtin_models/<name>/card.json`), the demo's printed table (the README shows it verbatim; a `real`
test reruns the demo), or, for ranges over runs that kept no file, the topic report under `docs/results/` that
holds every run. Each check names the sentence it guards; change one copy and its check fails. The Qwen table
and headline are generated from their report by `bench/studies/qwen_table.py` and checked in
`tests/eval/test_qwen_table_report.py`.
"""

import json
import re
from functools import cache
from pathlib import Path

import pytest

from eval.report import wilson

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


@cache
def prose(rel: str) -> str:
    """A page with its line breaks and runs of spaces as single spaces, so a wrapped sentence reads as one."""
    return " ".join((ROOT / rel).read_text().split())


@cache
def report(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def correct(name: str, row: str) -> int:
    """Items right in one row of a `bench/studies/handoff.py` report."""
    return report(name)[row]["correct"]


def cell(name: str, row: str, digits: int = 1) -> str:
    """A hand-off table cell as the pages print it: `46/100 (36.6-55.7%)`."""
    r = report(name)[row]
    lo, hi = wilson(r["correct"], r["n"])
    return f"{r['correct']}/{r['n']} ({100 * lo:.{digits}f}-{100 * hi:.{digits}f}%)"


def card(model: str) -> dict:
    return json.loads((ROOT / "latent" / "builtin_models" / model / "card.json").read_text())


def solver(model: str) -> str:
    return f"{100 * card(model)['heldout_accuracy']:.1f}%"


def span(values) -> str:
    values = sorted(values)
    return f"{values[0]}-{values[-1]}"


V8 = ("handoff_v8_relay", "handoff_v8_pick", "handoff_v8_sum")
CONTROLS = ("latent_only_random", "latent_only_other", "latent_only_const")
SMOL = ("handoff_retrained/smollm2_relay", "handoff_retrained/smollm2_pick")  # the shipped channel
SMOL_ALT = ("handoff_retrained/smollm2_otherwording_relay", "handoff_retrained/smollm2_otherwording_pick")
WORDS_ALT = (  # the shipped many-wordings channel on the same other-wording files
    "handoff_retrained/smollm2wordings_otherwording_relay",
    "handoff_retrained/smollm2wordings_otherwording_pick",
)


def v8_claims() -> list[tuple[str, str, str]]:
    """(page, quoted text, the sentence it belongs to) for the built-in hand-off model v8."""
    lo = [correct(n, "latent_only") for n in V8]
    oracle = [correct(n, "oracle") for n in V8]
    other = span(correct(n, "latent_only_other") for n in V8)
    controls = span(correct(n, row) for n in V8 for row in CONTROLS)
    kv = {
        lvl: (correct(f"handoff_v8_{lvl}", "latent_kv"), correct(f"handoff_v8_{lvl}", "text_mas"))
        for lvl in ("relay", "sum", "pick")
    }
    return [
        (
            "README.md",
            f"`builtin:arith-mini-v8` gets {lo[0]}, {lo[1]} and {lo[2]} of 100 held-out relay, pick and sum items "
            f"(oracle {oracle[0]}, {oracle[1]}, {oracle[2]}; another item's thoughts {other}%)",
            "What it means: trained thoughts carry them",
        ),
        (
            "BENCHMARKS.md",
            f"latent_only {lo[0]} / {lo[1]} / {lo[2]} of 100 (relay / pick / sum), oracle {oracle[0]} / {oracle[1]} / "
            f"{oracle[2]}, controls {controls}%",
            "summary row: hand-off, built-in v8",
        ),
        (
            "BENCHMARKS.md",
            "relay {} vs {}, sum {} vs {}, pick {} vs {} of 100".format(
                *kv["relay"], *kv["sum"], *kv["pick"]
            ),
            "summary row: hand-off v8, latent_kv against text_mas",
        ),
        (
            "docs/models.md",
            f"through thoughts alone relay {lo[0]}/100, pick {lo[1]}/100 (oracle {oracle[1]}), sum {lo[2]}/100",
            "the v8 bullet",
        ),
        ("docs/models.md", f"other items' thoughts {other}%", "the v8 bullet"),
    ]


def smollm2_claims() -> list[tuple[str, str, str]]:
    """The shipped SmolLM2 hand-off channels, retrained from their recipes (64 held-out items per level)."""
    relay, pick = (correct(n, "latent_only") for n in SMOL)
    alt_relay, alt_pick = (correct(n, "latent_only") for n in SMOL_ALT)
    w_relay, w_pick = (correct(n, "latent_only") for n in WORDS_ALT)
    controls = span(correct(n, row) for n in SMOL for row in CONTROLS)
    all_controls = max(correct(n, row) for n in SMOL + SMOL_ALT for row in CONTROLS)
    pct = lambda k: f"{100 * k / 64:.0f}%"  # noqa: E731 - docs/handoff.md rounds to whole percents
    return [
        (
            "README.md",
            f"the shipped SmolLM2-135M-Instruct channel {relay}/64 relay, {pick}/64 pick (its many-wordings sibling "
            f"{w_relay}/64, {w_pick}/64 in other words)",
            "What it means: the SmolLM2 hand-off",
        ),
        (
            "BENCHMARKS.md",
            f"relay latent_only {relay}/64, pick {pick}/64, controls {controls}/64; files in other words "
            f"{alt_relay}/64, {alt_pick}/64 (many-wordings recipe: {w_relay}/64, {w_pick}/64)",
            "summary row: hand-off, SmolLM2",
        ),
        (
            "docs/handoff.md",
            f"pick `latent_only` {pct(relay)} / {pct(pick)} on held-out items, other wording relay {pct(alt_relay)}, "
            f"pick {pct(alt_pick)}, controls 0-{pct(all_controls)}",
            "the recipes bullet",
        ),
        (
            "docs/handoff.md",
            f"(other wording relay {pct(w_relay)}, pick {pct(w_pick)}",
            "the recipes bullet, many wordings",
        ),
    ]


def gemma_claims() -> list[tuple[str, str, str]]:
    before = correct("handoff_gemma3_relay", "latent_only")
    after = correct("handoff_gemma3ft_relay", "latent_only")
    alt = correct("handoff_gemma3ft_alt_relay", "latent_only")
    controls = span(correct("handoff_gemma3ft_relay", row) for row in CONTROLS)
    return [
        (
            "BENCHMARKS.md",
            f"latent_only {before}/64 -> {after}/64, controls {controls}/64; other wording {alt}/64",
            "summary row: Gemma",
        ),
        (
            "docs/handoff.md",
            f"relay `latent_only` {100 * after / 64:.0f}%, other wording {100 * alt / 64:.0f}%",
            "the recipes bullet",
        ),
    ]


def card_claims() -> list[tuple[str, str, str]]:
    """Solver accuracy on the 512 held-out problems and the parameter count, as each model card records them."""
    v = {n: solver(f"arith-mini-v{n}" if n != 5 else "arith-mini") for n in (3, 4, 5, 6, 7, 8)}
    params = card("arith-mini")["params"]
    return [
        (
            "BENCHMARKS.md",
            f"v5 {v[5]}, v4 {v[4]}, v3 {v[3]}; hand-off models v8 {v[8]}, v7 {v[7]}, v6 {v[6]}",
            "summary row: built-in models",
        ),
        *[
            ("BENCHMARKS.md", f"| {n} | {what} | {v[n]} |", "the built-in models table")
            for n, what in [
                (5, "multi-agent work, latent hand-off, `compact` prompts"),
                (4, "multi-agent work"),
                (3, "a single agent"),
                (6, "hand-off"),
                (7, "hand-off, note term"),
                (8, "hand-off, pick and sum"),
            ]
        ],
        ("docs/models.md", f"Solver accuracy {v[5]}.", "the v5 bullet"),
        ("docs/models.md", f"Solver accuracy {v[4]} on 512 held-out problems", "the v4 bullet"),
        ("docs/models.md", f"solver accuracy {v[7]}.", "the v7 bullet"),
        (
            "docs/models.md",
            f"solver accuracy {v[8]}. The default `builtin:arith-mini` stays v5 ({v[5]} solver)",
            "the v8 bullet",
        ),
        ("docs/models.md", f"earlier numbers stay reproducible ({v[3]})", "the v3 bullet"),
        ("README.md", f"On a {params / 1e6:.1f}M-parameter toy", "What it means"),
        ("BENCHMARKS.md", f"(v5, {params / 1e6:.2f}M parameters)", "the demo section"),
    ]


def service_claims() -> list[tuple[str, str, str]]:
    """`latentworks serve` under load and the DLM GRPO step: both runs wrote a JSON report."""
    r64 = next(r for r in report("serve_load_arith_mini")["rows"] if r["clients"] == 64)
    smol = next(r for r in report("serve_load_smollm2")["rows"] if r["clients"] == 64)
    grpo = json.loads((ROOT / "finetune/dlm/results/grpo_scoring/report.json").read_text())
    median = lambda xs: sorted(xs)[len(xs) // 2 - 1 : len(xs) // 2 + 1]  # noqa: E731 - the two middle values (6 trials)
    ours, trl = (sum(median(grpo["step_time_s"][k])) / 2 for k in ("True", "False"))
    return [
        (
            "BENCHMARKS.md",
            f"64 clients {r64['req_per_s']:.2f} req/s, **{r64['speedup']:.2f}x** one at a time, p99 "
            f"{r64['p99_ms'] / 1000:.2f} s, 0 errors of {r64['requests']}; SmolLM2-135M {smol['speedup']:.2f}x",
            "summary row: serve",
        ),
        (
            "BENCHMARKS.md",
            f"{ours:.2f} s [{min(grpo['step_time_s']['True']):.2f}, {max(grpo['step_time_s']['True']):.2f}] per step "
            f"against TRL's {trl:.2f} s [{min(grpo['step_time_s']['False']):.2f}, {max(grpo['step_time_s']['False']):.2f}], {trl / ours:.1f}x",
            "the DLM section",
        ),
        ("docs/modules.md", f"{trl / ours:.1f}x faster per SmolLM2 step", "the DLM paragraph"),
    ]


def speed_claims() -> list[tuple[str, str, str]]:
    """Throughput, the latent loop against the official code and the few-row bf16 path: each run kept a report."""
    bf16 = {r["batch"]: r for r in report("throughput_smollm2_b32_bf16_fewrows")["rows"]}
    f32 = {r["batch"]: r for r in report("throughput_smollm2_b32")["rows"]}
    lead = lambda r: f"{r['latent_mas'] / r['text_mas']:.2f}"  # noqa: E731 - latent_mas / text_mas
    claims = [
        (
            "BENCHMARKS.md",
            f"| {b} | {r['single']:.3f} | {r['text_mas']:.3f} | {r['latent_mas']:.3f} | {lead(r)} |",
            f"the throughput table, batch {b}",
        )
        for b, r in bf16.items()
        if b in (1, 4, 16, 32)
    ]
    claims.append(
        (
            "BENCHMARKS.md",
            f"latent_mas / text_mas {lead(bf16[1])}x at batch 1, {lead(bf16[32])}x at batch 32; float32: "
            f"{lead(f32[1])}x and {lead(f32[32])}x",
            "summary row: throughput",
        )
    )

    def ratio(name: str, key: str) -> str:
        r = report(name)["details"][key]["ratio"]
        return f"**{r['median']:.2f}** ({r['min']:.2f}-{r['max']:.2f})"

    def loop_row(label: str, name: str, dtype: str) -> str:
        d = report(name)["details"]
        cells = [f"{ratio(name, f'latent_b{b}')} | {d[f'latent_b{b}']['work_ceiling']:.2f}" for b in (1, 16)]
        return f"| {label} | {dtype} | {cells[0]} | {cells[1]} |"

    for label, tag in (("Qwen2.5-Coder-1.5B-Instruct", "q15"), ("Qwen2.5-Coder-0.5B-Instruct", "q05")):
        for dtype, dt in (("float32", "f32"), ("bfloat16", "bf16")):
            row = loop_row(label, f"vs_official_qwen/{tag}_{dt}_latent", dtype)
            claims.append(
                ("BENCHMARKS.md", row, f"the latent-loop table against the official code, {label} {dtype}")
            )
        r = report(f"vs_official_qwen/{tag}_f32_e2e16")["details"]["e2e_b16"]
        row = f"| {label}, 16 questions | **{r['ratio_total']:.2f}** | {r['tokens_official']} / {r['tokens_ours']} |"
        claims.append(("BENCHMARKS.md", row, f"the end-to-end table against the official code, {label}"))
    for label, model in (("SmolLM2-135M-Instruct", "smollm2"), ("Gemma-3-270m", "gemma")):
        row = loop_row(f"{label} (Intel Xeon, AMX)", f"vs_official_{model}_latent", "float32")
        claims.append(("BENCHMARKS.md", row, f"the latent-loop table against the official code, {label}"))
    e2e = report("vs_official_smollm2_e2e64")
    claims.append(
        (
            "BENCHMARKS.md",
            f"SmolLM2 (64 questions) {e2e['e2e_b16']:.2f}x",
            "summary row: end to end against the official code",
        )
    )
    few = (RESULTS / "few_row_matmul_smollm2.md").read_text()
    read, decode = (
        re.search(rf"^ +1 \| {part} +\|.*\| +([\d.]+) \| [\d.-]+$", few, re.M).group(1)
        for part in ("prompt read \\+ latent steps", "decode")
    )
    claims.append(
        (
            "docs/interface.md",
            f"batch 1 {read}x on SmolLM2's prompt read + 8 latent steps and {decode}x on its decode",
            "the few-row bf16 bullet",
        )
    )
    return claims


def bf16_claims() -> list[tuple[str, str, str]]:
    """Why the Qwen table runs in float32: bf16 thoughts' distance from float32, latent steps 3-10."""
    row = next(
        line
        for line in (RESULTS / "bf16_thoughts" / "report.md").read_text().splitlines()
        if line.startswith("| bf16 batch 1 vs float32 |")
    )
    drift = span(round(100 * float(x)) for x in row.strip("|").split("|")[4:])  # columns: step 3 .. step 10
    return [
        ("README.md", f"bf16 thoughts drift {drift}% and move with the batch", "On models that reason"),
        ("BENCHMARKS.md", f"bf16 thoughts drift {drift}% from float32", "the Qwen section"),
        ("docs/results/qwen.md", f"bf16 vs float32 {drift}% by steps 3-10", "its summary row"),
    ]


def topic_claims() -> list[tuple[str, str, str]]:
    """Ranges over runs that kept no file: the topic report holds every run, the pages quote its ranges."""
    topic = prose("docs/results/builtin-latentmas.md")
    seq = re.search(r"\*\*Time\.\*\* Sequential (\S+)x in every run", topic).group(1)
    hier = re.search(r"hierarchical (\S+)x over every run", topic).group(1)
    table = (
        (ROOT / "docs/results/builtin-latentmas.md")
        .read_text()
        .split("| graph | prompts | real thoughts |")[1]
    )
    identical = re.findall(
        r"^ *\| (?:sequential|hierarchical) \| (?:default|compact) \|.*\| (\d+) \|$", table, re.M
    )
    assert len(identical) == 4, identical  # one row per graph and prompt set
    same = span(int(k) for k in identical)
    return [
        (
            "README.md",
            f"{seq}x on the sequential graph, {hier}x on the hierarchical one",
            "What it means: the speed",
        ),
        ("BENCHMARKS.md", f"sequential {seq}x, hierarchical {hier}x", "the built-in model section"),
        ("README.md", f"leave {same} of 100 answers unchanged", "What it means: random thoughts"),
        ("BENCHMARKS.md", f"{same} of 100 final answers identical", "the built-in model section"),
        (
            "BENCHMARKS.md",
            f"{same} of 100 answers identical",
            "summary row: do the thoughts carry information",
        ),
    ]


CLAIMS = (
    v8_claims()
    + smollm2_claims()
    + gemma_claims()
    + card_claims()
    + service_claims()
    + speed_claims()
    + bf16_claims()
    + topic_claims()
)


@pytest.mark.parametrize(("page", "quote", "sentence"), CLAIMS, ids=[f"{p}:{s}" for p, _, s in CLAIMS])
def test_page_quotes_its_source(page, quote, sentence):
    """The page says exactly what the source holds (the quote is built from the source, not copied)."""
    assert quote in prose(page), f"{page} ({sentence}) should read: {quote}"


def handoff_table_rows() -> list[tuple[str, str]]:
    """Each row of BENCHMARKS.md's v8 hand-off table, built from the five reports it cites."""
    names = (*V8, "handoff_v8_alt_relay", "handoff_v8_alt_pick")
    rows = ("no_info", "oracle", "text_mas", "latent_kv", "latent_only", *CONTROLS)
    return [(row, f"| {row} | " + " | ".join(cell(n, row) for n in names) + " |") for row in rows]


@pytest.mark.parametrize(("row", "line"), handoff_table_rows(), ids=[r for r, _ in handoff_table_rows()])
def test_handoff_table_is_its_reports(row, line):
    """Every cell of the page's hand-off table is the count and Wilson interval in its report."""
    assert line in (ROOT / "BENCHMARKS.md").read_text().splitlines(), (
        f"BENCHMARKS.md's v8 table should have: {line}"
    )


def real_model_rows() -> list[tuple[str, str]]:
    """The page's real-models table: SmolLM2 before/after and Gemma before/after, counts from the reports."""
    out = []
    for row in ("oracle", "text_mas", "latent_only", *CONTROLS):
        cells = [
            f"{correct('handoff_smollm2_relay', row)}/64",
            *(f"{correct(n, row)}/64" for n in SMOL),
            " / ".join(f"{correct(n, row)}/64" for n in SMOL_ALT),
            " / ".join(f"{correct(n, row)}/64" for n in WORDS_ALT),
            f"{correct('handoff_gemma3_relay', row)}/64",
            f"{correct('handoff_gemma3ft_relay', row)}/64",
        ]
        out.append((row, f"| {row} | " + " | ".join(cells) + " |"))
    return out


@pytest.mark.parametrize(("row", "line"), real_model_rows(), ids=[r for r, _ in real_model_rows()])
def test_real_model_table_is_its_reports(row, line):
    assert line in (ROOT / "BENCHMARKS.md").read_text().splitlines(), (
        f"BENCHMARKS.md's real-models table should have: {line}"
    )


# ----------------------------------------------------------------------------- the demo's printed table
DEMO_ROW = re.compile(
    r"^\| (\w+) +\| +(\d+) \| +([\d.]+)% \| +([\d.]+%-[\d.]+%) \| +([\d.]+) \| +([\d.]+) \|$", re.M
)


def readme_demo() -> dict[str, tuple]:
    """The demo table as README.md prints it: method -> (n, accuracy %, CI, output tokens)."""
    block = (ROOT / "README.md").read_text().split("## What the demo prints")[1].split("```")[1]
    return {m: (int(n), float(acc), ci, float(tok)) for m, n, acc, ci, tok, _ in DEMO_ROW.findall(block)}


def test_readme_demo_table_is_self_consistent():
    """The printed table's derived numbers follow from its counts: accuracy = k/n, the Wilson interval of
    k/n, the token saving and the accuracy difference in the line under it."""
    demo = readme_demo()
    assert set(demo) == {"single", "text_mas", "latent_mas"}
    right = {}
    for method, (n, acc, ci, _) in demo.items():
        k = right[method] = round(acc * n / 100)
        lo, hi = wilson(k, n)
        assert f"{100 * k / n:.1f}" == f"{acc:.1f}" and ci == f"{100 * lo:.1f}%-{100 * hi:.1f}%"
    text, latent = demo["text_mas"], demo["latent_mas"]
    readme = (ROOT / "README.md").read_text()
    assert f"latent_mas uses {100 * (1 - latent[3] / text[3]):.1f}% fewer output tokens" in readme
    gain = (
        100 * (right["latent_mas"] - right["text_mas"]) / text[0]
    )  # from the counts, as the demo computes it
    assert f"accuracy +{gain:.1f}% points" in readme


def test_benchmarks_quotes_the_demo_table():
    """BENCHMARKS.md's summary row and demo table carry the README's printed numbers and ratio."""
    demo = readme_demo()
    readme = (ROOT / "README.md").read_text()
    ratio, per_batch = re.search(
        r"text_mas / latent_mas: (\S+)x wall time \(per batch: median \S+, range (\S+)x", readme
    ).groups()
    saved = re.search(r"latent_mas uses (\S+)% fewer output tokens", readme).group(1)
    acc = {m: f"{v[1]:.1f}%" for m, v in demo.items()}
    bench = prose("BENCHMARKS.md")
    assert (
        f"single {acc['single']}, text_mas {acc['text_mas']}, latent_mas {acc['latent_mas']}; {saved}% fewer output tokens; "
        f"text_mas / latent_mas {ratio}x (per batch {per_batch}x)"
    ) in bench
    assert (
        f"| `latentworks demo` | 2 | {acc['single']} | {acc['text_mas']} | {acc['latent_mas']} | {saved}% | {ratio}x ({per_batch}x)"
        in bench
    )


@pytest.mark.real
def test_the_demo_prints_the_readme_table(tmp_path, capsys):
    """Rerun `latentworks demo` (float32: the accuracies and token counts are the same in both dtypes; only
    the timings differ): every method's n, accuracy, interval and output tokens equal the README's table."""
    from latentworks.cli import main

    assert (
        main(
            [
                "demo",
                "--dtype",
                "float32",
                "--handoff-limit",
                "0",
                "--threads",
                "1",
                "--out",
                str(tmp_path / "demo"),
            ]
        )
        == 0
    )
    printed = {
        m: (int(n), float(a), ci, float(t)) for m, n, a, ci, t, _ in DEMO_ROW.findall(capsys.readouterr().out)
    }
    assert printed == readme_demo()


def test_a_changed_copy_fails():
    """Mutation check: one number changed in a quoted copy (README's 49 of 100 pick items read as 50), and the
    claim that guards it no longer finds its quote."""
    page, quote, _ = v8_claims()[0]
    text = (ROOT / page).read_text()
    mutated = " ".join(text.replace("gets 100, 49 and 94", "gets 100, 50 and 94").split())
    assert quote in prose(page) and quote not in mutated


# ----------------------------------------------------------------------------- DLM: legal choices GRPO changed
DLM = ROOT / "finetune" / "dlm" / "results"
SHIFT_RE = re.compile(
    r"results/(lbf_smollm2_\w+)/[\w.]+\)\)?,? (\d+(?:\.\d)?)%, (\d+(?:\.\d)?)% and (\d+(?:\.\d)?)%"
)


def quoted_shifts() -> list[tuple[str, str, list[str]]]:
    """(page, recipe folder, the three per-seed percentages quoted) for every GRPO recipe that docs/modules.md
    and BENCHMARKS.md's DLM table cite with its report."""
    found = [("docs/modules.md", d, list(p)) for d, *p in SHIFT_RE.findall(prose("docs/modules.md"))]
    page = (ROOT / "BENCHMARKS.md").read_text()
    table = page[page.index("| GRPO recipe (3 seeds) |") :].split("\n\n")
    rows = [r for r in table[0].splitlines()[2:]]
    recipes = re.findall(r"results/(lbf_smollm2_\w+)/", table[1])  # the Source line, in the rows' order
    assert len(rows) == len(recipes), (rows, recipes)
    for row, recipe in zip(rows, recipes):
        found.append(
            ("BENCHMARKS.md", recipe, re.match(r"\| [^|]+ \| (\S+)% / (\S+)% / (\S+)% \|", row).groups())
        )
    return found


@pytest.mark.parametrize(
    ("page", "recipe", "quoted"), quoted_shifts(), ids=[f"{p}:{r}" for p, r, _ in quoted_shifts()]
)
def test_dlm_policy_shift_quotes_its_report(page, recipe, quoted):
    """Each recipe's "A%, B% and C% of the legal choices" equals its policy_shift.json per seed, to the
    precision quoted (whole percents, or one decimal)."""
    shift = json.loads((DLM / recipe / "policy_shift.json").read_text())
    for seed, q in enumerate(quoted):
        rate = 100 * shift[f"seed_{seed}"]["legal_choice_changed_rate"]
        places = len(q.partition(".")[2])
        assert abs(float(q) - rate) <= 0.5 * 10**-places + 1e-9, (
            f"{page}, {recipe} seed {seed}: {q}% vs {rate:.2f}%"
        )


def test_every_cited_recipe_is_checked():
    """docs/modules.md cites nine recipes with a three-seed report (the 24-step recipe's JSON holds one seed,
    so its sentence is not checked here), BENCHMARKS.md three."""
    pages = [p for p, _, _ in quoted_shifts()]
    assert pages.count("docs/modules.md") == 9 and pages.count("BENCHMARKS.md") == 3
