"""The GRPO ablation table (`finetune.dlm.ablation`): each run's objective settings, its rates and its
probability of improvement over the first run, from finished run directories."""

import json

from finetune.dlm.ablation import ablation_markdown


def _run(
    path,
    returns,
    illegal,
    weights,
    beta,
    lr=2e-3,
    batch=16,
    steps=48,
    pool=200,
    temperature=1.0,
    group=8,
    **extra,
):
    path.mkdir()
    cfg = extra | {
        "loss_type": "grpo",
        "beta": beta,
        "learning_rate": lr,
        "temperature": temperature,
        "batch_size": batch,
        "max_steps": steps,
        "max_prompts": pool,
        "num_generations": group,
        "return_reward": "model",
        "reward_weights": weights,
    }
    (path / "config.json").write_text(json.dumps({"grpo": cfg}))

    def row(decoding, bad):
        st = {
            "returns": returns,
            "wins": [r >= 1 for r in returns],
            "unparseable": 0,
            "illegal": bad,
            "decisions": 100,
        }
        return {"method": "DLM-GRPO", "scenario": "s", "decoding": decoding, "runs": [[st]]}

    rows = [row("free", illegal), row("legal-constrained", 0)]
    (path / "results.json").write_text(json.dumps(rows))


def test_ablation_rows_name_the_objective_and_compare_with_the_first_run(tmp_path):
    _run(tmp_path / "ref", [0.0] * 8, 50, [0.5, 1.0, 1.0, 0.5], 0.04)
    _run(
        tmp_path / "ret",
        [1.0] * 8,
        10,
        [0, 0, 0, 1],
        0.04,
        lr=5e-4,
        batch=32,
        group=16,
        steps=96,
        pool=96,
        temperature=1.5,
        use_adaptive_entropy=True,
        entropy_target=0.2,
        entropy_coef_delta=0.005,
        entropy_coef=0.0,
    )
    lines = ablation_markdown([tmp_path / "ref", tmp_path / "ret"], "s", reps=200).splitlines()
    assert "reward weights" in lines[0]
    ref, ret = lines[2], lines[3]
    assert "| 0.5 / 1 / 1 / 0.5 |" in ref and "| 0 / 0 / 0 / 1 |" in ret
    # learning rate, temperature, entropy bonus, steps, prompts per step, group size, pool (`ref` predates the bonus)
    assert "| 0.002 | 1 | none | 48 | 2 | 8 | 200 |" in ref
    assert "| 0.0005 | 1.5 | adaptive, target 0.2, step 0.005 | 96 | 2 | 16 | 96 |" in ret
    assert "| 0.500 [" in ref and "| 0.100 [" in ret  # free-decoding invalid rates 50/100 and 10/100
    assert "| 0.000 [0.000, 0.000] |" in ref and "| 1.000 [1.000, 1.000] |" in ret  # return IQMs
    assert ref.endswith("| - |")
    assert "1.00 [1.00, 1.00]" in ret.split("|")[-2]  # every episode of `ret` beats every one of `ref`
