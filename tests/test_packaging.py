"""The wheel ships what `load_model("builtin:...")`, the agents and the recipes read at run time."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_builtin_models_prompts_and_configs(tmp_path):
    """Build the wheel and list it: checkpoints, card, prompts and YAML presets are all inside."""
    pytest.importorskip("setuptools", reason="building the wheel without isolation needs setuptools")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)  # fmt: skip
    (wheel,) = tmp_path.glob("latentworks-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for model_dir in (ROOT / "latent" / "builtin_models").iterdir():
        for f in model_dir.iterdir():
            assert f"latent/builtin_models/{model_dir.name}/{f.name}" in names
    assert "agents/prompts/default.yaml" in names
    assert "finetune/recipes/arith-mini.yaml" in names
    assert any(n.startswith("finetune/dlm/configs/") for n in names)
