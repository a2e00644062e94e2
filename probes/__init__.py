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

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "activations": ["ActivationSet", "POSITIONS", "capture_items", "render"],
        "behaviour": [
            "LLMJudge",
            "compliance_gap",
            "compliance_rate",
            "extract_answer",
            "is_compliant",
            "is_refusal",
            "spoken_eval_awareness",
            "strip_scratchpad",
            "sycophancy_rate",
        ],
        "config": ["EXPERIMENTS", "ProbeConfig"],
        "elicit": ["elicit_items", "elicited_p_eval"],
        "stats": ["cluster_bootstrap", "decide", "paired_effect"],
        "data": [
            "ACCEPT",
            "Item",
            "REJECT",
            "af_scenarios",
            "eval_deploy_pairs",
            "load_requests",
            "neutral_texts",
            "sycophancy_factual",
            "sycophancy_opinion",
        ],
        "directions": [
            "auroc",
            "bootstrap_ci",
            "cosine",
            "diff_of_means",
            "fit_direction",
            "layer_scan",
            "logistic_direction",
            "pca_paired_direction",
            "split_half_cosine",
            "tpr_at_fpr",
        ],
        "experiments": ["run_experiment"],
        "organisms": ["expected_comply", "expected_sycophantic", "organism_examples", "train_lora"],
        "steering": ["SteerSpec", "generate_texts", "perplexity", "random_like", "reply_logprob", "sweep"],
    },
)
