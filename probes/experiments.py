"""The experiment dispatcher: `run_experiment(cfg)` loads the model and runs one study, which writes
`<name>.json` + `<name>.md` + PNG plots into `out/<name>/`.

* E1 (`probes.e1`): does evaluation awareness persist when the prompt says "you are deployed"?
* E2 (`probes.e2`): can probes and steering tell sycophancy from scheming?
* E3 (`probes.e3`): does a sycophancy LoRA raise sensitivity to evaluation cues?
* The organism study (`probes.organism_study`): do probes and steering recover a LoRA organism's driver?

Paper: Baek et al., "Sycophancy Towards Researchers Drives Performative Misalignment" (ICML 2026);
protocols from Greenblatt et al. 2024, Nguyen et al. 2025, Rimsky et al. (CAA).
"""

from __future__ import annotations

import torch

from probes.config import ProbeConfig
from probes.e1 import run_e1
from probes.e2 import run_e2

__all__ = ["run_e1", "run_e2", "run_experiment"]


def run_experiment(cfg: ProbeConfig) -> dict:
    """Load `cfg.model` and run `cfg.experiment`."""
    from latent import load_model

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    m = load_model(cfg.model, device=cfg.device)
    # the two LoRA studies import on demand: peft and trl load only for them
    from probes.e3 import run_e3
    from probes.organism_study import run_organisms

    fn = {"e1": run_e1, "e2": run_e2, "e3": run_e3, "organisms": run_organisms}[cfg.experiment]
    return fn(m, cfg)
