"""A test double of the REMOTE side: a FastAPI app on loopback answering SGLang's native shapes.

Not a mock of the client: `SGLangSampler` talks real HTTP to it through uvicorn. The answers have
the shapes of SGLang 0.5.20 (`/generate` meta_info with output_token_logprobs as [logprob, id,
text], output_top_logprobs, output_token_sampling_mask, output_token_sampling_logprobs,
finish_reason {type}, weight_version as a string; `/update_weights_from_disk` and the distributed
pair answering {success, message}; /health; /get_server_info). The "model" is a fixed table of
logits over a small vocabulary keyed by the last token, so a test can recompute q independently.
`state.fail` makes the next answers fail with a status (409, 429, 503, 500, 400) or a bad body.
"""

from __future__ import annotations

import asyncio

import math
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

VOCAB = 24
EOS = 2


def logits_after(last: int) -> list[float]:
    """The double's model: logits of the next token given the last one (a fixed pseudo-random table)."""
    rng = random.Random(1000 + last)
    return [rng.gauss(0.0, 2.0) for _ in range(VOCAB)]


def log_softmax(xs: list[float]) -> list[float]:
    m = max(xs)
    z = m + math.log(sum(math.exp(x - m) for x in xs))
    return [x - z for x in xs]


def support_of(logp: list[float], top_k: int, top_p: float) -> list[int]:
    order = sorted(range(len(logp)), key=lambda i: -logp[i])
    if top_k != -1:
        order = order[:top_k]
    if top_p < 1.0:
        kept, mass = [], 0.0
        for i in order:
            kept.append(i)
            mass += math.exp(logp[i])
            if mass >= top_p:
                break
        order = kept
    return order


@dataclass
class State:
    weight_version: str = "0"
    fail: list[Any] = field(default_factory=list)  # statuses or "garbage", consumed one per request
    list_form: bool = False  # sampling log-probs as a list aligned with the mask (a fork's form)
    mask_limit: int = 4096
    requests: list[dict] = field(default_factory=list)
    loaded_paths: list[str] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    healthy: bool = True
    delay_s: float = 0.0  # how long each /generate takes to answer


def make_app(state: State) -> FastAPI:
    app = FastAPI()

    def failure() -> JSONResponse | None:
        if not state.fail:
            return None
        code = state.fail.pop(0)
        if code == "garbage":
            return JSONResponse({"text": "hello"})
        return JSONResponse({"object": "error", "message": f"simulated {code}", "code": code,
                             "weight_version": state.weight_version}, status_code=code)

    @app.post("/generate")
    async def generate(request: Request) -> Any:
        body = await request.json()
        state.requests.append(body)
        if state.delay_s:
            await asyncio.sleep(state.delay_s)
        bad = failure()
        if bad is not None:
            return bad
        sp = body["sampling_params"]
        ids = body["input_ids"]
        t, top_k, top_p = sp.get("temperature", 1.0), sp.get("top_k", -1), sp.get("top_p", 1.0)
        if body.get("return_sampling_mask") and top_k == -1 and top_p >= 1.0:
            return JSONResponse({"object": "error", "message": "return_sampling_mask needs top_k or top_p", "code": 400}, status_code=400)
        rng = random.Random(sp.get("sampling_seed", 0))
        stop_ids = set(sp.get("stop_token_ids") or []) | ({EOS} if not sp.get("ignore_eos") else set())
        last, out, full, top, masks, qs = ids[-1], [], [], [], [], []
        finish: dict = {"type": "length", "length": sp["max_new_tokens"]}
        for _ in range(sp["max_new_tokens"]):
            logp = log_softmax([x / t for x in logits_after(last)])
            support = support_of(logp, top_k, top_p)
            if body.get("return_sampling_mask") and len(support) > state.mask_limit:
                return JSONResponse({"object": "error", "message": "Sampling support exceeds --sampling-mask-max-tokens", "code": 400}, status_code=400)
            mass = math.log(sum(math.exp(logp[i]) for i in support))
            tok = rng.choices(support, weights=[math.exp(logp[i]) for i in support])[0]
            out.append(tok)
            full.append([logp[tok], tok, None])
            k = body.get("top_logprobs_num", 0)
            top.append([[logp[i], i, None] for i in sorted(range(VOCAB), key=lambda i: -logp[i])[:k]])
            masks.append(support)
            qs.append([logp[i] - mass for i in support] if state.list_form else logp[tok] - mass)
            last = tok
            if tok in stop_ids:
                finish = {"type": "stop", "matched": tok}
                break
        meta: dict[str, Any] = {"id": "r", "finish_reason": finish, "prompt_tokens": len(ids), "completion_tokens": len(out),
                                "cached_tokens": 0, "e2e_latency": 0.01, "weight_version": state.weight_version,
                                "output_token_logprobs": full, "input_token_logprobs": []}
        if body.get("top_logprobs_num"):
            meta["output_top_logprobs"] = top
        if body.get("return_sampling_mask"):
            meta["output_token_sampling_mask"] = masks
            meta["output_token_sampling_logprobs"] = qs
            meta["output_token_sampling_mask_length"] = len(out)
        return {"text": "", "output_ids": out, "meta_info": meta}

    @app.post("/update_weights_from_disk")
    async def from_disk(request: Request) -> Any:
        body = await request.json()
        bad = failure()
        if bad is not None:
            return bad
        state.loaded_paths.append(body["model_path"])
        state.weight_version = body.get("weight_version") or state.weight_version
        return {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}

    @app.post("/init_weights_update_group")
    async def init_group(request: Request) -> Any:
        state.groups.append(await request.json())
        return {"success": True, "message": "Succeeded to initialize custom process group."}

    @app.post("/update_weights_from_distributed")
    async def from_dist(request: Request) -> Any:
        body = await request.json()
        if not (len(body["names"]) == len(body["dtypes"]) == len(body["shapes"])):
            return {"success": False, "message": "names, dtypes and shapes differ in length"}
        state.weight_version = body.get("weight_version") or state.weight_version
        return {"success": True, "message": "Succeeded to update parameter online."}

    @app.get("/health")
    async def health() -> Any:
        return JSONResponse({}, status_code=200 if state.healthy else 503)

    @app.get("/get_server_info")
    async def server_info() -> Any:
        return {"weight_version": state.weight_version, "version": "0.5.20-double"}

    return app


class Served:
    """uvicorn serving `make_app(state)` on 127.0.0.1 in a thread, for a `with` block."""

    def __init__(self, state: State | None = None) -> None:
        self.state = state or State()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(make_app(self.state), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "Served":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the SGLang double did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)
