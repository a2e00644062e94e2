"""bench/gpu/check.sh --dry-run: the prepared GPU check runs end to end on a CPU with tiny shapes, so the
script a lent GPU machine runs is known to work before the machine is lent."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {"build_s", "params", "latent_b1", "latent_b4", "e2e_b4", "text_vs_latent"}


def _dry_run(out: Path, *flags: str) -> dict:
    env = {**os.environ, "OUT": str(out), "OMP_NUM_THREADS": "1", "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", "bench/gpu/check.sh", "--dry-run", *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "report.json").read_text())


def test_dry_run_writes_every_section_of_both_shapes(tmp_path):
    """Without the official code: both shapes, every section timed for our side, the official side named
    as not run (with why), and the markdown table written."""
    report = _dry_run(tmp_path, "--official", str(tmp_path / "none"))
    assert set(report["shapes"]) == {"qwen2.5-7b", "qwen3-8b"}
    for res in report["shapes"].values():
        assert SECTIONS <= set(res)
        assert res["latent_b4"]["ours_s"] > 0 and res["latent_b4"]["official_s"] is None
        assert (
            res["text_vs_latent"]["text_mas"]["tokens_decoded"]
            > res["text_vs_latent"]["latent_mas"]["tokens_decoded"]
        )
    assert report["official"].startswith("not run:") and "git clone" in report["official"]
    md = (tmp_path / "report.md").read_text()
    assert "| qwen3-8b | latent | 4 |" in md and "latent_mas vs text_mas" in md


@pytest.mark.skipif(
    not os.environ.get("LATENTMAS_OFFICIAL"),
    reason="needs a checkout of the official code: set LATENTMAS_OFFICIAL",
)
def test_dry_run_against_the_official_code(tmp_path):
    """With the official checkout: both sides timed, and the thoughts of unpadded rows equal in float32."""
    report = _dry_run(tmp_path, "--official", os.environ["LATENTMAS_OFFICIAL"])
    for res in report["shapes"].values():
        loop = res["latent_b4"]
        assert loop["official_s"] > 0 and loop["rows_checked"] >= 1 and loop["thought_max_rel_diff"] < 1e-5
        assert res["e2e_b4"]["tokens_official"] == res["e2e_b4"]["tokens_ours"]
