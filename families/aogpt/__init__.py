"""AO-GPT: decoder-only masked diffusion as any-order autoregression (arXiv 2506.19935).

Import is cheap: x-transformers loads only when a baseline is built.
"""

from .config import AOGPTConfig
from .model import AOGPT, bits_per_token

__all__ = ["AOGPT", "AOGPTConfig", "bits_per_token"]
