"""bench/studies/qwen_table.py on a small real run of the built-in model: the paired tests agree with the records,
every paper claim gets a verdict line, and archived runs come back byte for byte and resume."""

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "studies"


def _load():
    spec = importlib.util.spec_from_file_location("qwen_table", BENCH / "qwen_table.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["qwen_table"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_report_archive_and_restore(tmp_path, monkeypatch):
    from eval.runner import EvalConfig, evaluate

    qt = _load()
    cell = qt.Cell("builtin:arith-mini", "arith")
    monkeypatch.setattr(qt, "CELLS", {"toy-arith-seq": cell})
    monkeypatch.setitem(qt.LIMIT, "arith", 12)
    runs = tmp_path / "runs"
    evaluate(EvalConfig(task="arith", limit=12, out=str(runs / "toy-arith-seq"), progress=False))
    assert qt.report(runs, tmp_path / "report") == 0
    payload = json.loads((tmp_path / "report" / "report.json").read_text())
    row = payload["cells"][0]
    recs = {(r["item_id"], r["method"]): r["correct"] for r in row["records"]}
    pc = row["latent_mas_vs_text_mas"]
    items = {i for i, _ in recs}
    assert pc["n"] == len(items) == 12
    assert pc["only_latent_mas"] == sum(recs[i, "latent_mas"] and not recs[i, "text_mas"] for i in items)
    text = (tmp_path / "report" / "report.md").read_text()
    for claim in ("accuracy vs text_mas", "accuracy vs single", "output tokens", "speed"):
        assert f"- {claim}" in text
    assert (tmp_path / "report" / "accuracy_vs_time.png").stat().st_size > 1000

    before = {f.name: f.read_bytes() for f in (runs / "toy-arith-seq").glob("*.json*")}
    assert qt.archive(runs, tmp_path / "archive") == 0
    fresh = tmp_path / "fresh"
    assert qt.restore(tmp_path / "archive", fresh) == 0
    after = {f.name: f.read_bytes() for f in (fresh / "toy-arith-seq").iterdir()}
    assert after == {k: v for k, v in before.items() if k in after} and "manifest.json" in after
    assert any(k.startswith("results") for k in after)
    evaluate(
        EvalConfig(task="arith", limit=12, out=str(fresh / "toy-arith-seq"), resume=True, progress=False)
    )
    from eval.run_state import load_results

    assert len(load_results(fresh / "toy-arith-seq")) == 36  # resumed: nothing run twice, nothing lost
    (fresh / "toy-arith-seq" / "manifest.json").write_text("kept")
    qt.restore(tmp_path / "archive", fresh)  # a run already there is never overwritten
    assert (fresh / "toy-arith-seq" / "manifest.json").read_text() == "kept"


def test_control_rows_pair_with_the_main_cell_on_shared_items(tmp_path, monkeypatch):
    from agents.config import RunConfig
    from eval.runner import EvalConfig, evaluate

    qt = _load()
    main = qt.Cell("builtin:arith-mini", "arith")
    control = qt.Cell(
        "builtin:arith-mini", "arith", methods="latent_mas", control_of="toy", flags=(("thoughts", "random"),)
    )
    monkeypatch.setattr(qt, "CELLS", {"toy": main, "toy-thoughts-random": control})
    monkeypatch.setitem(qt.LIMIT, "arith", 12)
    runs = tmp_path / "runs"
    evaluate(EvalConfig(task="arith", limit=12, out=str(runs / "toy"), progress=False))
    control_run = RunConfig(thoughts="random")
    out = str(runs / "toy-thoughts-random")
    evaluate(
        EvalConfig(task="arith", limit=8, methods=["latent_mas"], run=control_run, out=out, progress=False)
    )
    assert qt.report(runs, tmp_path / "report") == 0
    payload = json.loads((tmp_path / "report" / "report.json").read_text())
    rows = {r["cell"]: r for r in payload["cells"]}
    ctrl_items = {r["item_id"]: r["correct"] for r in rows["toy-thoughts-random"]["records"]}
    main_items = {r["item_id"]: r["correct"] for r in rows["toy"]["records"] if r["method"] == "latent_mas"}
    assert len(ctrl_items) == 8
    k = sum(main_items[i] for i in ctrl_items)  # the main cell's latent_mas, on the control's 8 items only
    line = next(
        x
        for x in (tmp_path / "report" / "report.md").read_text().splitlines()
        if x.startswith("| toy-thoughts")
    )
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "8" and cells[3].startswith(f"{k}/8 = ")
    only_main = sum(main_items[i] and not ctrl_items[i] for i in ctrl_items)
    only_ctrl = sum(ctrl_items[i] and not main_items[i] for i in ctrl_items)
    assert cells[7].startswith(f"{only_main} / {only_ctrl}, p = ")


def test_control_cells_count_the_main_cell_on_the_controls_items_only():
    qt = _load()

    def recs(method, outcomes):
        return [{"item_id": i, "method": method, "correct": c} for i, c in outcomes.items()]

    main = {
        "records": recs("latent_mas", {"a": 1, "b": 1, "c": 1, "d": 0, "e": 1})
        + recs("single", {"a": 1, "b": 1, "d": 0})
    }
    control = {"records": recs("latent_mas", {"a": 0, "b": 0, "c": 1, "d": 1})}  # "e" not run yet
    m = {
        "n": 4,
        "accuracy": 0.5,
        "ci_low": 0.15,
        "ci_high": 0.85,
        "output_tokens": 9,
        "short_final_answers": 1,
    }
    cells = [c.strip() for c in qt._control_cells(m, control, main).strip("|").split("|")]
    assert cells[2].startswith("3/4 = 75.0%")  # a, b, c right in the main cell; e is not shared
    assert cells[6].startswith("2 / 1, p = ")  # only main: a, b; only the control: d
    assert cells[7].startswith(
        "2 / 1, p = "
    )  # against the main cell's single: only single a, b; only control d


def test_control_grid_puts_each_control_in_its_column(monkeypatch):
    """The quoted grid: one column per control kind in CONTROL_KINDS order, '-' where one has not run, and
    the pairings of the control that did run in its own column."""
    qt = _load()
    main = qt.Cell("builtin:arith-mini", "arith")
    ctrl = qt.Cell("builtin:arith-mini", "arith", methods="latent_mas", control_of="toy")
    monkeypatch.setattr(qt, "CELLS", {"toy": main, "toy-steps-5": ctrl})

    def recs(method, outcomes):
        return [{"item_id": i, "method": method, "correct": c} for i, c in outcomes.items()]

    rows = [
        {"cell": "toy", "records": recs("latent_mas", {"a": 1, "b": 0}) + recs("single", {"a": 1, "b": 1})},
        {
            "cell": "toy-steps-5",
            "records": recs("latent_mas", {"a": 0, "b": 0}),
            "methods": [{"n": 2, "accuracy": 0.0, "ci_low": 0.0, "ci_high": 0.66}],
        },
    ]
    lines = qt._control_grid(rows)
    assert len(lines) == 5  # header, rule, three rows for the one main cell
    col = qt.CONTROL_KINDS.index("steps-5") + 2
    acc, vs_main, vs_single = ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    assert acc[col] == "0.0% [0.0%, 66.0%] (n 2)"
    assert vs_main[col].startswith("1 / 0, p ")  # only the main latent_mas: a
    assert vs_single[col].startswith("2 / 0, p ")  # only single: a, b
    assert all(acc[i] == "-" for i in range(2, len(acc)) if i != col)


def test_exact_mcnemar_equals_scipys_two_sided_binomial_test():
    from scipy.stats import binomtest

    from eval.report import mcnemar_exact

    for b, c in [(15, 0), (3, 5), (10, 4), (7, 7), (0, 1), (40, 22)]:
        assert abs(mcnemar_exact(b, c) - binomtest(b, b + c, 0.5).pvalue) < 1e-12
    assert mcnemar_exact(0, 0) == 1.0


def test_pages_quote_the_committed_report():
    """BENCHMARKS.md and README quote the committed report between markers: one source for these numbers."""
    qt = _load()
    root = BENCH.parents[1]
    payload = json.loads((root / "bench/results/qwen_table/report.json").read_text())
    bench_md = (root / "BENCHMARKS.md").read_text()
    assert f"{qt.TABLE_MARKS[0]}\n{qt.quoted_table(payload)}\n{qt.TABLE_MARKS[1]}" in bench_md
    readme = (root / "README.md").read_text()
    assert f"{qt.HEADLINE_MARKS[0]}\n{qt.headline(payload)}\n{qt.HEADLINE_MARKS[1]}" in readme


def test_sync_quotes_rewrites_only_between_the_markers(tmp_path):
    qt = _load()
    payload = json.loads((BENCH.parents[1] / "bench/results/qwen_table/report.json").read_text())
    page = tmp_path / "page.md"
    page.write_text(f"before\n{qt.TABLE_MARKS[0]}\nold table\n{qt.TABLE_MARKS[1]}\nafter\n")
    assert qt.sync_quotes(payload, page)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith(f"{qt.TABLE_MARKS[1]}\nafter\n")
    assert "old table" not in text and "\n\nSource:" in text
    assert "| dev-" not in text  # the dev cells stay in the report
    line = next(x for x in text.splitlines() if x.startswith("| q05-gsm-seq | 150 | "))  # one line per cell
    cells = [c.strip() for c in line.strip("|").split("|")]
    row = next(r for r in payload["cells"] if r["cell"] == "q05-gsm-seq")
    accs = {m["method"]: f"{m['accuracy']:.1%}" for m in row["methods"]}
    assert [c.split()[0] for c in cells[2:5]] == [accs["single"], accs["text_mas"], accs["latent_mas"]]
    assert all(c.split(":")[0] in ("holds", "does not hold", "not measurable at this n") for c in cells[5:])
    assert not qt.sync_quotes(payload, page)  # already in agreement: untouched


def test_queue_runs_a_cell_in_two_ranks_then_skips_it(tmp_path, monkeypatch, capsys):
    qt = _load()
    monkeypatch.setattr(
        qt, "CELLS", {"toy": qt.Cell("builtin:arith-mini", "arith", methods="single,latent_mas")}
    )
    monkeypatch.setitem(qt.LIMIT, "arith", 6)
    runs = tmp_path / "runs"
    runs.mkdir()
    assert qt.missing("toy", qt.CELLS["toy"], runs) == 12
    assert qt.queue(["toy"], 2, runs) == 0
    assert sorted(p.name for p in (runs / "toy").glob("results*")) == [
        "results.rank0.jsonl",
        "results.rank1.jsonl",
    ]
    assert qt.missing("toy", qt.CELLS["toy"], runs) == 0
    capsys.readouterr()
    assert qt.queue(["toy"], 2, runs) == 0
    assert capsys.readouterr().out.strip() == "toy: complete"
