"""The run configuration: presets and the reference configs load; bad input names file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgym.rl.fleet.load import load_fleet
from patchgym.rl.loop.config import ConfigError, RunConfig, apply_overrides, load_config, preset_names

ROOT = Path(__file__).resolve().parents[1]


def test_cpu_tiny_preset_loads_with_its_shape() -> None:
    assert "cpu-tiny" in preset_names()
    cfg = load_config(preset="cpu-tiny")
    assert cfg.loss.kind == "sc_mis" and cfg.loss.replay and not cfg.loss.std_normalised
    assert cfg.fleet.name == "mixed-6" and cfg.fleet.replicas == 1
    assert cfg.environment.url == "bundled"
    assert cfg.warmup.enabled
    assert not set(cfg.tasks.train) & set(cfg.tasks.eval)
    assert cfg.staleness.cap is None


@pytest.mark.parametrize("name, fleet", [("reference-mixed", "mixed-6"), ("reference-control", "control-bf16")])
def test_reference_configs_load(name: str, fleet: str) -> None:
    cfg = load_config(ROOT / "configs" / f"{name}.toml")
    assert cfg.name == name and cfg.fleet.name == fleet
    assert (cfg.batch.prompts, cfg.batch.samples) == (128, 8)
    assert cfg.loss.kind == "sc_mis" and cfg.loss.replay and not cfg.loss.std_normalised
    assert (cfg.sampling.temperature, cfg.sampling.top_p, cfg.sampling.top_k) == (1.0, 0.97, 64)
    assert cfg.optimizer.lr == 1e-6 and cfg.optimizer.weight_decay == 0.1 and cfg.optimizer.betas == (0.9, 0.98)
    assert cfg.limits.max_tokens_per_turn == 32768
    assert cfg.staleness.cap is None
    groups = load_fleet(cfg.fleet.name).groups
    assert len(groups) == (8 if fleet == "mixed-6" else 1)


def test_the_two_reference_configs_differ_only_in_fleet_and_name() -> None:
    a = load_config(ROOT / "configs" / "reference-mixed.toml").model_dump()
    b = load_config(ROOT / "configs" / "reference-control.toml").model_dump()
    diff = {k for k in a if a[k] != b[k]}
    assert diff == {"name", "output_dir", "fleet"}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_unknown_field_is_named_with_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, '[tasks]\ntrain = ["a"]\n[batch]\nprompts = 2\nsamplez = 4\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value) and "batch.samplez: unknown field" in str(err.value)


def test_bad_values_are_named(tmp_path: Path) -> None:
    path = _write(tmp_path, '[tasks]\ntrain = ["a"]\n[loss]\nkind = "ppo"\n[sampling]\ntop_k = 0\n[eval]\nn = 2\nk = [1, 4]\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert "loss.kind" in text and "sampling.top_k" in text and "eval" in text and "k=[1, 4]" in text


def test_missing_tasks_and_held_out_overlap(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tasks: required field is missing"):
        load_config(_write(tmp_path, "seed = 1\n"))
    with pytest.raises(ConfigError, match="held out.*in both: a"):
        load_config(_write(tmp_path, '[tasks]\ntrain = ["a", "b"]\neval = ["a"]\n'))


def test_sc_with_std_normalisation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="score centering does not divide"):
        load_config(_write(tmp_path, '[tasks]\ntrain = ["a"]\n[loss]\nkind = "sc"\nnormalize_std = true\n'))


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write(tmp_path, "[tasks\n"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="no preset named 'huge'.*cpu-tiny"):
        load_config(preset="huge")


def test_environment_url_must_be_bundled_or_http(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="environment.url"):
        load_config(_write(tmp_path, '[tasks]\ntrain = ["a"]\n[environment]\nurl = "localhost:8000"\n'))


def test_overrides_set_dotted_keys_and_parse_values() -> None:
    cfg = load_config(preset="cpu-tiny", overrides=["batch.prompts=1", "batch.samples=2", "loss.kind=grpo", "staleness.cap=2"])
    assert (cfg.batch.prompts, cfg.batch.samples, cfg.loss.kind, cfg.staleness.cap) == (1, 2, "grpo", 2)
    assert cfg.loss.std_normalised  # grpo's default
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_overrides({}, ["batch.prompts"])


def test_with_loss_for_ablations() -> None:
    cfg = load_config(preset="cpu-tiny")
    assert cfg.with_loss("grpo").loss.kind == "grpo" and cfg.with_loss("grpo").name == "cpu-tiny-grpo"
    with pytest.raises(ConfigError, match="unknown loss 'ppo'"):
        cfg.with_loss("ppo")


def test_context_must_exceed_one_turn() -> None:
    with pytest.raises(ValueError, match="max_tokens_per_turn"):
        RunConfig.model_validate({"tasks": {"train": ["a"]}, "limits": {"max_tokens_per_turn": 4096, "max_context": 1024}})


def test_max_format_errors_reaches_the_episode_limits(tmp_path: Path) -> None:
    from patchgym.rl.loop.sessions import session_limits

    cfg = load_config(preset="cpu-tiny")
    assert cfg.limits.max_format_errors == 1
    assert session_limits(cfg).env == {"max_turns": cfg.limits.max_turns, "max_format_errors": 1}
    plain = load_config(_write(tmp_path, '[tasks]\ntrain = ["a"]\n'))
    assert plain.limits.max_format_errors is None
    assert session_limits(plain).env == {"max_turns": plain.limits.max_turns}  # the server's default stays
    with pytest.raises(ConfigError, match="limits.max_format_errors"):
        load_config(_write(tmp_path, '[tasks]\ntrain = ["a"]\n[limits]\nmax_format_errors = 0\n'))
