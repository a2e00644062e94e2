"""vLLM engine settings: checked in `RunConfig` before anything loads, and turned into `LLM(...)` arguments
by `engine_settings` (a GPU machine is simulated: these run without vLLM or a GPU)."""

import os

import pytest
import torch

from agents.config import RunConfig
from agents.vllm_backend import _visible, engine_settings


def test_bad_engine_settings_are_reported_together():
    """Out-of-range share, a malformed device, a device list that does not match the ranks, and engine
    settings without the vLLM backend are each named, in one error."""
    with pytest.raises(ValueError) as err:
        RunConfig(backend="vllm", vllm_gpu_memory_utilization=1.5, vllm_device="gpu1")
    assert "`vllm_gpu_memory_utilization` must be in (0, 1]" in str(err.value)
    assert "`vllm_device` must be cuda" in str(err.value)
    with pytest.raises(ValueError, match="lists 2 GPUs but `vllm_tensor_parallel_size` is 1"):
        RunConfig(backend="vllm", vllm_device="cuda:1,cuda:2")
    with pytest.raises(ValueError, match="pass --backend vllm or drop them"):
        RunConfig(vllm_device="cuda:1")
    RunConfig(backend="vllm", vllm_device="cuda:1,cuda:2", vllm_tensor_parallel_size=2)


def test_cpu_model_starts_vllm_eager_with_no_gpu_settings():
    """Beside a CPU model, vLLM runs on the CPU: eager (CUDA graphs do not apply), no memory share."""
    settings, visible = engine_settings(RunConfig(backend="vllm"), torch.device("cpu"))
    assert settings == {"tensor_parallel_size": 1, "enforce_eager": True} and visible is None


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine with two 80 GB GPUs, 40 GB of them free (the HF model holds the rest)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (40e9, 80e9))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_shared_gpu_gets_half_the_free_memory_and_cuda_graphs(two_gpus):
    """On the HF model's GPU vLLM claims half of what is free (not its default 90%), and keeps CUDA graphs
    unless asked to run eager."""
    cuda0 = torch.device("cuda:0")
    settings, visible = engine_settings(RunConfig(backend="vllm"), cuda0)
    assert settings == {"tensor_parallel_size": 1, "enforce_eager": False, "gpu_memory_utilization": 0.25}
    assert visible is None
    eager, _ = engine_settings(RunConfig(backend="vllm", vllm_enforce_eager=True), cuda0)
    assert eager["enforce_eager"] is True


def test_second_gpu_gets_its_own_share_and_a_device_mask(two_gpus, monkeypatch):
    """On a GPU of its own vLLM claims 90%, and its engine starts seeing only that GPU, in the physical
    numbering of an existing CUDA_VISIBLE_DEVICES."""
    cfg = RunConfig(backend="vllm", vllm_device="cuda:1")
    settings, visible = engine_settings(cfg, torch.device("cuda:0"))
    assert settings["gpu_memory_utilization"] == 0.9 and visible == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert engine_settings(cfg, torch.device("cuda:0"))[1] == "6"
    explicit = RunConfig(backend="vllm", vllm_device="cuda:1", vllm_gpu_memory_utilization=0.6)
    assert engine_settings(explicit, torch.device("cuda:0"))[0]["gpu_memory_utilization"] == 0.6


def test_more_ranks_than_gpus_is_refused_with_the_flags_to_change(two_gpus):
    """Two ranks from GPU 1 on a two-GPU machine need a GPU 2: refused, naming the flags."""
    cfg = RunConfig(backend="vllm", vllm_device="cuda:1", vllm_tensor_parallel_size=2)
    with pytest.raises(ValueError, match="--vllm-tensor-parallel-size"):
        engine_settings(cfg, torch.device("cuda:0"))


def test_device_mask_is_restored_after_the_engine_starts(monkeypatch):
    """The engine's CUDA_VISIBLE_DEVICES applies while it starts only; the process's own value returns."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with _visible("1"):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with _visible("1"):
        pass
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
