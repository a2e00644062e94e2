"""probes: alignment-faking probes and steering (sycophancy vs scheming) on the `latent` interface.

    from latent import load_model
    from probes import af_scenarios, capture_items, layer_scan
    m = load_model("builtin:arith-mini")
    acts = capture_items(m, af_scenarios(n=8), layers=[1, 2])
    rows = layer_scan(acts, (acts.column("cue") == "training").astype(int))

Experiments: `latentworks probe e1|e2|e3|organisms --model M --out DIR` (see probes/README.md).
Names load on first use, so importing `probes.config` imports no torch; transformers, peft, trl,
sklearn and matplotlib load when a function needs them.
"""

from latent.exports import lazy_exports

# Each submodule's own __all__ is the list; see latent/exports.py.
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    __file__,
    [
        "activations",
        "behaviour",
        "config",
        "elicit",
        "stats",
        "data",
        "directions",
        "experiments",
        "organisms",
        "steering",
    ],
)
