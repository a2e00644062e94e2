"""`latentworks serve` from the command line: flags from `ServeConfig`, plain errors, a real server process."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from latentworks.cli import main
from tests.serve.conftest import MODEL, QUESTIONS, alone

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_the_config_flags(capsys):
    """Every ServeConfig field is a flag."""
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--model",
        "--graph",
        "--backend",
        "--max-batch",
        "--batch-wait-ms",
        "--max-queue",
        "--port",
    ):
        assert flag in out


def test_bad_settings_are_one_error_line(capsys):
    """A bad setting ends as `error: ...` with status 2, before any model loads."""
    assert main(["serve", "--model", MODEL, "--max-batch", "0", "--max-queue", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "`max_batch`" in err and "`max_queue`" in err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_backend_without_vllm_names_the_extra(capsys):
    """--backend vllm fails at once naming both install lines of the [vllm] extra."""
    assert main(["serve", "--model", MODEL, "--backend", "vllm"]) == 2
    err = capsys.readouterr().err
    assert 'pip install "latentworks[vllm]"' in err and 'pip install -e ".[vllm]"' in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_command_answers_the_openai_client(model):
    """`python -m latentworks serve` in its own process answers like `agents.run`, and stops on SIGINT."""
    openai = pytest.importorskip("openai")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "latentworks", "serve", "--model", MODEL, "--methods", "latent_mas"]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--threads", "1"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.2)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="latent_mas:sequential", messages=[{"role": "user", "content": QUESTIONS[5]}]
        )
        assert reply.choices[0].message.content == alone(model, "latent_mas:sequential", QUESTIONS[5]).text
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, 130), err[-2000:]
    assert "serving latent_mas:sequential on http://127.0.0.1" in err
