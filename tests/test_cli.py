"""The `latentworks` entry point: routing, help from the one builder, errors before writing, Ctrl-C."""

import dataclasses
import importlib.util
import json
import subprocess
import sys

import pytest

from latentworks import __version__
from latentworks.cli import COMMANDS, list_families, main


def test_help_lists_every_subcommand():
    """`latentworks --help` names each subcommand (in a fresh process, as a user runs it)."""
    out = subprocess.run(
        [sys.executable, "-m", "latentworks", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in [*COMMANDS, "family"]:
        assert name in out


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"latentworks {__version__}"


def _config_classes():
    from eval.config import EvalConfig
    from eval.demo import DemoConfig
    from finetune.dlm.config import DLMConfig
    from latent.smoke import SmokeConfig
    from probes.config import ProbeConfig

    return {
        "eval": EvalConfig,
        "demo": DemoConfig,
        "probe": ProbeConfig,
        "dlm": DLMConfig,
        "smoke": SmokeConfig,
    }


@pytest.mark.parametrize("command", ["eval", "demo", "probe", "dlm", "smoke"])
def test_every_config_field_is_a_flag(command, capsys):
    """Each dataclass-backed subcommand's --help shows one flag per (flattened) config field."""
    from agents.config import RunConfig

    with pytest.raises(SystemExit):
        main([command, *(["e1"] if command == "probe" else []), "--help"])
    help_text = capsys.readouterr().out
    cls = _config_classes()[command]
    fields = [f for f in dataclasses.fields(cls) if f.name not in ("experiment",)]
    if command == "eval":  # every RunConfig field but `method` (--methods) and `progress` (--progress)
        fields = [f for f in fields if f.name != "run"] + list(dataclasses.fields(RunConfig))
    for f in fields:
        if f.name == "method" or (command == "dlm" and f.name != "run_dir"):  # dlm sections: --set/--config
            continue
        assert "--" + f.name.replace("_", "-") in help_text, f.name
    assert "--backend {hf,vllm}" in help_text or command != "eval"


def test_models_lists_builtins_as_json(capsys):
    """`latentworks models --json` prints the shipped checkpoints with their card fields, then every
    pullable real checkpoint with its status."""
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    shipped = [r for r in rows if r["kind"] == "built-in"]
    assert shipped and all(r["name"].startswith("builtin:") and r["size_bytes"] > 0 for r in shipped)
    pullable = {r["name"]: r for r in rows if r["kind"] == "pullable"}
    assert {"smollm2-135m-instruct", "gemma-3-270m"} <= set(pullable)
    assert all(r["status"] in ("pulled", "not pulled") and r["licence"] for r in pullable.values())


def test_models_list_is_the_advertised_action(capsys):
    """`latentworks models --help` advertises `list`; `latentworks models list [--json]` prints the same
    rows as the bare `latentworks models`."""
    assert main(["models", "--json"]) == 0
    bare = json.loads(capsys.readouterr().out)
    assert main(["models", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == bare
    assert main(["models", "list"]) == 0
    assert "builtin:arith-mini" in capsys.readouterr().out


def test_family_command_lists_and_rejects(capsys):
    """`latentworks family --help` lists the families; an unknown one is an error naming the known."""
    assert main(["family", "--help"]) == 0
    listed = capsys.readouterr().out
    assert list_families() and all(name in listed for name in list_families())
    assert main(["family", "no-such-family"]) == 2
    assert "available" in capsys.readouterr().err


def test_eval_unknown_task_lists_known(capsys):
    """`latentworks eval --task nope` exits 2 and lists the known tasks."""
    assert main(["eval", "--task", "nope", "--limit", "1", "--out", "/tmp/lw-never-written"]) == 2
    err = capsys.readouterr().err
    assert "unknown task" in err and "gsm8k" in err


def test_max_new_tokens_zero_fails_before_writing(tmp_path, capsys):
    """`eval --max-new-tokens 0` is refused before the output directory exists; the fixed retry runs."""
    out = tmp_path / "run"
    assert main(["eval", "--max-new-tokens", "0", "--out", str(out)]) == 2
    assert "max_new_tokens" in capsys.readouterr().err and not out.exists()


def test_model_typo_leaves_nothing_behind(tmp_path, capsys):
    """A wrong model path fails before the manifest is written, so the corrected rerun is not refused."""
    out = tmp_path / "run"
    assert main(["eval", "--model", str(tmp_path / "no-such-model"), "--limit", "1", "--out", str(out)]) == 2
    assert "no model directory" in capsys.readouterr().err and not out.exists()


def test_backend_vllm_reaches_the_vllm_decoder(tmp_path, monkeypatch, capsys):
    """`--backend vllm` travels CLI -> EvalConfig.run -> agents.run -> VLLMDecoder; without vllm installed
    the error names the extra and nothing is written."""
    import agents.vllm_backend as vb

    out = tmp_path / "v"
    argv = ["eval", "--backend", "vllm", "--limit", "1", "--methods", "single", "--max-new-tokens", "2"]
    if importlib.util.find_spec("vllm") is None:
        assert main([*argv, "--out", str(out)]) == 2
        assert "latentworks[vllm]" in capsys.readouterr().err and not out.exists()
    seen = []

    class FakeDecoder:
        def __init__(self, model, cfg):
            seen.append(cfg)

        def __call__(self, memory, own, state):
            return ["7"] * state.batch_size, [1] * state.batch_size

    monkeypatch.setattr(vb, "require_vllm", lambda: None)
    monkeypatch.setattr(vb, "VLLMDecoder", FakeDecoder)
    assert main([*argv, "--out", str(out), "--no-progress", "--no-report"]) == 0
    assert seen and seen[0].backend == "vllm" and seen[0].max_new_tokens == 2
    assert json.loads((out / "results.jsonl").read_text().splitlines()[0])["prediction"] == "7"


def test_ctrl_c_names_the_results_and_the_resume_command(tmp_path, monkeypatch, capsys):
    """Ctrl-C during `eval` prints where the results are and the exact `--resume` command; exit 130."""
    import eval.runner

    def interrupted(cfg):
        raise KeyboardInterrupt

    monkeypatch.setattr(eval.runner, "evaluate", interrupted)
    assert main(["eval", "--limit", "2", "--latent-steps", "3", "--out", str(tmp_path / "r")]) == 130
    err = capsys.readouterr().err
    assert str(tmp_path / "r") in err
    assert f"latentworks eval --limit 2 --latent-steps 3 --out {tmp_path / 'r'} --resume" in err


def test_default_out_is_fresh_and_data_with_generated_task_is_an_error():
    from eval.config import EvalConfig

    assert EvalConfig().out.startswith("runs/eval-arith-")
    with pytest.raises(ValueError, match="does not apply to the generated task"):
        EvalConfig(task="arith", data="x.jsonl")


def test_typed_overrides_and_yaml(tmp_path):
    """`--config` YAML < flags < `--set`, typed by the dataclass annotations."""
    from eval.config import EvalConfig
    from latent.args import ArgumentParser, UsageError, add_config_arguments, config_from_args

    p = ArgumentParser(prog="t")
    add_config_arguments(p, EvalConfig, flatten=("run",), skip=("run.method", "run.progress"))
    (tmp_path / "c.yaml").write_text("limit: 3\nrun:\n  latent_steps: 5\n  seed: 9\n")
    args = p.parse_args(["--config", str(tmp_path / "c.yaml"), "--seed", "4", "--set", "run.top_p=0.5"])
    cfg = config_from_args(EvalConfig, args)
    assert (cfg.limit, cfg.run.latent_steps, cfg.run.seed, cfg.run.top_p) == (3, 5, 4, 0.5)
    with pytest.raises(UsageError, match="run.latent_steps"):
        config_from_args(EvalConfig, p.parse_args(["--set", "run.latent_steps=abc"]))


def test_verbosity_flags_set_the_project_loggers():
    import logging

    from latent.entry import configure_logging, split_logging

    argv, level = split_logging(["eval", "-q", "--limit", "2"])
    assert argv == ["eval", "--limit", "2"] and level == -1
    configure_logging(level)
    assert logging.getLogger("eval").level == logging.WARNING
    configure_logging(1)
    assert logging.getLogger("finetune").level == logging.DEBUG
    configure_logging(0)


def test_inspect_latents_reaches_the_results(tmp_path):
    """`--inspect-latents K` keeps the logit lens of every latent thought in results.jsonl."""
    out = tmp_path / "lens"
    argv = [
        "eval",
        "--inspect-latents",
        "2",
        "--limit",
        "1",
        "--methods",
        "latent_mas",
        "--latent-steps",
        "2",
    ]
    assert main([*argv, "--max-new-tokens", "2", "--out", str(out), "--no-progress", "--no-report"]) == 0
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    planner = rec["agents"][0]
    assert planner["latent_steps"] == 2 and [len(t) for t in planner["latent_tokens"]] == [2, 2]  # 2 x top-2
    assert json.loads((out / "summary.json").read_text())["methods"][0]["method"] == "latent_mas"


@pytest.mark.parametrize(
    "module, argv, message",
    [
        ("finetune.dlm.cli", ["nosuch"], "argument stage: invalid choice: 'nosuch'"),
        ("probes.cli", ["e9"], "argument experiment: invalid choice: 'e9'"),
    ],
)
def test_python_m_of_a_subcommand_reads_its_command_line(module, argv, message):
    """`python -m finetune.dlm.cli ...` and `python -m probes.cli ...` pass their arguments on."""
    run = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True)
    assert run.returncode == 2 and message in run.stderr, run.stderr


def test_demo_prompt_set_follows_the_model():
    """The demo reads the question once (compact) only on the built-in model, which was trained on both
    prompt sets; other models keep the paper's layout unless asked."""
    from eval.demo import DemoConfig

    assert DemoConfig().eval_config().run.prompts == "compact"
    assert DemoConfig(model="smollm2-135m-instruct").eval_config().run.prompts == "default"
    assert DemoConfig(model="smollm2-135m-instruct", prompts="compact").eval_config().run.prompts == "compact"


@pytest.mark.parametrize("native", [True, False])
def test_demo_dtype_follows_the_cpu(monkeypatch, native):
    """Unset, the demo runs bfloat16 only on a CPU that computes it in hardware (faster there for every
    method); elsewhere it keeps the loader's default. An explicit dtype always wins."""
    import torch

    import latent.loading
    from eval.demo import DemoConfig

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(latent.loading, "native_bf16_cpu", lambda: native)
    assert DemoConfig().eval_config().dtype == ("bfloat16" if native else None)
    assert DemoConfig(dtype="float32").eval_config().dtype == "float32"


@pytest.mark.parametrize(
    "avx512_bf16, amx, expected", [(True, False, True), (False, True, True), (False, False, False)]
)
def test_native_bf16_cpu_reads_the_cpu_flags(monkeypatch, avx512_bf16, amx, expected):
    import torch

    from latent.loading import native_bf16_cpu

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert native_bf16_cpu() is expected
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert native_bf16_cpu() is False  # a torch build that cannot tell keeps fp32


def test_a_python_m_entry_point_ends_like_the_router(capsys):
    """`latent.entry.run_script` (every `python -m` entry point) gives the router's error line, exit
    statuses, -v/-q handling and Ctrl-C hint, without importing the router."""
    from latent.entry import on_interrupt, run_script

    def add(parser):
        parser.add_argument("what")

    def run(args):
        if args.what == "stop":
            on_interrupt("partial results are in OUT; rerun to continue")
            raise KeyboardInterrupt
        raise ValueError(f"`what` is {args.what!r}. Pass stop")

    assert run_script("python -m demo", "a demo", add, run, ["bad", "-q"]) == 2
    assert capsys.readouterr().err == "error: `what` is 'bad'. Pass stop.\n"
    assert run_script("python -m demo", "a demo", add, run, ["-v", "stop"]) == 130
    assert "interrupted: partial results are in OUT; rerun to continue" in capsys.readouterr().err
    assert run_script("python -m demo", "a demo", add, run, []) == 2
    assert (
        "the following arguments are required: what. See `python -m demo --help`" in capsys.readouterr().err
    )


def test_the_demo_saves_every_table_it_prints(tmp_path, capsys):
    """Both tables the demo prints are in its run folder: the method table in report.md, the hand-off
    table in handoff.md; and no lock file is left behind."""
    from latentworks.cli import main

    out = tmp_path / "demo"
    argv = ["demo", "--limit", "2", "--max-new-tokens", "4", "--handoff-limit", "2", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    handoff = printed[printed.index("Hand-off (") :].split("\n\nhand-off table in")[0]
    assert handoff.strip() in (out / "handoff.md").read_text()
    method_table = printed[printed.index("| method") :].split("\n\n")[0]
    assert method_table.strip() in (out / "report.md").read_text()
    assert f"saved in {out / 'handoff.md'}" in printed
    assert not list(out.glob("*.lock"))
