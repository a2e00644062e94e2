"""The shared demo contract: seed defaults per mode, bad flags rejected before anything is written, and a
results.json that round-trips with the table, seeds and wall time (NaN stored as null)."""

import math

import numpy as np
import pytest

from families.demo_cli import DemoParser, finish_demo, load_results


def test_seed_defaults_follow_the_mode_and_family_flags_still_work() -> None:
    parser = DemoParser("toy", "Toy demo.", seeds=5, quick_seeds=2, workers=2)
    parser.add_argument("--steps", type=int, default=3)
    assert parser.parse_demo([]).seeds == 5
    args = parser.parse_demo(["--quick", "--steps", "7"])
    assert (args.seeds, args.steps, args.workers, args.out) == (2, 7, 2, "runs/toy")
    assert parser.parse_demo(["--seeds", "9", "--quick"]).seeds == 9
    assert not hasattr(DemoParser("toy", "Toy.", seeds=3).parse_demo([]), "workers")


def test_bad_flags_are_rejected_before_anything_is_written(tmp_path, capsys) -> None:
    parser = DemoParser("toy", "Toy demo.", seeds=3, min_seeds=2, quick_seeds=2, workers=1)
    for argv, word in ((["--seeds", "1"], "--seeds"), (["--workers", "0"], "--workers")):
        with pytest.raises(SystemExit):
            parser.parse_demo(argv + ["--out", str(tmp_path / "o")])
        assert word in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit):
        parser.parse_demo(["--out", str(tmp_path / "file")])
    assert "existing file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="min_seeds"):
        DemoParser("toy", "Toy.", seeds=1, min_seeds=2)


def test_finish_demo_round_trips_payload_table_and_wall_time(tmp_path, capsys) -> None:
    args = DemoParser("toy", "Toy demo.", seeds=3).parse_demo(["--out", str(tmp_path / "run")])
    payload = {"rows": [{"mse": np.float32(0.5), "nan": math.nan}], "arr": np.arange(3), "t": (1, 2)}
    path = finish_demo(args, "| a |\n|---|", payload, wall_s=12.3)
    printed = capsys.readouterr().out
    assert "| a |" in printed and "wall time 12 s, 3 seed(s)" in printed
    back = load_results(tmp_path / "run")
    assert path == tmp_path / "run" / "results.json"
    assert back["rows"] == [{"mse": 0.5, "nan": None}] and back["arr"] == [0, 1, 2] and back["t"] == [1, 2]
    assert (back["seeds"], back["wall_time_s"], back["table"]) == (3, 12.3, "| a |\n|---|")
    with pytest.raises(FileNotFoundError, match="--out"):
        load_results(tmp_path / "missing")
