"""neuralforecast baselines for ConFlux: DLinear, PatchTST (channel-independent) and iTransformer.

All are fitted on the training segment and asked for the same test windows as ConFlux; imports are lazy
because neuralforecast pulls in pytorch-lightning and ray.
"""

from __future__ import annotations

import numpy as np


def _frame(series: np.ndarray, prefix: str):  # noqa: ANN202 - returns a pandas DataFrame
    import pandas as pd

    t, n = series.shape
    return pd.DataFrame(
        {
            "unique_id": np.repeat([f"{prefix}{j:03d}" for j in range(n)], t),
            "ds": np.tile(np.arange(t), n),
            "y": series.T.reshape(-1).astype(np.float64),
        }
    )


def neuralforecast_forecasts(
    name: str,
    train: np.ndarray,
    test_inputs: np.ndarray,
    horizon: int,
    max_steps: int,
    seed: int = 0,
    learning_rate: float = 1e-3,
) -> np.ndarray:
    """Fit `name` in {'DLinear', 'PatchTST', 'iTransformer'} on train (T, N); forecast each test input
    window (W, N, L) -> (W, N, H). `test_inputs` may be a list of window arrays: one fit, every list
    entry forecast (validation and test windows share the fit)."""
    from neuralforecast import NeuralForecast
    from neuralforecast import models as nf_models

    first = test_inputs[0] if isinstance(test_inputs, list) else test_inputs
    n, context = first.shape[1], first.shape[2]
    common = dict(
        h=horizon,
        input_size=context,
        max_steps=max_steps,
        learning_rate=learning_rate,
        random_seed=seed,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        accelerator="cpu",
    )
    if name == "iTransformer":
        model = nf_models.iTransformer(n_series=n, hidden_size=64, n_heads=4, e_layers=2, d_ff=128, **common)
    elif name == "PatchTST":
        model = nf_models.PatchTST(
            patch_len=8, stride=8, hidden_size=64, n_heads=4, encoder_layers=2, **common
        )
    elif name == "DLinear":
        model = nf_models.DLinear(**common)
    else:
        raise ValueError(f"unknown baseline {name!r}; use 'DLinear', 'PatchTST' or 'iTransformer'.")
    nf = NeuralForecast(models=[model], freq=1)
    nf.fit(_frame(train, "v"))
    outs = []
    for inputs in test_inputs if isinstance(test_inputs, list) else [test_inputs]:
        out = np.zeros((len(inputs), n, horizon), dtype=np.float32)
        for w, window in enumerate(inputs):
            pred = nf.predict(df=_frame(window.T, "v"))
            for j in range(n):
                out[w, j] = pred.loc[pred["unique_id"] == f"v{j:03d}", name].to_numpy()
        outs.append(out)
    return outs if isinstance(test_inputs, list) else outs[0]
