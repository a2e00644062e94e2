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

import importlib

_HOMES = {
    "ACCEPT": "probes.data",
    "ActivationSet": "probes.activations",
    "EXPERIMENTS": "probes.config",
    "cluster_bootstrap": "probes.stats",
    "decide": "probes.stats",
    "paired_effect": "probes.stats",
    "elicit_items": "probes.elicit",
    "elicited_p_eval": "probes.elicit",
    "Item": "probes.data",
    "LLMJudge": "probes.behaviour",
    "POSITIONS": "probes.activations",
    "ProbeConfig": "probes.config",
    "REJECT": "probes.data",
    "SteerSpec": "probes.steering",
    "af_scenarios": "probes.data",
    "auroc": "probes.directions",
    "bootstrap_ci": "probes.directions",
    "capture_items": "probes.activations",
    "compliance_gap": "probes.behaviour",
    "compliance_rate": "probes.behaviour",
    "cosine": "probes.directions",
    "diff_of_means": "probes.directions",
    "eval_deploy_pairs": "probes.data",
    "expected_comply": "probes.organisms",
    "expected_sycophantic": "probes.organisms",
    "extract_answer": "probes.behaviour",
    "fit_direction": "probes.directions",
    "generate_texts": "probes.steering",
    "is_compliant": "probes.behaviour",
    "is_refusal": "probes.behaviour",
    "layer_scan": "probes.directions",
    "load_requests": "probes.data",
    "logistic_direction": "probes.directions",
    "neutral_texts": "probes.data",
    "organism_examples": "probes.organisms",
    "pca_paired_direction": "probes.directions",
    "perplexity": "probes.steering",
    "random_like": "probes.steering",
    "render": "probes.activations",
    "reply_logprob": "probes.steering",
    "run_experiment": "probes.experiments",
    "split_half_cosine": "probes.directions",
    "spoken_eval_awareness": "probes.behaviour",
    "strip_scratchpad": "probes.behaviour",
    "sweep": "probes.steering",
    "sycophancy_factual": "probes.data",
    "sycophancy_opinion": "probes.data",
    "sycophancy_rate": "probes.behaviour",
    "tpr_at_fpr": "probes.directions",
    "train_lora": "probes.organisms",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'probes' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
