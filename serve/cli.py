"""`latentworks serve`: agent graphs behind an OpenAI-compatible endpoint.

latentworks serve --model builtin:arith-mini                      # http://127.0.0.1:8000/v1
latentworks serve --model smollm2-135m-instruct --graph sequential hierarchical --port 8080
latentworks serve --model Qwen/Qwen3-4B --backend vllm            # needs the [vllm] extra
"""

from __future__ import annotations

import argparse
import importlib.util
import logging

from latent.args import UsageError, add_config_arguments, config_from_args
from latent.entry import install_line
from serve.config import ServeConfig

logger = logging.getLogger(__name__)

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ServeConfig)


def run(args: argparse.Namespace) -> int:
    """Load the model, warm every pipeline up, then serve until Ctrl-C."""
    cfg = config_from_args(ServeConfig, args)
    if cfg.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise UsageError(f"`--backend vllm` needs the [vllm] extra. Install it: {install_line('vllm')}")
    import uvicorn

    from serve.app import create_app

    logger.info("loading %s and warming up %s ...", cfg.model, ", ".join(cfg.methods))
    app = create_app(cfg)
    ids = ", ".join(app.state.pipelines)
    logger.info("serving %s on http://%s:%d/v1 (Ctrl-C stops)", ids, cfg.host, cfg.port)
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning", timeout_graceful_shutdown=5)
    return 0
