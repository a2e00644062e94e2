"""`--realign`: the thoughts' realignment is a run setting, recorded in the run's identity."""

import pytest

from eval.runner import EvalConfig, evaluate


def _cfg(out, realign: str, resume: bool = False) -> EvalConfig:
    return EvalConfig(
        task="arith",
        limit=2,
        methods=["latent_mas"],
        out=str(out),
        realign=realign,
        resume=resume,
        progress=False,
    )


def test_identity_realignment_runs_and_a_resume_cannot_switch_it(tmp_path):
    from eval.run_state import load_results

    evaluate(_cfg(tmp_path / "ridge", "ridge"))
    evaluate(_cfg(tmp_path / "identity", "identity"))
    assert len(load_results(tmp_path / "identity")) == 2
    evaluate(_cfg(tmp_path / "soft", "soft"))
    assert len(load_results(tmp_path / "soft")) == 2
    with pytest.raises(ValueError, match="realign"):
        evaluate(_cfg(tmp_path / "ridge", "identity", resume=True))


def test_a_run_made_before_the_option_resumes_as_ridge():
    assert "realign" not in _cfg("x", "ridge").identity()  # old manifests lack the key and used ridge
    assert _cfg("x", "identity").identity()["realign"] == "identity"


def test_an_unknown_realignment_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="realign"):
        evaluate(_cfg(tmp_path / "bad", "procrustes"))
    assert not (tmp_path / "bad").exists()
