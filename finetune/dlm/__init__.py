"""DLM: Decision Language Models for offline multi-agent decision making (arXiv 2604.23557).

Offline scripted trajectories -> versioned dialogues -> TRL SFT -> TRL GRPO -> online evaluation with
legal-action constrained decoding, plus BC / independent-CQL / prompted-LM baselines. Importing this
package is cheap: torch, transformers, TRL and the environments load only in the stage that needs them.
See README.md and `latentworks dlm --help`.
"""

from finetune.dlm.config import DLMConfig, load_config

__all__ = ["DLMConfig", "load_config"]
