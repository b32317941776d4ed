"""`SGLangSampler`: the `Sampler` protocol over one SGLang server's native HTTP API.

Owns the request and answer shapes of `/generate`, the mapping of HTTP failures onto the sampler
errors the router retries on, health, and weight updates (`/update_weights_from_disk`, and from a
distributed group: `/init_weights_update_group` + `/update_weights_from_distributed`). Does not
cover launching servers (`patchgym.rl.deploy.launch`), routing across replicas (the fleet's
`Router` retries a retryable error on another replica), or encoding weights (`patchgym.rl.views`).

Shapes, checked against SGLang's code (`entrypoints/http_server.py`, `managers/io_struct.py`, the
sampling-mask test of 0.5.20) rather than taken from rl-fleet.md alone:

* request: `input_ids`, `sampling_params` {temperature, top_p, top_k (-1 = all), max_new_tokens,
  stop, stop_token_ids, ignore_eos, sampling_seed}, `return_logprob`, `top_logprobs_num`,
  `logprob_start_len` = -1, `return_sampling_mask`.
* answer: `output_ids`; `meta_info.output_token_logprobs` = [[logprob, id, text], ...] of the
  tempered *full* distribution (before top-k/top-p); `output_top_logprobs` the same per position
  for the k largest; `output_token_sampling_mask` = per position the support ids;
  `output_token_sampling_logprobs` = per position log q of the sampled id renormalised over that
  support (a scalar in SGLang 0.5.20; a list aligned with the mask in some forks, both accepted);
  `finish_reason` {type: stop|length|abort, ...}; `weight_version`; prompt/completion/cached tokens.
* where rl-fleet.md is wrong or silent: `weight_version` is a *string* (`Optional[str]`, server
  default "default"), so the client sends `str(version)` and parses it back (the launch arguments
  set `--weight-version 0`); the native API has no minimum-version field, so `min_version` is
  checked on the answer (an older `weight_version` raises `VersionBehind`, as a 409 from a router
  in front would) and only sent as `min_weight_version` when `send_min_version=True` (a router or
  fork that honours it); a sampling mask over an untruncated distribution (top_p = 1, top_k = -1)
  is refused by the server with a 400, and a support over `--sampling-mask-max-tokens` too.

The log q reported (`Generation.logprobs`) is always of the distribution sampled from: with
top-k/top-p on, the client asks for the sampling mask even when the caller did not ask for the
support (only the mask's renormalised log q is q); with neither, `output_token_logprobs` is q.
`support_logprobs`: the server's list when it returns one (a fork's form); else (SGLang 0.5.20, log
q of the sampled id only) rebuilt from the full distribution's top log-probs, asked for up to the
support's bound (top_k, else the mask limit), renormalised over the support.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Mapping

import httpx

from patchgym.rl.sampler.types import (
    Generation,
    SamplerError,
    SamplerHealth,
    SamplerOverloaded,
    SamplerUnavailable,
    SamplingParams,
    VersionBehind,
)

FINISH = {"stop": "stop", "length": "length", "abort": "abort"}


class SGLangProtocolError(SamplerError):
    """The server answered something that is not SGLang's documented shape (not retryable)."""


class SGLangRequestRefused(SamplerError):
    """The server refused the request as invalid (HTTP 400/422); another replica would too."""


def parse_version(value: Any, *, default: int = 0) -> int:
    """SGLang's `weight_version` (a string; "default" before any update) as an int."""
    if value is None or value == "default":
        return default
    if isinstance(value, bool):
        raise SGLangProtocolError(f"weight_version {value!r} is not a version")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise SGLangProtocolError(f"weight_version {value!r} is not an integer version (patchgym stamps integers)")


def truncates(params: SamplingParams) -> bool:
    return params.top_p < 1.0 or params.top_k != -1


def top_logprobs_num(params: SamplingParams) -> int:
    """How many top log-probs to ask for. With `return_support`, enough to cover the support
    (top_k, else the mask limit): SGLang 0.5.20 returns log q of the sampled id only, so log q over
    the support is rebuilt from the full distribution's head (`support_logprobs_from_top`)."""
    if not params.return_support:
        return params.top_logprobs
    bound = params.top_k if params.top_k != -1 else params.support_max_tokens
    return max(params.top_logprobs, bound)


def support_logprobs_from_top(support: list[int], top: dict[int, float], pos: int) -> list[float]:
    """log q over a support: the full log-probs of its ids renormalised over it."""
    try:
        lps = [top[t] for t in support]
    except KeyError as exc:
        raise SGLangProtocolError(f"token {pos}: support id {exc.args[0]} is not among the returned top log-probs") from None
    m = max(lps)
    z = m + math.log(sum(math.exp(v - m) for v in lps))
    return [v - z for v in lps]


def request_body(prompt_ids: list[int], params: SamplingParams, *, min_version: int | None = None,
                 send_min_version: bool = False) -> dict[str, Any]:
    """The `/generate` body for one prompt (token ids in, never text)."""
    if not isinstance(prompt_ids, list) or not prompt_ids or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt_ids):
        raise ValueError("prompt_ids must be a non-empty list of non-negative token ids")
    if params.return_support and not truncates(params):
        raise ValueError("SGLang returns no sampling mask for an untruncated distribution (it answers 400): "
                         "use top_p < 1 or top_k >= 1 with return_support, or return_support=False")
    sp: dict[str, Any] = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "max_new_tokens": params.max_new_tokens,
        "ignore_eos": params.ignore_eos,
    }
    if params.stop:
        sp["stop"] = list(params.stop)
    if params.stop_token_ids:
        sp["stop_token_ids"] = list(params.stop_token_ids)
    if params.seed is not None:
        sp["sampling_seed"] = params.seed
    body: dict[str, Any] = {
        "input_ids": list(prompt_ids),
        "sampling_params": sp,
        "return_logprob": True,
        "logprob_start_len": -1,
        "top_logprobs_num": top_logprobs_num(params),
        # why: with top-k/top-p on, only the mask's log q is of the distribution actually sampled
        "return_sampling_mask": truncates(params),
    }
    if min_version is not None and send_min_version:
        body["min_weight_version"] = str(min_version)
    return body


def _triples(value: Any, n: int, what: str) -> list[tuple[float, int]]:
    if not isinstance(value, list) or len(value) != n:
        raise SGLangProtocolError(f"meta_info.{what} has {len(value) if isinstance(value, list) else type(value).__name__} entries for {n} tokens")
    out = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) < 2:
            raise SGLangProtocolError(f"meta_info.{what} item {item!r} is not [logprob, token_id, text]")
        out.append((float(item[0]), int(item[1])))
    return out


def parse_answer(data: Any, params: SamplingParams, *, group: str, replica: str,
                 default_version: int = 0) -> Generation:
    """A `/generate` answer (one prompt) as a `Generation`; anything off-shape is SGLangProtocolError."""
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("meta_info"), dict):
        raise SGLangProtocolError(f"/generate answered {type(data).__name__} without meta_info")
    meta = data["meta_info"]
    full = meta.get("output_token_logprobs")
    ids = data.get("output_ids")
    if ids is None:
        if not isinstance(full, list):
            raise SGLangProtocolError("/generate answered neither output_ids nor output_token_logprobs")
        ids = [int(item[1]) for item in full]
    if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
        raise SGLangProtocolError("output_ids is not a list of token ids")
    n = len(ids)
    full_pairs = _triples(full, n, "output_token_logprobs")
    if [t for _, t in full_pairs] != ids:
        raise SGLangProtocolError("meta_info.output_token_logprobs names other ids than output_ids")
    support_ids = support_lp = None
    if truncates(params):
        masks = meta.get("output_token_sampling_mask")
        qs = meta.get("output_token_sampling_logprobs")
        if not isinstance(masks, list) or not isinstance(qs, list) or len(masks) != n or len(qs) != n:
            raise SGLangProtocolError(f"the answer lacks a sampling mask and its log q for {n} tokens "
                                      "(is the server older than SGLang 0.5.20 / without return_sampling_mask?)")
        logprobs, support_ids, lists = [], [], []
        for pos, (tok, mask, q) in enumerate(zip(ids, masks, qs)):
            mask = [int(t) for t in mask]
            if tok not in mask:
                raise SGLangProtocolError(f"token {pos} (id {tok}) is not in its sampling mask")
            if isinstance(q, list):  # a fork's form: log q over the whole support, aligned with the mask
                if len(q) != len(mask):
                    raise SGLangProtocolError(f"token {pos}: {len(q)} support log-probs for {len(mask)} ids")
                lists.append([float(v) for v in q])
                q = q[mask.index(tok)]
            logprobs.append(float(q))
            support_ids.append(mask)
        support_lp = lists if len(lists) == n and n else None
    else:
        logprobs = [lp for lp, _ in full_pairs]
    if any(not math.isfinite(lp) or lp > 1e-6 for lp in logprobs):
        raise SGLangProtocolError("a reported log q is not a finite log-probability")
    topk_ids = topk_lp = None
    if top_logprobs_num(params):
        top = meta.get("output_top_logprobs")
        if not isinstance(top, list) or len(top) != n:
            raise SGLangProtocolError(f"meta_info.output_top_logprobs missing or not {n} long")
        topk_ids, topk_lp = [], []
        for row in top:
            pairs = _triples(row, len(row) if isinstance(row, list) else -1, "output_top_logprobs[]")
            topk_lp.append([lp for lp, _ in pairs])
            topk_ids.append([t for _, t in pairs])
        if params.return_support and support_lp is None:
            support_lp = [support_logprobs_from_top(sup, dict(zip(ids_, lps)), pos)
                          for pos, (sup, ids_, lps) in enumerate(zip(support_ids, topk_ids, topk_lp))]
        k = params.top_logprobs
        topk_ids, topk_lp = ([r[:k] for r in topk_ids], [r[:k] for r in topk_lp]) if k else (None, None)
    if not params.return_support:
        support_ids = support_lp = None
    finish = meta.get("finish_reason")
    kind = finish.get("type") if isinstance(finish, dict) else finish
    version = parse_version(meta.get("weight_version"), default=default_version)
    return Generation(
        token_ids=list(ids), logprobs=logprobs, weight_version=version, group=group,
        finish_reason=FINISH.get(str(kind), "abort"),  # type: ignore[arg-type]
        support_ids=support_ids, support_logprobs=support_lp, topk_ids=topk_ids, topk_logprobs=topk_lp,
        replica=replica, prompt_tokens=int(meta.get("prompt_tokens") or 0),
        cached_tokens=int(meta.get("cached_tokens") or 0), busy_s=float(meta.get("e2e_latency") or 0.0),
        extra={"finish": finish} if isinstance(finish, dict) and finish.get("message") else {},
    )


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        return str(body.get("message") or body.get("error") or body.get("detail") or body)[:300]
    return str(body)[:300]


class SGLangSampler:
    """One SGLang server (a replica of `group`), driven by token ids over its native HTTP API.

    `client`: an `httpx.AsyncClient` to share (else one is made per sampler, closed by `aclose`).
    `view_root` / `server_view_root`: where weight views live here and as the server sees them (a
    Modal volume mounts them elsewhere); `update_weights(path)` translates one into the other.
    `publish` / `view`: a shared publisher and the view this group loads (default: by its formats).
    """

    def __init__(self, base_url: str, group: Any, *, replica: str | None = None, client: httpx.AsyncClient | None = None,
                 timeout: float = 600.0, send_min_version: bool = False, api_key: str | None = None,
                 view_root: str | None = None, server_view_root: str | None = None, version: int = 0,
                 publish: Any = None, view: str | None = None) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.group = group.name
        self.group_config = group
        self.replica = replica if replica is not None else self.base_url
        self.capacity = int(group.sessions_per_replica)
        self.timeout = float(timeout)
        self.send_min_version = send_min_version
        self.view_root, self.server_view_root = view_root, server_view_root
        self.version = int(version)
        self.publish = publish  # a viewpull.SharedPublish: state dicts become view folders
        if view is None:
            from patchgym.rl.deploy.launch import view_for_group

            view = view_for_group(group)[0]
        self.view = view
        self._own_client = client is None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=10.0), headers=headers)
        self._active = 0
        self._ok = True
        self._detail = ""
        self.busy_s = 0.0  # seconds with at least one request in flight (closed spans)
        self._busy_since = 0.0

    # --- HTTP --------------------------------------------------------------------------------------

    async def _post(self, path: str, body: Mapping[str, Any], *, timeout: float | None = None, want: int | None = None) -> Any:
        url = self.base_url + path
        try:
            response = await self._client.post(url, json=dict(body), timeout=timeout or self.timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            self._ok, self._detail = False, f"{type(exc).__name__}: {exc}"
            raise SamplerUnavailable(f"{self.group}/{self.replica}: {url} is unreachable ({type(exc).__name__})") from None
        except httpx.TimeoutException:
            raise SamplerUnavailable(f"{self.group}/{self.replica}: {url} did not answer within {timeout or self.timeout:.0f} s") from None
        status = response.status_code
        if status == 409:
            have = self.version
            try:
                have = parse_version(response.json().get("weight_version"), default=have)
            except (ValueError, AttributeError, SGLangProtocolError):
                pass
            raise VersionBehind(have, want if want is not None else have + 1)
        if status in (429, 503):
            raise SamplerOverloaded(f"{self.group}/{self.replica}: {path} answered {status} ({_message(response)})")
        if status >= 500:
            self._detail = f"{path} answered {status}"
            raise SamplerUnavailable(f"{self.group}/{self.replica}: {path} answered {status} ({_message(response)})")
        if status >= 400:
            raise SGLangRequestRefused(f"{self.group}/{self.replica}: {path} refused the request with {status}: {_message(response)}")
        self._ok, self._detail = True, ""
        try:
            return response.json()
        except ValueError:
            raise SGLangProtocolError(f"{self.group}/{self.replica}: {path} answered {status} with a body that is not JSON") from None

    def busy_now(self) -> float:
        """Busy seconds so far, the span still open included."""
        return self.busy_s + (time.monotonic() - self._busy_since if self._active else 0.0)

    # --- the Sampler protocol ----------------------------------------------------------------------

    async def generate(self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None,
                       min_version: int | None = None) -> Generation:
        body = request_body(prompt_ids, params, min_version=min_version, send_min_version=self.send_min_version)
        if self._active == 0:
            self._busy_since = time.monotonic()
        self._active += 1
        try:
            data = await self._post("/generate", body, want=min_version)
        finally:
            self._active -= 1
            if self._active == 0:  # busy = the union of the requests' spans, not their sum
                self.busy_s += time.monotonic() - self._busy_since
        gen = parse_answer(data, params, group=self.group, replica=self.replica, default_version=self.version)
        self.version = max(self.version, gen.weight_version)
        if min_version is not None and gen.weight_version < min_version:
            raise VersionBehind(gen.weight_version, min_version)
        if gen.finish_reason == "abort" and not gen.token_ids:
            detail = gen.extra.get("finish", {}).get("message", "")
            raise SGLangRequestRefused(f"{self.group}/{self.replica}: the server aborted the request {detail}".strip())
        if session_id is not None:
            gen.extra.setdefault("session_id", session_id)
        return gen

    async def update_weights(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> None:
        """Point the server at a weight view directory (`/update_weights_from_disk`, stamped `version`).

        A mapping of tensors cannot travel over this API: it is published as a view first when the
        sampler has `publish` (a `viewpull.SharedPublish`, one for the fleet), else refused."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"version must be an integer >= 0, got {version!r}")
        if isinstance(state_dict_or_path, Mapping) and self.group_config.weights in ("nvfp4", "nvfp4_4over6"):
            raise TypeError(f"{self.group}/{self.replica}: an NVFP4 group on SGLang loads ModelOpt checkpoints; "
                            "patchgym does not export one per version yet: pass the folder of one")
        if isinstance(state_dict_or_path, Mapping) and self.publish is not None:
            state_dict_or_path = str(await asyncio.to_thread(self.publish.folder, state_dict_or_path, version, self.view))
        if isinstance(state_dict_or_path, Mapping):
            raise TypeError(f"{self.group}/{self.replica}: an SGLang server loads weights from a directory it can read; "
                            "publish the state dict as a view (patchgym.rl.views) and pass its version folder")
        path = str(state_dict_or_path)
        if self.view_root and self.server_view_root and path.startswith(self.view_root):
            path = self.server_view_root.rstrip("/") + path[len(self.view_root.rstrip("/")):]
        data = await self._post("/update_weights_from_disk",
                                {"model_path": path, "weight_version": str(version), "flush_cache": True})
        self._check_success(data, "/update_weights_from_disk")
        self.version = version

    async def init_weights_update_group(self, master_address: str, master_port: int, rank_offset: int, world_size: int,
                                        *, group_name: str = "weight_update_group", backend: str = "nccl") -> None:
        """Join the trainer's NCCL group (the trainer is rank 0, servers from `rank_offset`)."""
        data = await self._post("/init_weights_update_group", {
            "master_address": master_address, "master_port": int(master_port), "rank_offset": int(rank_offset),
            "world_size": int(world_size), "group_name": group_name, "backend": backend})
        self._check_success(data, "/init_weights_update_group")

    async def update_weights_from_distributed(self, names: list[str], dtypes: list[str], shapes: list[list[int]],
                                              version: int, *, group_name: str = "weight_update_group") -> None:
        """Receive tensors broadcast by the trainer in that order (the trainer broadcasts concurrently)."""
        if not (len(names) == len(dtypes) == len(shapes)) or not names:
            raise ValueError(f"names, dtypes and shapes must be equally long and non-empty ({len(names)}, {len(dtypes)}, {len(shapes)})")
        data = await self._post("/update_weights_from_distributed", {
            "names": list(names), "dtypes": [str(d).removeprefix("torch.") for d in dtypes],
            "shapes": [list(map(int, s)) for s in shapes], "group_name": group_name,
            "weight_version": str(version), "flush_cache": True})
        self._check_success(data, "/update_weights_from_distributed")
        self.version = version

    def _check_success(self, data: Any, path: str) -> None:
        if not isinstance(data, dict) or "success" not in data:
            raise SGLangProtocolError(f"{self.group}/{self.replica}: {path} answered {data!r}, not {{success, message}}")
        if not data["success"]:
            raise SamplerError(f"{self.group}/{self.replica}: {path} failed: {data.get('message', '')}")

    async def check_health(self) -> SamplerHealth:
        """GET /health (200 = it can generate), then /get_server_info's weight_version when it has one."""
        try:
            response = await self._client.get(self.base_url + "/health", timeout=30.0)
            self._ok = response.status_code == 200
            self._detail = "" if self._ok else f"/health answered {response.status_code}"
        except httpx.HTTPError as exc:
            self._ok, self._detail = False, f"/health: {type(exc).__name__}"
        if self._ok:
            try:
                info = (await self._client.get(self.base_url + "/get_server_info", timeout=30.0)).json()
                self.version = max(self.version, parse_version(info.get("weight_version"), default=self.version))
            except (httpx.HTTPError, ValueError, AttributeError, SGLangProtocolError):
                pass
        return self.health()

    def health(self) -> SamplerHealth:
        return SamplerHealth(ok=self._ok, group=self.group, replica=self.replica, weight_version=self.version,
                             active_sessions=self._active, capacity=self.capacity, busy_s=self.busy_now(), detail=self._detail)

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    def close(self) -> None:
        if self._own_client:
            try:
                asyncio.get_running_loop().create_task(self._client.aclose())
            except RuntimeError:
                asyncio.run(self._client.aclose())


def build_sglang_samplers(group: Any, *, views_root: str | None = None, **options: Any) -> list[SGLangSampler]:
    """One `SGLangSampler` per endpoint of a `backend = "sglang"` group (replica = its index).

    Unless `publish` is given, the replicas share the process's `viewpull.shared_publish` over
    `views_root` (default $PATCHGYM_HOME/views), so the loop's state dicts become view folders; the
    servers must see that folder at the same path (or pass `server_view_root`)."""
    if not group.endpoints:
        raise ValueError(f"group {group.name!r}: backend 'sglang' needs `endpoints` (one base URL per replica); "
                         "deploy it first (patchgym fleet deploy FLEET --modal) or list running servers")
    if options.get("publish") is None:
        from patchgym.rl.models import patchgym_home
        from patchgym.rl.sampler.viewpull import shared_publish

        root = views_root or str(patchgym_home() / "views")
        options["publish"] = shared_publish(root)
        options.setdefault("view_root", root)
    return [SGLangSampler(url, group, replica=str(i), **options) for i, url in enumerate(group.endpoints)]
