"""Engine-free parts of the loop: staleness and admission, cost, pass@k, metrics rows, plots."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from patchgym.rl.fleet.load import load_fleet
from patchgym.rl.loop.buffer import GroupBuffer, StalenessGate, TrajectoryGroup, staleness
from patchgym.rl.loop.cost import busy_cost, price_per_turn, turns_per_gpu_hour, update_cost
from patchgym.rl.loop.metrics import PER_GROUP, MetricsWriter, lag_bucket, metric_keys, read_rows, update_row
from patchgym.rl.loop.passk import mean_pass_at_k, pass_at_k
from patchgym.rl.trajectory import Trajectory, Turn


def traj(versions: list[int], *, reward: float = 0.0, status: str = "submitted", group: str = "g", task: str = "t") -> Trajectory:
    """A small well-formed trajectory: a 3-token prompt, then one 2-token turn per version."""
    ids, mask, lps, vers, turns = [1, 2, 3], [0, 0, 0], [0.0] * 3, [-1] * 3, []
    for v in versions:
        turns.append(Turn(offset=len(ids), sampled_ids=[7, 8], weight_version=v, group=group, replica="r0", finish_reason="stop", text="x"))
        ids += [7, 8, 9]
        mask += [1, 1, 0]
        lps += [-0.5, -0.5, 0.0]
        vers += [v, v, -1]
    return Trajectory(task_id=task, prompt_index=0, sample_index=0, token_ids=ids, loss_mask=mask, logprobs=lps,
                      weight_versions=vers, turns=turns, prompt_len=3, status=status, reward=reward)


# -- staleness -------------------------------------------------------------------------------

def test_staleness_is_current_minus_oldest_turn_version_over_the_group() -> None:
    group = TrajectoryGroup("t", [traj([3, 4]), traj([2, 5]), traj([])], start_version=2)
    assert group.min_version == 2
    assert staleness(group, 6) == 4
    assert staleness(group, 2) == 0


def test_gate_without_cap_keeps_everything() -> None:
    gate = StalenessGate(None, "drop", 2)
    assert gate.may_start(0)
    assert gate.accept(TrajectoryGroup("t", [traj([0])], 0), 100)
    assert gate.counters.dropped == 0


def test_gate_drop_counts_and_keep_keeps() -> None:
    old = TrajectoryGroup("t", [traj([1])], 1)
    fresh = TrajectoryGroup("t", [traj([4])], 4)
    drop = StalenessGate(2, "drop", 1)
    assert not drop.accept(old, 4) and drop.accept(fresh, 4)
    assert (drop.counters.dropped, drop.counters.consumed) == (1, 1)
    keep = StalenessGate(2, "keep", 1)
    assert keep.accept(old, 4)
    assert keep.counters.stale_kept == 1 and keep.counters.dropped == 0


def test_gate_pace_holds_admission_for_an_old_inflight_group() -> None:
    gate = StalenessGate(1, "pace", 2)
    a = gate.admit(0)
    gate.admit(0)
    assert gate.may_start(0)
    # version 1: the group started at 0 would be 1 old: no new start until it finishes
    assert not gate.may_start(1)
    gate.finished(a)
    gate.finished(a + 1)
    assert gate.may_start(1)


def test_gate_pace_bounds_started_groups_by_version() -> None:
    gate = StalenessGate(0, "pace", 2)
    for _ in range(2):
        assert gate.may_start(0)
        gate.finished(gate.admit(0))
    assert not gate.may_start(0)  # (0 + 0 + 1) x 2 groups started: wait for an update
    assert gate.may_start(1)


def test_gate_rejects_bad_policy() -> None:
    with pytest.raises(ValueError, match="keep, drop or pace"):
        StalenessGate(1, "retry", 1)  # type: ignore[arg-type]


def test_buffer_blocks_producers_when_full_and_is_fifo() -> None:
    async def main() -> list[int]:
        buf = GroupBuffer(2)
        order: list[int] = []

        async def produce() -> None:
            for i in range(4):
                await buf.put(TrajectoryGroup(f"t{i}", [], 0, serial=i))
                order.append(i)

        task = asyncio.create_task(produce())
        await asyncio.sleep(0.05)
        assert order == [0, 1] and len(buf) == 2  # the third put is waiting for room
        got = [(await buf.get()).serial for _ in range(4)]
        await task
        assert buf.blocked_s > 0
        return got

    assert asyncio.run(main()) == [0, 1, 2, 3]


# -- cost ------------------------------------------------------------------------------------

def test_cost_by_hand_on_the_control_fleet() -> None:
    fleet = load_fleet("control-bf16")
    g = fleet.groups[0]
    # 32 sessions x 90 tok/s / 77 tok per turn x 3600 s = 134,649.35 turns per GPU-hour
    assert turns_per_gpu_hour(g) == pytest.approx(32 * 90 / 77 * 3600)
    assert price_per_turn(g) == pytest.approx(6.25 / 134649.35, rel=1e-6)
    assert busy_cost(g, 1800) == pytest.approx(3.125)
    cost = update_cost(fleet, {g.name: 3600.0}, {g.name: 1000})
    assert cost["cost/busy_usd"] == pytest.approx(6.25)
    assert cost["cost/turn_usd"] == pytest.approx(1000 * 6.25 / 134649.35, rel=1e-6)
    assert cost["cost/usd_per_turn"] == pytest.approx(6.25 / 134649.35, rel=1e-6)


def test_cost_tp2_pays_two_gpus_and_unknown_groups_are_errors() -> None:
    fleet = load_fleet("mixed-6")
    tp2 = next(g for g in fleet.groups if g.gpus_per_replica == 2)
    assert busy_cost(tp2, 3600) == pytest.approx(2 * tp2.price_per_gpu_hour)
    with pytest.raises(ValueError, match="not in fleet"):
        update_cost(fleet, {"nope": 1.0}, {})
    assert math.isnan(update_cost(fleet, {}, {})["cost/usd_per_turn"])


def test_per_turn_price_by_hand_on_a_tp2_pool() -> None:
    g = load_fleet("mixed-6").group("a100-bf16") if any(x.name == "a100-bf16" for x in load_fleet("mixed-6").groups) else next(
        x for x in load_fleet("mixed-6").groups if x.gpus_per_replica == 2)
    per_replica_hour = g.sessions_per_replica * 90 / 77 * 3600
    assert price_per_turn(g) == pytest.approx(g.price_per_gpu_hour * g.gpus_per_replica / per_replica_hour)


# -- pass@k ----------------------------------------------------------------------------------

def test_pass_at_k_hand_worked() -> None:
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    assert pass_at_k(3, 2, 2) == 1.0  # n - c < k
    assert pass_at_k(200, 1, 1) == pytest.approx(1 / 200)


def test_pass_at_k_errors_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="c must be in 0..n=2"):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError, match="fewer than k=3"):
        mean_pass_at_k({"a": [True, False]}, [3])


def test_mean_pass_at_k_over_tasks() -> None:
    got = mean_pass_at_k({"a": [True, False, False, False], "b": [False] * 4}, [1, 2])
    assert got[1] == pytest.approx(0.125) and got[2] == pytest.approx(0.25)


# -- metrics ---------------------------------------------------------------------------------

def _row(groups: list[str], trajs: list[Trajectory], tm: dict) -> dict:
    return update_row(
        update=1, version=1, loss_kind="sc_mis", groups=[TrajectoryGroup("t", trajs, 0)], trainer_metrics=tm,
        group_names=groups, staleness_values=[0, 2], busy_fraction={g: 0.5 for g in groups},
        cost={"cost/turn_usd": 0.1, "cost/busy_usd": 0.2, "cost/usd_per_turn": float("nan")},
        timings={"update_s": 3.0, "trainer_s": 1.0}, buffer={"size": 1, "dropped": 0},
    )


def test_update_row_has_every_key_and_counts_by_hand() -> None:
    trajs = [traj([0], reward=1.0, group="a"), traj([0, 0], status="format_error", group="b"),
             traj([0], status="context_limit", group="a"), traj([0], status="weird", group="a")]
    tm = {"loss": 0.1, "kl_k3": 1e-3, "kl_k3/group/a": 2e-3, "kl_k3/lag/0-1": 1e-3, "entropy": float("nan"), "extra_thing": 5}
    row = _row(["a", "b"], trajs, tm)
    assert set(metric_keys(["a", "b"])) <= set(row)
    assert row["reward/mean"] == 0.25 and row["pass_rate"] == 0.25
    assert row["status/format_error"] == 1 and row["status/context_limit"] == 1 and row["status/other"] == 1
    assert row["format_error_frac"] == 0.25
    assert row["turns/a"] == 3 and row["turns/b"] == 2
    assert row["tokens/sampled"] == 10 and row["response/tokens_mean"] == 2.5
    assert row["entropy"] is None and row["cost/usd_per_turn"] is None  # NaN -> null
    assert row["kl_k3/group/a"] == 2e-3 and row["kl_k3/group/b"] is None
    assert row["staleness/mean"] == 1 and row["staleness/max"] == 2
    assert row["trainer/extra_thing"] == 5
    json.dumps(row, allow_nan=False)


def test_mixed_and_control_rows_share_the_overall_keys() -> None:
    mixed = load_fleet("mixed-6")
    control = load_fleet("control-bf16")
    km = set(metric_keys([g.name for g in mixed.groups]))
    kc = set(metric_keys([g.name for g in control.groups]))
    overall = {k for k in km if not any(k.startswith(p + "/") and k.count("/") >= p.count("/") + 1 and k.rsplit("/", 1)[1] in {g.name for g in mixed.groups} for p in PER_GROUP)}
    assert overall <= kc


def test_lag_buckets() -> None:
    assert [lag_bucket(i) for i in (0, 1, 2, 3, 4, 5, 6, 40)] == ["0-1", "0-1", "2-3", "2-3", "4-5", "4-5", "6+", "6+"]


def test_metrics_writer_appends_and_truncates_on_resume(tmp_path: Path) -> None:
    w = MetricsWriter(tmp_path / "metrics.jsonl")
    for u in (1, 2, 3):
        w.write({"update": u, "x": float("inf")})
    with open(w.path, "a") as f:
        f.write('{"update": 4, "x"')  # a torn line from a crash
    assert [r["update"] for r in read_rows(w.path)] == [1, 2, 3]
    assert w.truncate_after(2) == 2
    rows = read_rows(w.path)
    assert [r["update"] for r in rows] == [1, 2] and rows[0]["x"] is None


# -- plots -----------------------------------------------------------------------------------

def _fake_run(d: Path, loss: str, groups: list[str], scale: float) -> None:
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"name": d.name, "loss": {"kind": loss}}))
    w = MetricsWriter(d / "metrics.jsonl")
    for u in range(1, 5):
        row = {k: None for k in metric_keys(groups)}
        row.update({"update": u, "reward/mean": scale * u / 10, "pass_rate": u / 8, "kl_k3": 1e-3 * u, "entropy": 1.0,
                    "grad_norm": 0.5, "mis/masked_frac": 0.01, "format_error_frac": 0.5 / u, "cost/turn_usd": 0.01 * u})
        for g in groups:
            row[f"kl_k3/group/{g}"] = 1e-4 * u * (1 + groups.index(g))
            if loss.startswith("sc"):  # a replaying run has the support KL too
                row[f"kl_support/group/{g}"] = 5e-5 * u * (1 + groups.index(g))
        w.write(row)
    (d / "eval.jsonl").write_text(json.dumps({"update": 4, "pass@1": 0.25, "pass@2": 0.5}) + "\n")


def test_plots_write_nonempty_pngs_for_overlaid_runs(tmp_path: Path) -> None:
    from patchgym.rl.loop.plots import plot_runs

    _fake_run(tmp_path / "a", "sc_mis", ["g1", "g2"], 1.0)
    _fake_run(tmp_path / "b", "grpo", ["g1"], 0.5)
    out = plot_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "plots")
    names = {p.name for p in out}
    assert {"reward.png", "kl.png", "kl_per_group.png", "eval_pass_at_k.png", "format_error.png", "cost.png"} <= names
    assert "kl_support_per_group.png" in names  # run a replays its supports
    assert "tail_ratio.png" not in names and "kl_support.png" not in names  # no run had a value
    for p in out:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_plot_of_a_non_run_is_a_clear_error(tmp_path: Path) -> None:
    from patchgym.rl.loop.plots import PlotError, plot_runs

    with pytest.raises(PlotError, match="no metrics.jsonl rows"):
        plot_runs([tmp_path], tmp_path / "out")


# -- warm-up cache key, env server errors ----------------------------------------------------

def test_warmup_key_depends_on_model_data_and_schedule() -> None:
    from patchgym.rl.loop.config import load_config
    from patchgym.rl.loop.warmup import warmup_key

    cfg = load_config(preset="cpu-tiny")
    rows = [{"instance_id": "a", "patch": "diff --git a/x b/x\n"}]
    key = warmup_key(cfg, rows)
    assert key == warmup_key(cfg, list(rows))
    assert key != warmup_key(cfg, [{"instance_id": "a", "patch": "diff --git a/y b/y\n"}])
    assert key != warmup_key(load_config(preset="cpu-tiny", overrides=["warmup.steps=3"]), rows)
    assert key != warmup_key(load_config(preset="cpu-tiny", overrides=["warmup.lr=0.1"]), rows)


def test_env_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    from patchgym.rl.loop.envserver import EnvServer, EnvServerError

    server = EnvServer("bundled", tasks=str(tmp_path / "no-such-tasks.jsonl"), log_path=tmp_path / "env.log", start_timeout_s=120)
    with pytest.raises(EnvServerError, match="exited with"):
        with server:
            pass
    assert server.proc is None


def test_env_server_url_passes_through() -> None:
    from patchgym.rl.loop.envserver import EnvServer

    with EnvServer("http://127.0.0.1:9") as url:
        assert url == "http://127.0.0.1:9"


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGKILL"])
def test_a_stopped_run_does_not_leave_its_bundled_server_serving(signum: str) -> None:
    """The server runs in its own session. SIGTERM: the run stops it (and reaps it). SIGKILL (what
    the OOM killer sends) gives the run no chance: the server notices that its parent is gone
    (`serve --parent-pid`) and shuts itself down; re-parented, it may stay a zombie, which serves
    nothing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\n"
        "from patchgym.rl.loop.envserver import EnvServer\n"
        "s = EnvServer('bundled', task_ids=['semverlite-bump-major-keeps-minor'])\n"
        "with s as url:\n"
        "    print(s.proc.pid, flush=True)\n"
        "    time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), line
    server_pid = int(line)
    os.kill(proc.pid, getattr(signal, signum))
    proc.wait(timeout=60)

    def running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return signum == "SIGTERM" or state not in ("Z", "X")  # after SIGTERM the run must have reaped it

    deadline = time.monotonic() + 30
    while running(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if running(server_pid):
        os.kill(server_pid, signal.SIGKILL)
        raise AssertionError(f"the bundled server outlived a run stopped with {signum}")


def test_measure_key_ignores_the_warmup_knobs_and_follows_what_the_rates_depend_on() -> None:
    from patchgym.rl.loop.config import load_config
    from patchgym.rl.loop.warmup import measure_key

    cfg = load_config(preset="cpu-tiny")
    train, held = list(cfg.tasks.train), list(cfg.tasks.eval)
    key = measure_key(cfg, train, held)
    for same in (["warmup.steps=3"], ["warmup.lr=0.1"], ["warmup.batch=2"], ["updates=9"]):
        assert measure_key(load_config(preset="cpu-tiny", overrides=same), train, held) == key, same
    for other in (["sampling.temperature=1.0"], ["limits.max_tokens_per_turn=64"], ["limits.max_format_errors=3"],
                  ["warmup.measure_samples=5"], ["seed=1"]):
        assert measure_key(load_config(preset="cpu-tiny", overrides=other), train, held) != key, other
    assert measure_key(cfg, train[:1], held) != key


def test_warmup_caches_weights_and_both_rates_each_on_what_it_depends_on(tmp_path: Path, monkeypatch) -> None:
    import torch

    from patchgym.rl.loop import warmup as wu
    from patchgym.rl.loop.config import load_config

    monkeypatch.setenv("PATCHGYM_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(wu, "resolve", lambda spec: Path("/models/smollm2-abc"))
    monkeypatch.setattr(wu, "_task_rows", lambda ids, tasks: [{"instance_id": t, "patch": f"diff {t}"} for t in ids])

    class Expert:
        num_sampled = 7

    async def experts(*a, **k):
        return [Expert()]

    monkeypatch.setattr(wu, "_experts", experts)
    measured: list[str] = []

    def measure(cfg, env_url, tokenizer, router, task_ids, eval_ids, when, log):
        measured.append(when)
        return {"train": {"success_rate": 0.25 if when == "after" else 0.0}}

    monkeypatch.setattr(wu, "_measure_both", measure)

    class Trainer:
        def __init__(self):
            self.model = torch.nn.Linear(2, 2)
            self.steps = 0
            self.version = 0

        def sft_step(self, batch):
            self.steps += 1
            with torch.no_grad():
                self.model.weight.add_(1.0)
            return {"nll": 0.5}

        def weights(self):
            return self.model.state_dict()

    class Sampler:
        closed = False

        async def update_weights(self, w, v):
            pass

        def close(self):
            self.closed = True

    built: list[Sampler] = []

    def factory():
        built.append(Sampler())
        return object(), [built[-1]]

    def go(*overrides):
        cfg = load_config(preset="cpu-tiny", overrides=list(overrides))
        t = Trainer()
        report = wu.run_warmup(cfg, t, None, "http://x", run_dir=tmp_path / "run", eval_sampler_factory=factory, log=lambda s: None)
        return t, report

    t, r = go()
    assert measured == ["before", "after"] and t.steps == load_config(preset="cpu-tiny").warmup.steps and t.version == 1
    assert r["after"]["train"]["success_rate"] == 0.25 and not r["cached"]
    assert all(s.closed for s in built)
    trained = t.model.weight.detach().clone()
    t, r = go()  # everything cached: no training, no measuring, the weights loaded
    assert measured == ["before", "after"] and t.steps == 0 and r["cached"] and r["after"]["cached"] and r["before"]["cached"]
    assert torch.equal(t.model.weight.detach(), trained) and t.version == 1
    t, r = go("sampling.temperature=0.9")  # new sampling: both rates again, the weights from the cache
    assert measured[2:] == ["before", "after"] and t.steps == 0
    t, r = go("warmup.steps=3")  # new warm-up: trained again, the rate before from the cache
    assert measured[4:] == ["after"] and t.steps == 3
    assert json.loads((tmp_path / "run" / "warmup.json").read_text())["steps"] == 3


def test_a_new_run_into_an_old_run_dir_sets_the_old_one_aside(tmp_path: Path) -> None:
    from patchgym.rl.loop.runner import set_aside_previous_run

    run = tmp_path / "cpu-tiny"
    assert set_aside_previous_run(run, log=lambda s: None) is None  # nothing there
    run.mkdir()
    (run / "envserver.log").write_text("x")
    assert set_aside_previous_run(run, log=lambda s: None) is None  # no finished update: reused
    (run / "metrics.jsonl").write_text('{"update": 1}\n')
    lines: list[str] = []
    first = set_aside_previous_run(run, log=lines.append)
    assert first is not None and not run.exists() and (first / "metrics.jsonl").read_text() == '{"update": 1}\n'
    assert "--resume" in lines[0] and first.name.startswith("cpu-tiny.prev-")
    (run / "checkpoints" / "update-0001").mkdir(parents=True)
    second = set_aside_previous_run(run, log=lambda s: None)
    assert second is not None and second != first and (second / "checkpoints" / "update-0001").is_dir()
