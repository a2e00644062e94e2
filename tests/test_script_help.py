"""Every bench script and family entry point declares its flags through `latent.args`: `--help` lists each
config field with `--config` and `--set`, a bad flag is one `error:` line with exit status 2, and a bench
script's `--help` imports neither torch nor transformers."""

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _scripts(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if 'if __name__ == "__main__":' in p.read_text())


BENCH = _scripts("bench")
FAMILIES = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in _scripts("families")]

# Runs in a fresh interpreter (torch not yet imported): loads each bench file, asks for --help and for
# an unknown flag, and reports what it printed and which heavy modules it pulled in.
_PROBE = r"""
import contextlib, dataclasses, importlib.util, io, json, sys
HEAVY = ("torch", "transformers")
report = {}
for path in sys.argv[1:]:
    name = "bench_help_" + path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = mod.main(["--help"])
        except SystemExit as stop:
            code = stop.code
    with contextlib.redirect_stderr(err):
        bad = mod.main(["--no-such-flag"])
    fields = [
        f.name
        for c in vars(mod).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == name
        for f in dataclasses.fields(c)
        if not f.metadata.get("positional")
    ]
    report[path] = {"code": code, "help": out.getvalue(), "bad": bad, "err": err.getvalue(), "fields": fields,
                    "heavy": [m for m in HEAVY if m in sys.modules]}
print(json.dumps(report))
"""


def _check_help(text: str, fields: list[str]) -> list[str]:
    """What a builder-made --help lacks: the shared flags, and a flag per config field."""
    wanted = ["--config", "--set"] + ["--" + f.replace("_", "-") for f in fields]
    return [w for w in wanted if w not in text]


def test_every_bench_script_answers_help_through_the_builder_without_torch():
    assert len(BENCH) >= 18
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *map(str, BENCH)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    for path, r in report.items():
        assert r["code"] == 0 and r["fields"], path
        assert _check_help(r["help"], r["fields"]) == [], path
        assert r["bad"] == 2 and r["err"].startswith("error: ") and "--help" in r["err"], path
        assert r["heavy"] == [], f"{path} --help imported {r['heavy']}"


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_entry_point_answers_help_through_the_builder(name, capsys):
    mod = importlib.import_module(name)
    with pytest.raises(SystemExit) as stop:
        mod.main(["--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    fields = [
        f.name
        for c in vars(mod).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == name
        for f in dataclasses.fields(c)
    ]
    assert fields and _check_help(text, fields) == []
    assert mod.main(["--no-such-flag"]) == 2
    assert capsys.readouterr().err.startswith("error: unrecognized arguments: --no-such-flag")


def test_family_demos_found():
    demos = {n for n in FAMILIES if n.endswith(".demo")}
    assert len(demos) == len(list((ROOT / "families").glob("*/demo.py"))) >= 16
