"""The sft/train/eval/plot commands: bad input is a one-line error (no traceback); plot via the CLI."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from patchgym.main import main

from .test_loop_units import _fake_run


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_eval_k_larger_than_n_is_refused() -> None:
    r = invoke("eval", "--model", "smollm2-135m-instruct", "--tasks", "a", "--n", "2", "--k", "1,3")
    assert r.exit_code == 2 and "k <= n" in r.output and "Traceback" not in r.output


def test_eval_needs_exactly_one_of_checkpoint_or_model(tmp_path: Path) -> None:
    r = invoke("eval", "--tasks", "a")
    assert r.exit_code == 2 and "exactly one of --checkpoint DIR or --model SPEC" in r.output
    r = invoke("eval", "--checkpoint", str(tmp_path), "--tasks", "a")
    assert r.exit_code == 1 and "not a checkpoint" in r.output


def test_train_errors_name_what_was_wrong(tmp_path: Path) -> None:
    r = invoke("train")
    assert r.exit_code == 2 and "--preset" in r.output
    r = invoke("train", "--preset", "nope")
    assert r.exit_code == 1 and "no preset named 'nope'" in r.output
    bad = tmp_path / "x.toml"
    bad.write_text('[tasks]\ntrain = ["a"]\n[batch]\nprompt = 3\n')
    r = invoke("train", "--config", str(bad))
    assert r.exit_code == 1 and "batch.prompt: unknown field" in r.output and str(bad) in r.output
    r = invoke("train", "--preset", "cpu-tiny", "--set", "batch.prompts=0")
    assert r.exit_code == 1 and "batch.prompts" in r.output
    r = invoke("train", "--resume", str(tmp_path))
    assert r.exit_code == 1 and "not a run directory" in r.output
    r = invoke("train", "--preset", "cpu-tiny", "--losses", "grpo,ppo", "--out", str(tmp_path / "abl"))
    assert r.exit_code == 1 and "unknown loss 'ppo'" in r.output
    assert "Traceback" not in r.output


def test_train_wandb_without_the_package_is_a_clear_error(tmp_path: Path) -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        r = invoke("train", "--preset", "cpu-tiny", "--wandb", "proj", "--out", str(tmp_path))
        assert r.exit_code == 1 and "pip install wandb" in r.output


def test_plot_command_overlays_runs(tmp_path: Path) -> None:
    _fake_run(tmp_path / "a", "sc_mis", ["g1"], 1.0)
    _fake_run(tmp_path / "b", "grpo", ["g1"], 0.3)
    r = invoke("plot", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "p"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "p" / "reward.png").stat().st_size > 2000
    r = invoke("plot", str(tmp_path / "p"))
    assert r.exit_code == 1 and "no metrics.jsonl rows" in r.output
