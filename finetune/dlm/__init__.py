"""DLM: Decision Language Models for offline multi-agent decision making (arXiv 2604.23557).

Offline scripted trajectories -> versioned dialogues -> TRL SFT -> offline TRL GRPO (rewards from the
dataset alone) -> online evaluation with legal-action constrained decoding, against BC, independent CQL,
QMIX + CQL, CFCQL and the prompted (un-finetuned) LM, with rliable statistics over training seeds. Importing this
package is cheap: torch, transformers, TRL and the environments load only in the stage that needs them.
See README.md and `latentworks dlm --help`.
"""

from finetune.dlm.config import DLMConfig, load_config

__all__ = ["DLMConfig", "load_config"]
