"""Report statistics: the Wilson interval matches statsmodels; the time-ratio spread is per batch."""

import pytest

from eval.report import time_ratio_spread, wilson


@pytest.mark.parametrize("k, n", [(0, 5), (3, 10), (29, 32), (32, 32), (1, 1)])
def test_wilson_matches_statsmodels(k, n):
    proportion = pytest.importorskip("statsmodels.stats.proportion", reason="statsmodels is in [families]")
    lo, hi = proportion.proportion_confint(k, n, alpha=0.05, method="wilson")
    ours = wilson(k, n)
    assert ours == pytest.approx((lo, hi), abs=2e-3)  # statsmodels uses z = 1.95996, we use 1.96


def test_time_ratio_spread_pairs_items_of_the_same_batch():
    recs = [
        {"item_id": i, "method": m, "wall_s": t}
        for i, (a, b) in enumerate([(2.0, 1.0), (2.0, 1.0), (6.0, 2.0), (6.0, 2.0)])
        for m, t in (("text_mas", a), ("latent_mas", b))
    ]
    assert time_ratio_spread(recs) == {"median": 2.5, "min": 2.0, "max": 3.0, "batches": 2}
    assert time_ratio_spread([r for r in recs if r["method"] == "text_mas"]) is None


@pytest.mark.parametrize("n", [6, 21, 31, 38])
def test_wilson_at_100_percent_ends_at_exactly_one(n):
    """At k = n rounding gave ci_high 0.9999999999999999 < 1.0 = accuracy: a negative error bar."""
    lo, hi = wilson(n, n)
    assert hi == 1.0 and lo <= 1.0


@pytest.mark.parametrize("n", [11, 22, 27])
def test_wilson_at_0_percent_starts_at_exactly_zero(n):
    lo, hi = wilson(0, n)
    assert lo == 0.0 and hi >= 0.0


def test_wilson_interval_always_holds_the_estimate():
    """Every k of every n up to 300: ci_low <= k/n <= ci_high, inside [0, 1]."""
    for n in range(1, 301):
        for k in range(n + 1):
            lo, hi = wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)


def _run_dir(tmp_path):
    """A small finished run of the built-in model (6 arith items, one method)."""
    from latentworks.cli import main

    out = tmp_path / "run"
    argv = ["eval", "--limit", "6", "--methods", "single", "--max-new-tokens", "64", "--threads", "1"]
    rc = main([*argv, "--no-progress", "--out", str(out)])
    return rc, out


def test_eval_where_a_method_scores_100_percent_of_6_exits_0_and_writes_the_report(tmp_path, capsys):
    """The built-in model answers all 6 first arith items: the run used to end in exit 2 and no report.md
    ('yerr' must not contain negative values)."""
    import json

    rc, out = _run_dir(tmp_path)
    err = capsys.readouterr().err
    assert rc == 0, err
    row = json.loads((out / "summary.json").read_text())["methods"][0]
    assert (row["n"], row["accuracy"], row["ci_high"]) == (6, 1.0, 1.0)  # the case that failed
    assert "100.0%" in (out / "report.md").read_text()
    assert (out / "report.png").is_file()


def test_a_plot_error_never_loses_report_md(tmp_path, capsys, monkeypatch):
    """Whatever the plot raises, `latentworks report` exits 0 with the table in report.md and says why
    there is no report.png."""
    import eval.report as report
    from latentworks.cli import main

    rc, out = _run_dir(tmp_path)
    assert rc == 0
    (out / "report.md").unlink()
    (out / "report.png").unlink()

    def broken_plot(rows, path):
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(report, "plot", broken_plot)
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "| single" in text and "the plot failed" in text and not (out / "report.png").exists()
    assert "the plot failed" in capsys.readouterr().err


@pytest.fixture(scope="module")
def two_method_run(tiny_eval, tmp_path_factory):
    from eval.runner import evaluate

    out = tmp_path_factory.mktemp("two") / "r"
    return evaluate(tiny_eval(out, limit=4, methods="single,latent_mas", max_new_tokens=2))


def _copy(run, dest):
    import shutil

    shutil.copytree(run, dest)
    return dest


def test_the_header_names_the_dtype_the_run_used(two_method_run, tmp_path, capsys):
    """No --dtype asked: the header says what the model computed in (float32 on CPU), not "default"."""
    from eval.report import print_report

    out = _copy(two_method_run, tmp_path / "r")
    print_report(out)
    head = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("model "))
    assert head.endswith("| dtype float32")


@pytest.mark.parametrize("keep", [0, 2])
def test_a_method_the_run_did_not_finish_is_named(two_method_run, tmp_path, capsys, keep):
    """A run that stopped midway (latent_mas with 0 or 2 of 4 items): the report says so, on stderr and
    in report.md, instead of leaving the method out silently."""
    import json

    from eval.report import print_report

    out = _copy(two_method_run, tmp_path / "r")
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    latent = [ln for ln in lines if json.loads(ln)["method"] == "latent_mas"]
    results.write_text("".join(ln for ln in lines if ln not in latent[keep:]))
    print_report(out)
    err = capsys.readouterr().err
    said = "has no records" if keep == 0 else "has 2 of 4 items"
    assert f"method latent_mas {said}" in err and "--resume" in err
    assert f"method latent_mas {said}" in (out / "report.md").read_text()
    assert "method single" not in err
