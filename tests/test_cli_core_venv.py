"""Help in an install without torch, transformers or any extra: every `--help` exits 0 in under 2 s
(so none imports torch: it is not there), and a subcommand whose extra is missing names its install line.

The venv is built once per session (pyyaml, omegaconf, lazy-loader); the checkout is on PYTHONPATH.
"""

import os
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from latentworks.cli import list_families  # noqa: E402

pytestmark = pytest.mark.real  # builds a venv and pip-installs into it: the real tier

HELP_BUDGET_S = 2.0
LIGHT_CORE = ("pyyaml", "omegaconf", "lazy-loader")  # the core dependencies that are not torch/transformers


@pytest.fixture(scope="session")
def core_python(tmp_path_factory) -> str:
    """Python of a fresh venv holding only the light core dependencies."""
    where = tmp_path_factory.mktemp("core-venv")
    venv.create(where, with_pip=True)
    python = str(where / "bin" / "python")
    pip = subprocess.run([python, "-m", "pip", "install", "-q", *LIGHT_CORE], capture_output=True, text=True)
    if pip.returncode != 0:
        pytest.skip(f"could not install {LIGHT_CORE} into a fresh venv: {pip.stderr[-300:]}")
    return python


def _run(python: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [python, "-m", "latentworks", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    return proc, time.perf_counter() - t0


HELP = [
    ["--help"],
    ["--version"],
    ["eval", "--help"],
    ["demo", "--help"],
    ["report", "--help"],
    ["smoke", "--help"],
    ["probe", "--help"],
    ["dlm", "--help"],
    ["finetune", "--help"],
    ["family", "--help"],
    *[["family", name, "--help"] for name in list_families()],
    ["models", "--help"],
    ["models"],
    ["models", "path", "--help"],
    ["serve", "--help"],
]


def test_core_venv_has_no_torch(core_python):
    proc = subprocess.run([core_python, "-c", "import torch"], capture_output=True, text=True)
    assert proc.returncode != 0  # otherwise the help checks below would prove nothing


@pytest.mark.parametrize("argv", HELP, ids=lambda a: " ".join(a))
def test_help_is_fast_and_imports_nothing_heavy(core_python, argv):
    """Exit 0 without torch installed, under 2 s (the first call also warms the file cache)."""
    _run(core_python, *argv)
    proc, seconds = _run(core_python, *argv)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr
    assert seconds < HELP_BUDGET_S, f"{' '.join(argv)} took {seconds:.2f} s"


@pytest.mark.parametrize(
    "argv, extra",
    [
        (["probe", "--help"], "probes"),
        (["dlm", "--help"], "dlm"),
        (["family", "--help"], "families"),
        (["family", "gwf", "--help"], "families"),
        (["probe", "e1", "--quick"], "probes"),
        (["dlm", "data"], "dlm"),
        (["finetune", "--help"], "train"),
        (["finetune", "builtin", "--tiny"], "train"),
        (["family", "gwf", "--quick"], "families"),
        (["serve", "--help"], "serve"),
        (["serve", "--model", "builtin:arith-mini"], "serve"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_missing_extra_names_the_install_line(core_python, argv, extra):
    proc, _ = _run(core_python, *argv)
    wants_help = "--help" in argv
    assert proc.returncode == (0 if wants_help else 2), proc.stderr[-1500:]
    text = proc.stdout + proc.stderr
    assert f'pip install "latentworks[{extra}]"' in text and "Traceback" not in text
    if not wants_help:
        assert proc.stderr.startswith("error: ")


def test_core_command_without_torch_says_what_to_install(core_python):
    proc, _ = _run(core_python, "eval", "--limit", "1", "--out", "never-written")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and "torch" in proc.stderr and "pip install" in proc.stderr
    assert not (ROOT / "never-written").exists()
