"""SGLangSampler against a real HTTP server on loopback that answers SGLang's shapes (tests/sglang_double.py)."""

from __future__ import annotations

import asyncio
import math

import pytest

from patchgym.rl.fleet.model import Group
from patchgym.rl.sampler.sglang import (
    SGLangProtocolError,
    SGLangRequestRefused,
    SGLangSampler,
    parse_version,
    request_body,
)
from patchgym.rl.sampler.types import SamplerOverloaded, SamplerUnavailable, SamplingParams, VersionBehind
from tests.sglang_double import EOS, Served, State, log_softmax, logits_after, support_of

GROUP = Group(name="h200-bf16", accelerator="H200", backend="sglang", replicas=1, sessions_per_replica=16,
              endpoints=["http://127.0.0.1:1"])


def run(coro):
    return asyncio.run(coro)


async def _generate(url: str, prompt, params, **kw):
    s = SGLangSampler(url, GROUP)
    try:
        return await s.generate(prompt, params, **kw), s
    finally:
        await s.aclose()


def test_request_body_is_token_ids_and_asks_for_the_mask_when_truncating() -> None:
    body = request_body([5, 6], SamplingParams(temperature=0.7, top_p=0.9, top_k=64, max_new_tokens=9, stop=("x",),
                                                stop_token_ids=(7,), top_logprobs=3, seed=4))
    assert body["input_ids"] == [5, 6] and "text" not in body
    assert body["sampling_params"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 64, "max_new_tokens": 9,
                                       "ignore_eos": False, "stop": ["x"], "stop_token_ids": [7], "sampling_seed": 4}
    assert body["return_logprob"] is True and body["logprob_start_len"] == -1 and body["top_logprobs_num"] == 3
    assert body["return_sampling_mask"] is True
    assert request_body([1], SamplingParams())["return_sampling_mask"] is False
    with pytest.raises(ValueError, match="untruncated"):
        request_body([1], SamplingParams(return_support=True))
    with pytest.raises(ValueError, match="prompt_ids"):
        request_body([], SamplingParams())


@pytest.mark.parametrize("list_form", [False, True])
def test_generate_maps_the_answer_and_log_q_is_of_the_sampled_distribution(list_form: bool) -> None:
    params = SamplingParams(temperature=0.8, top_p=0.85, top_k=10, max_new_tokens=12, return_support=True,
                            top_logprobs=4, seed=3, ignore_eos=True)
    with Served(State(list_form=list_form, weight_version="7")) as srv:
        gen, s = run(_generate(srv.url, [1, 5], params))
    assert len(gen.token_ids) == 12 and gen.finish_reason == "length" and gen.weight_version == 7
    assert gen.group == "h200-bf16" and gen.prompt_tokens == 2
    last = 5
    for tok, lq, sup, top_ids, top_lp in zip(gen.token_ids, gen.logprobs, gen.support_ids, gen.topk_ids, gen.topk_logprobs):
        logp = log_softmax([x / 0.8 for x in logits_after(last)])  # recomputed independently of the client
        want_support = support_of(logp, 10, 0.85)
        assert sup == want_support and tok in sup
        mass = math.log(sum(math.exp(logp[i]) for i in want_support))
        assert lq == pytest.approx(logp[tok] - mass, abs=1e-9)
        assert top_ids == sorted(range(len(logp)), key=lambda i: -logp[i])[:4]
        assert top_lp[0] == pytest.approx(max(logp))
        last = tok
    # either form: log q over the support sums to 1 and holds the sampled id's log q
    for tok, lq, sup, row in zip(gen.token_ids, gen.logprobs, gen.support_ids, gen.support_logprobs):
        assert abs(sum(math.exp(v) for v in row) - 1) < 1e-9 and row[sup.index(tok)] == pytest.approx(lq, abs=1e-9)
    assert len(gen.topk_ids[0]) == 4
    assert srv.state.requests[-1]["top_logprobs_num"] == 10  # enough to cover a top-k 10 support


def test_untruncated_log_q_is_the_full_distribution_and_stop_maps() -> None:
    with Served() as srv:
        gen, _ = run(_generate(srv.url, [3], SamplingParams(max_new_tokens=200, seed=1)))
        assert srv.state.requests[-1]["return_sampling_mask"] is False
    assert gen.finish_reason == "stop" and gen.token_ids[-1] == EOS
    last = 3
    for tok, lq in zip(gen.token_ids, gen.logprobs):
        assert lq == pytest.approx(log_softmax(logits_after(last))[tok])
        last = tok


@pytest.mark.parametrize("status,error", [(409, VersionBehind), (429, SamplerOverloaded), (503, SamplerOverloaded),
                                          (500, SamplerUnavailable), (400, SGLangRequestRefused), ("garbage", SGLangProtocolError)])
def test_http_failures_map_to_sampler_errors(status, error) -> None:
    with Served(State(fail=[status])) as srv:
        with pytest.raises(error) as info:
            run(_generate(srv.url, [1], SamplingParams(max_new_tokens=2), min_version=0))
    assert info.value.retryable == (status in (409, 429, 503, 500))


def test_connection_refused_is_unavailable_and_marks_unhealthy() -> None:
    async def go():
        s = SGLangSampler("http://127.0.0.1:9", GROUP, timeout=5)
        with pytest.raises(SamplerUnavailable, match="unreachable"):
            await s.generate([1], SamplingParams(max_new_tokens=1))
        assert not s.health().ok
        await s.aclose()
    run(go())


def test_min_version_checked_on_the_answer() -> None:
    with Served(State(weight_version="3")) as srv:
        with pytest.raises(VersionBehind, match="version 3, the request needs at least 4"):
            run(_generate(srv.url, [1], SamplingParams(max_new_tokens=1), min_version=4))
        gen, _ = run(_generate(srv.url, [1], SamplingParams(max_new_tokens=1), min_version=3))
        assert gen.weight_version == 3 and "min_weight_version" not in srv.state.requests[-1]


def test_weight_updates_from_disk_and_distributed_and_health() -> None:
    async def go(srv):
        s = SGLangSampler(srv.url, GROUP, view_root="/local/views", server_view_root="/vol/views")
        await s.update_weights("/local/views/bf16/v5", 5)
        assert srv.state.loaded_paths == ["/vol/views/bf16/v5"] and s.health().weight_version == 5
        gen = await s.generate([1], SamplingParams(max_new_tokens=1), min_version=5)
        assert gen.weight_version == 5
        with pytest.raises(TypeError, match="publish the state dict as a view"):
            await s.update_weights({"w": 1}, 6)
        await s.init_weights_update_group("10.0.0.1", 29500, 1, 3)
        assert srv.state.groups[0] == {"master_address": "10.0.0.1", "master_port": 29500, "rank_offset": 1,
                                       "world_size": 3, "group_name": "weight_update_group", "backend": "nccl"}
        await s.update_weights_from_distributed(["a.weight"], ["torch.bfloat16"], [[2, 3]], 6)
        assert (await s.check_health()).weight_version == 6
        srv.state.healthy = False
        assert not (await s.check_health()).ok
        await s.aclose()
    with Served() as srv:
        run(go(srv))


def test_parse_version() -> None:
    assert parse_version("12") == 12 and parse_version("default", default=4) == 4 and parse_version(None) == 0
    with pytest.raises(SGLangProtocolError):
        parse_version("v1.2")


def test_router_retries_another_replica_over_real_http() -> None:
    from patchgym.rl.fleet.model import Fleet
    from patchgym.rl.fleet.router import Router

    with Served(State(fail=[503, 503, 503])) as bad, Served() as good:
        group = GROUP.model_copy(update={"replicas": 2, "endpoints": [bad.url, good.url]})
        fleet = Fleet(name="t", groups=[group])

        async def go():
            samplers = {group.name: [SGLangSampler(u, group, replica=str(i)) for i, u in enumerate(group.endpoints)]}
            router = Router(samplers, fleet)
            gens = [await router.generate(f"s{i}", [1, 2], SamplingParams(max_new_tokens=2)) for i in range(4)]
            for s in samplers[group.name]:
                await s.aclose()
            return gens
        gens = run(go())
    assert all(len(g.token_ids) == 2 for g in gens)
    assert good.state.requests


def test_busy_time_is_the_union_of_overlapping_requests_not_their_sum() -> None:
    params = SamplingParams(max_new_tokens=2, ignore_eos=True)

    async def go(url: str) -> tuple[float, float, float]:
        s = SGLangSampler(url, GROUP)
        try:
            t0 = asyncio.get_running_loop().time()
            task = asyncio.gather(*(s.generate([1, 5], params) for _ in range(3)))
            await asyncio.sleep(0.15)
            during = s.health().busy_s  # the open span counts while requests are in flight
            await task
            return during, s.health().busy_s, asyncio.get_running_loop().time() - t0
        finally:
            await s.aclose()

    with Served(State(delay_s=0.4)) as srv:
        during, busy, wall = run(go(srv.url))
    assert 0.1 < during < 0.4
    assert 0.35 < busy <= wall + 1e-6  # three overlapping 0.4 s requests: about 0.4 s, not 1.2 s
