"""probes: alignment-faking probes and steering (sycophancy vs scheming) on the `latent` interface.

    from latent import load_model
    from probes import af_scenarios, capture_items, layer_scan
    m = load_model("builtin:arith-mini")
    acts = capture_items(m, af_scenarios(n=8), layers=[1, 2])
    rows = layer_scan(acts, (acts.column("cue") == "training").astype(int))

Experiments: `latentworks probe e1|e2|e3|organisms --model M --out DIR` (see probes/README.md).
Importing this package loads numpy and torch only; transformers, peft, trl, sklearn and matplotlib
load when a function needs them.
"""

from probes.activations import POSITIONS, ActivationSet, capture_items, render
from probes.behaviour import (
    LLMJudge,
    compliance_gap,
    compliance_rate,
    extract_answer,
    is_compliant,
    is_refusal,
    spoken_eval_awareness,
    strip_scratchpad,
    sycophancy_rate,
)
from probes.config import EXPERIMENTS, ProbeConfig
from probes.data import (
    ACCEPT,
    REJECT,
    Item,
    af_scenarios,
    eval_deploy_pairs,
    load_requests,
    neutral_texts,
    sycophancy_factual,
    sycophancy_opinion,
)
from probes.directions import (
    auroc,
    bootstrap_ci,
    cosine,
    diff_of_means,
    fit_direction,
    layer_scan,
    logistic_direction,
    pca_paired_direction,
    split_half_cosine,
    tpr_at_fpr,
)
from probes.elicit import elicit_items, elicited_p_eval
from probes.experiments import run_experiment
from probes.organisms import expected_comply, expected_sycophantic, organism_examples, train_lora
from probes.stats import cluster_bootstrap, decide, paired_effect
from probes.steering import SteerSpec, generate_texts, perplexity, random_like, reply_logprob, sweep

__all__ = [
    "ACCEPT",
    "EXPERIMENTS",
    "POSITIONS",
    "REJECT",
    "ActivationSet",
    "Item",
    "LLMJudge",
    "ProbeConfig",
    "SteerSpec",
    "af_scenarios",
    "auroc",
    "cluster_bootstrap",
    "decide",
    "elicit_items",
    "elicited_p_eval",
    "paired_effect",
    "bootstrap_ci",
    "capture_items",
    "compliance_gap",
    "compliance_rate",
    "cosine",
    "diff_of_means",
    "eval_deploy_pairs",
    "expected_comply",
    "expected_sycophantic",
    "extract_answer",
    "fit_direction",
    "generate_texts",
    "is_compliant",
    "is_refusal",
    "layer_scan",
    "load_requests",
    "logistic_direction",
    "neutral_texts",
    "organism_examples",
    "pca_paired_direction",
    "perplexity",
    "random_like",
    "render",
    "reply_logprob",
    "run_experiment",
    "spoken_eval_awareness",
    "split_half_cosine",
    "strip_scratchpad",
    "sweep",
    "sycophancy_factual",
    "sycophancy_opinion",
    "sycophancy_rate",
    "tpr_at_fpr",
    "train_lora",
]
