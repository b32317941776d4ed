"""Raw /generate answers recorded from a real SGLang server by bench/gpu/run.sh, parsed by the client.

Each tests/fixtures_sglang/*.json holds {"params", "request", "answer"}; none is recorded until a
GPU session runs bench/gpu/run.sh (then the test skips no more)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from patchgym.rl.sampler.sglang import parse_answer
from patchgym.rl.sampler.types import SamplingParams

RECORDED = sorted((Path(__file__).parent / "fixtures_sglang").glob("*.json"))


@pytest.mark.skipif(not RECORDED, reason="no recorded SGLang answers yet: run bench/gpu/run.sh on a GPU and copy "
                    "OUT_DIR/sglang_*_answer.json to tests/fixtures_sglang/")
@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_answer_parses_into_a_consistent_generation(path: Path) -> None:
    data = json.loads(path.read_text())
    params = SamplingParams(**data["params"])
    gen = parse_answer(data["answer"], params, group="recorded", replica="0")
    assert gen.token_ids and len(gen.logprobs) == len(gen.token_ids)
    for tok, lq, sup, row in zip(gen.token_ids, gen.logprobs, gen.support_ids, gen.support_logprobs):
        assert tok in sup and abs(sum(math.exp(v) for v in row) - 1) < 1e-3
        assert row[sup.index(tok)] == pytest.approx(lq, abs=1e-3)  # the server's log q and the rebuilt one agree
