"""The shared demo contract: seed defaults per mode, bad flags rejected before anything is written, and a
results.json that round-trips with the table, seeds and wall time (NaN stored as null)."""

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from families.demo_cli import demo_config, finish_demo, load_results, run_demo


@dataclass
class ToyFlags:
    steps: int = field(default=3, metadata={"help": "training steps"})

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {self.steps}")


def _settings(config: type, argv: list[str]):
    seen = []
    assert run_demo(config, "Toy demo.", seen.append, argv) == 0
    return seen[0]


def test_seed_defaults_follow_the_mode_and_family_flags_still_work() -> None:
    toy = demo_config("toy", ToyFlags, seeds=5, quick_seeds=2, workers=2)
    assert _settings(toy, []).seeds == 5
    args = _settings(toy, ["--quick", "--steps", "7"])
    assert (args.seeds, args.steps, args.workers, args.out) == (2, 7, 2, "runs/toy")
    assert _settings(toy, ["--seeds", "9", "--quick"]).seeds == 9
    assert _settings(toy, ["--set", "steps=4"]).steps == 4
    assert not hasattr(_settings(demo_config("toy", seeds=3), []), "workers")


def test_help_lists_shared_and_family_flags(capsys) -> None:
    toy = demo_config("toy", ToyFlags, seeds=5, quick_seeds=2)
    with pytest.raises(SystemExit) as stop:
        run_demo(toy, "Toy demo.", print, ["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for text in ("latentworks family toy", "--steps", "training steps", "(default 5, quick 2)", "--config"):
        assert text in out


def test_bad_flags_are_rejected_before_anything_is_written(tmp_path, capsys) -> None:
    toy = demo_config("toy", ToyFlags, seeds=3, min_seeds=2, quick_seeds=2, workers=1)
    ran = []
    bad = ((["--seeds", "1"], "--seeds"), (["--workers", "0"], "--workers"), (["--steps", "0"], "--steps"))
    for argv, word in (*bad, (["--set", "steps=x"], "steps"), (["--nope"], "--nope")):
        assert run_demo(toy, "Toy demo.", ran.append, argv + ["--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and word in err
    (tmp_path / "file").write_text("x")
    assert run_demo(toy, "Toy demo.", ran.append, ["--out", str(tmp_path / "file")]) == 2
    assert "existing file" in capsys.readouterr().err
    assert ran == [] and not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="min_seeds"):
        demo_config("toy", seeds=1, min_seeds=2)


def test_finish_demo_round_trips_payload_table_and_wall_time(tmp_path, capsys) -> None:
    args = _settings(demo_config("toy", ToyFlags, seeds=3), ["--out", str(tmp_path / "run")])
    payload = {"rows": [{"mse": np.float32(0.5), "nan": math.nan}], "arr": np.arange(3), "t": (1, 2)}
    path = finish_demo(args, "| a |\n|---|", payload, wall_s=12.3)
    printed = capsys.readouterr().out
    assert "| a |" in printed and "wall time 12 s, 3 seed(s)" in printed
    back = load_results(tmp_path / "run")
    assert path == tmp_path / "run" / "results.json"
    assert back["rows"] == [{"mse": 0.5, "nan": None}] and back["arr"] == [0, 1, 2] and back["t"] == [1, 2]
    assert (back["seeds"], back["wall_time_s"], back["table"]) == (3, 12.3, "| a |\n|---|")
    assert back["args"] == {"steps": 3, "quick": False, "seeds": 3, "out": str(tmp_path / "run")}
    with pytest.raises(FileNotFoundError, match="--out"):
        load_results(tmp_path / "missing")
