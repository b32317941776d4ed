"""The HTTP service in process (real app, real sandboxes, real grader): routes, auth, capacity,
reaping, shutdown, the episode log, and hostile requests that must get a 4xx, never a 500."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchgym.env.client import AsyncEnvClient, EnvBusy, EnvClient, EnvError, InProcessTransport
from patchgym.env.config import ServerConfig
from patchgym.env.episode_log import read_episode_log
from patchgym.env.server import create_app
from patchgym.env.testing import (
    GOLD_PATCH,
    prepare_toy_task,
    sandbox_unavailable_reason,
    toy_fix_calls,
    toy_wrong_fix_calls,
)

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")
TOKEN = "test-token-7f3a"
TASK = "toy__calc-1"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory):
    return prepare_toy_task(tmp_path_factory.mktemp("toy"))


@pytest.fixture()
def factory():
    from patchgym.harness.sandbox.base import get_factory

    made = get_factory("local")
    yield made
    made.close_all()


@pytest.fixture()
def served(prepared, factory, tmp_path: Path):
    """(client, raw httpx client, app, episode log path) over one in-process app."""
    log_path = tmp_path / "episodes.jsonl"
    config = ServerConfig(token=TOKEN, max_episodes=3, episode_log=str(log_path), max_body_bytes=64 * 1024,
                          max_patch_bytes=8 * 1024)
    app = create_app([prepared], config, factory=factory)
    transport = InProcessTransport(app)
    client = EnvClient("http://in-process", token=TOKEN, transport=transport)
    raw = httpx.Client(base_url="http://in-process", transport=transport,
                       headers={"Authorization": f"Bearer {TOKEN}"})
    yield client, raw, app, log_path
    raw.close()
    client.close()


# --- routes --------------------------------------------------------------------------------------
def test_health_and_tasks_show_nothing_hidden(served) -> None:
    client, raw, _, _ = served
    assert client.health().status == "ok"
    tasks = client.tasks()
    assert [t.instance_id for t in tasks] == [TASK]
    body = raw.get("/tasks").text
    assert "return a + b" not in body and "test_add" not in body and "FAIL_TO_PASS" not in body


def test_whole_episode_fix_gets_reward_1_and_is_logged(served) -> None:
    client, _, _, log_path = served
    started = client.start_episode(TASK)
    assert [m["role"] for m in started.messages] == ["system", "user"]
    assert {t["function"]["name"] for t in started.tools} == {"bash", "str_replace_editor", "submit"}
    viewed = client.step(started.episode_id, tool_calls=[
        {"name": "str_replace_editor", "arguments": {"command": "view", "path": "calc.py"}}])
    assert "return a - b" in viewed.messages[0]["content"] and not viewed.done
    result = client.step(started.episode_id, tool_calls=toy_fix_calls())
    assert result.done and result.status == "submitted" and result.reward == 1.0
    state = client.get_episode(started.episode_id)
    assert state.status == "submitted" and state.turns == 2 and state.verdict["status"] == "resolved"
    assert state.transcript[2]["role"] == "assistant"
    records = read_episode_log(log_path)
    assert len(records) == 1
    record = records[0]
    assert record["task_id"] == TASK and record["reward"] == 1.0 and "+    return a + b" in record["diff"]
    assert record["verdict"]["status"] == "resolved" and len(record["transcript"]) == len(state.transcript)


def test_text_steps_use_the_parser(served) -> None:
    client, _, _, _ = served
    started = client.start_episode(TASK, parser="hermes")
    text = 'Let me run it.\n<tool_call>{"name": "bash", "arguments": {"command": "echo hi"}}</tool_call>'
    result = client.step(started.episode_id, text=text)
    assert result.messages[0]["content"].startswith("hi")
    openai = json.dumps([{"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}])
    wrong_parser = client.step(started.episode_id, text=openai)
    assert "Format error" in wrong_parser.messages[0]["content"]
    client.delete_episode(started.episode_id)


def test_openai_shaped_structured_calls_and_bad_argument_json_is_a_format_error(served) -> None:
    client, _, _, _ = served
    started = client.start_episode(TASK)
    ok = client.step(started.episode_id, tool_calls=[
        {"id": "call_9", "type": "function", "function": {"name": "bash", "arguments": '{"command": "echo yo"}'}}])
    assert ok.messages[0]["tool_call_id"] == "call_9" and ok.messages[0]["content"].startswith("yo")
    bad = client.step(started.episode_id, tool_calls=[
        {"type": "function", "function": {"name": "bash", "arguments": '{"command": '}}])
    assert "not valid JSON" in bad.messages[0]["content"] and bad.format_errors_in_a_row == 1
    client.delete_episode(started.episode_id)


def test_delete_returns_the_final_state_then_the_episode_is_gone(served) -> None:
    client, raw, _, log_path = served
    started = client.start_episode(TASK)
    sandbox = served[2].state.manager.get(started.episode_id).sandbox
    closed = client.delete_episode(started.episode_id)
    assert closed.status == "closed" and closed.reward == 0.0 and len(closed.transcript) >= 2
    assert sandbox.closed
    for call in (lambda: client.delete_episode(started.episode_id), lambda: client.get_episode(started.episode_id),
                 lambda: client.step(started.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "ls"}}])):
        with pytest.raises(EnvError) as caught:
            call()
        assert caught.value.status_code == 404 and "unknown episode" in caught.value.message
    assert [r["status"] for r in read_episode_log(log_path)] == ["closed"]


def test_step_on_a_finished_episode_is_a_conflict(served) -> None:
    client, _, _, _ = served
    started = client.start_episode(TASK)
    client.step(started.episode_id, tool_calls=[{"name": "submit", "arguments": {}}])
    with pytest.raises(EnvError) as caught:
        client.step(started.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "ls"}}])
    assert caught.value.status_code == 409 and "has ended (submitted)" in caught.value.message
    assert client.get_episode(started.episode_id).status == "submitted"


def test_grade_route(served) -> None:
    client, raw, _, _ = served
    assert client.grade(TASK, GOLD_PATCH)["reward"] == 1.0
    garbage = client.grade(TASK, "this is not a diff")
    assert garbage["reward"] == 0.0 and garbage["status"] in {"patch_error", "empty_patch"}
    too_big = raw.post("/grade", json={"task_id": TASK, "patch": "x" * 9000})
    assert too_big.status_code == 413 and "larger than" in too_big.json()["error"]
    unknown = raw.post("/grade", json={"task_id": "nope", "patch": GOLD_PATCH})
    assert unknown.status_code == 404 and "unknown task_id 'nope'" in unknown.json()["error"]


# --- auth --------------------------------------------------------------------------------------------
def test_every_route_but_health_needs_the_token(served) -> None:
    _, raw, app, _ = served
    bare = httpx.Client(base_url="http://in-process", transport=raw._transport)
    assert bare.get("/health").status_code == 200
    for method, path in [("GET", "/tasks"), ("POST", "/episodes"), ("GET", "/episodes/x"), ("DELETE", "/episodes/x"),
                         ("POST", "/episodes/x/step"), ("POST", "/grade"), ("GET", "/openapi.json"), ("GET", "/episodes")]:
        # /docs is a static page (env/docs_ui.py), public like /health; what it loads needs the token
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}]:
            response = bare.request(method, path, headers=headers)
            assert response.status_code == 401, (method, path, headers)
            assert "bearer token" in response.json()["error"]
            assert response.headers["www-authenticate"] == "Bearer"
    assert raw.get("/openapi.json").status_code == 200


# --- capacity, reaping, shutdown --------------------------------------------------------------------
def test_full_server_answers_503_with_retry_after(served, factory) -> None:
    client, raw, _, _ = served
    ids = [client.start_episode(TASK).episode_id for _ in range(3)]
    response = raw.post("/episodes", json={"task_id": TASK})
    assert response.status_code == 503 and response.headers["retry-after"] == "5"
    assert "maximum of 3 episodes" in response.json()["error"]
    with pytest.raises(EnvBusy) as caught:
        client.start_episode(TASK)
    assert caught.value.retry_after_s == 5
    client.delete_episode(ids[0])
    ids.append(client.start_episode(TASK).episode_id)
    for episode_id in ids[1:]:
        client.delete_episode(episode_id)


def test_idle_episodes_are_reaped_with_their_sandboxes(prepared, factory, tmp_path: Path) -> None:
    config = ServerConfig(idle_ttl_s=0.5, reap_interval_s=0.1, episode_log=str(tmp_path / "log.jsonl"))
    app = create_app([prepared], config, factory=factory)
    with EnvClient.in_process(app) as client:
        started = client.start_episode(TASK)
        sandbox = app.state.manager.get(started.episode_id).sandbox
        deadline = time.monotonic() + 10
        while client.get_episode(started.episode_id).status == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        state = client.get_episode(started.episode_id)
        assert state.status == "closed" and "idle" in state.end_reason
        assert sandbox.closed
    assert read_episode_log(tmp_path / "log.jsonl")[0]["status"] == "closed"


def test_shutdown_closes_every_sandbox_and_logs_every_episode(prepared, factory, tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    app = create_app([prepared], ServerConfig(episode_log=str(log_path)), factory=factory)
    client = EnvClient.in_process(app)
    ids = [client.start_episode(TASK).episode_id for _ in range(3)]
    sandboxes = [app.state.manager.get(i).sandbox for i in ids]
    assert not any(s.closed for s in sandboxes)
    client.close()
    assert all(s.closed for s in sandboxes)
    records = read_episode_log(log_path)
    assert sorted(r["episode_id"] for r in records) == sorted(ids)
    assert {r["status"] for r in records} == {"closed"}


def test_async_client_in_process_runs_a_wrong_fix(prepared, factory) -> None:
    async def main() -> None:
        app = create_app([prepared], ServerConfig(), factory=factory)
        async with AsyncEnvClient.in_process(app) as client:
            assert (await client.health()).tasks == 1
            started = await client.start_episode(TASK)
            result = await client.step(started.episode_id, tool_calls=toy_wrong_fix_calls())
            assert result.status == "submitted" and result.reward == 0.0
            assert (await client.get_episode(started.episode_id)).verdict["status"] == "unresolved"

    asyncio.run(main())


# --- hostile requests ----------------------------------------------------------------------------------
HOSTILE = [
    ("POST", "/episodes", b"not json", 422, "not valid JSON"),
    ("POST", "/episodes", b"{}", 422, "task_id: is required but missing"),
    ("POST", "/episodes", b'{"task_id": "nope"}', 404, "unknown task_id 'nope'"),
    ("POST", "/episodes", b'{"task_id": 5}', 422, "task_id"),
    ("POST", "/episodes", b'{"task_id": "toy__calc-1", "evil": 1}', 422, "evil: is not a known field"),
    ("POST", "/episodes", b'{"task_id": "toy__calc-1", "limits": {"max_turns": 100000}}', 422, "max_turns"),
    ("POST", "/episodes", b'{"task_id": "toy__calc-1", "limits": {"max_turns": 501}}', 422, "ceiling 500"),
    ("POST", "/episodes", b'{"task_id": "toy__calc-1", "parser": "xml"}', 422, "unknown tool-call parser"),
    ("POST", "/episodes", b"[" * 50_000, 4, ""),
    ("POST", "/episodes", b'{"task_id": "\\ud800"}', 422, "unicode"),
    ("POST", "/episodes", b'{"task_id": "toy__calc-1", "limits": {"wall_time_s": NaN}}', 422, "wall_time_s"),
    ("POST", "/episodes/nope/step", b'{"text": "x"}', 404, "unknown episode 'nope'"),
    ("GET", "/episodes/nope", b"", 404, "unknown episode"),
    ("DELETE", "/episodes/nope", b"", 404, "unknown episode"),
    ("PUT", "/episodes", b"{}", 405, "method PUT not allowed on this route; allowed: GET, POST"),
    ("PATCH", "/episodes/x", b"{}", 405, "allowed: DELETE, GET"),
    ("GET", "/nowhere", b"", 404, "no such route"),
    ("POST", "/grade", b'{"task_id": "toy__calc-1"}', 422, "patch: is required but missing"),
    ("POST", "/grade", b"x" * 70_000, 413, "larger than"),
]


@pytest.mark.parametrize("method, path, body, status, message", HOSTILE)
def test_hostile_requests_get_a_4xx_with_a_message(served, method, path, body, status, message) -> None:
    _, raw, _, _ = served
    response = raw.request(method, path, content=body, headers={"Content-Type": "application/json"})
    if status == 4:
        assert 400 <= response.status_code < 500
    else:
        assert response.status_code == status, response.text
    assert message in response.json()["error"]


def test_hostile_steps_on_a_live_episode(served) -> None:
    client, raw, _, _ = served
    episode_id = client.start_episode(TASK).episode_id
    path = f"/episodes/{episode_id}/step"
    for body, status, message in [
        ({}, 422, "exactly one of 'tool_calls'"),
        ({"text": "x", "tool_calls": []}, 422, "exactly one of"),
        ({"tool_calls": "bash"}, 422, "tool_calls"),
        ({"tool_calls": [{"arguments": {}}]}, 422, "name: is required but missing"),
        ({"tool_calls": [{"type": "function", "function": "bash"}]}, 422, "function: Input should be a valid dict"),
        ({"tool_calls": [{"type": "code", "function": {"name": "bash"}}]}, 422, "'function'"),
        ({"tool_calls": None}, 422, "tool_calls"),
        ({"tool_calls": [{"name": "x", "arguments": {}}] * 1001}, 422, "tool_calls"),
        ({"text": "x" * (5 * 1024 * 1024)}, 413, "larger than"),
    ]:
        response = raw.post(path, json=body)
        assert response.status_code == status, (body if len(str(body)) < 200 else "big", response.text)
        assert message in response.json()["error"]
    # Odd but well-formed content is the agent's business: answered 200, with a format error or a result.
    surrogate = raw.post(path, content=b'{"tool_calls": [{"name": "bash", "arguments": {"command": "echo \\ud800"}}]}',
                         headers={"Content-Type": "application/json"})
    assert surrogate.status_code == 200, surrogate.text
    assert surrogate.json()["messages"][0]["content"].startswith("\ufffd")
    surrogate_text = raw.post(path, content=b'{"text": "\\udfff"}', headers={"Content-Type": "application/json"})
    assert surrogate_text.status_code == 422 and "unicode" in surrogate_text.json()["error"]
    nan_args = raw.post(path, content=b'{"tool_calls": [{"name": "bash", "arguments": {"command": "true", '
                                      b'"timeout": NaN}}]}', headers={"Content-Type": "application/json"})
    assert nan_args.status_code == 200  # NaN arrives as null: no timeout given, the default applies
    assert nan_args.json()["messages"][0]["content"].endswith("[exit code 0]")
    nul = raw.post(path, json={"tool_calls": [{"name": "str_replace_editor",
                                               "arguments": {"command": "view", "path": "a\u0000b"}}]})
    assert nul.status_code == 200 and "NUL" in nul.json()["messages"][0]["content"]
    state = raw.get(f"/episodes/{episode_id}")
    assert state.status_code == 200 and state.json()["status"] == "running"
    client.delete_episode(episode_id)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(["task_id", "limits", "parser", "tool_calls", "text", "patch", "name", "arguments"])
bodies = st.one_of(json_values, st.dictionaries(field_names, json_values, max_size=4))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, route=st.sampled_from(["/episodes", "/episodes/{live}/step", "/episodes/nope/step", "/grade"]))
def test_fuzzed_bodies_never_get_a_5xx(served, body, route) -> None:
    client, raw, app, _ = served
    manager = app.state.manager
    live = next(iter(manager._live), None)
    if live is None:
        live = client.start_episode(TASK, limits={"max_format_errors": 100}).episode_id
    response = raw.post(route.format(live=live), json=body)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["error"]
    if route == "/episodes" and response.status_code == 201:
        client.delete_episode(response.json()["episode_id"])


@pytest.mark.slow
def test_client_waits_out_a_full_server_when_told_to(prepared, factory) -> None:
    import threading

    app = create_app([prepared], ServerConfig(max_episodes=1, retry_after_s=1), factory=factory)
    with EnvClient.in_process(app) as client:
        first = client.start_episode(TASK).episode_id
        freeing = threading.Timer(1.5, lambda: client.delete_episode(first))
        freeing.start()
        patient = EnvClient("http://in-process", transport=client._http._transport, busy_retries=5)
        began = time.monotonic()
        second = patient.start_episode(TASK)
        assert second.episode_id != first and time.monotonic() - began >= 1.0
        freeing.join()
        client.delete_episode(second.episode_id)


def test_in_process_client_built_from_a_task_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patchgym.env.testing import make_toy_task

    monkeypatch.setenv("PATCHGYM_HOME", str(tmp_path / "home"))
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(make_toy_task(tmp_path).model_dump_json() + "\n")
    with EnvClient.in_process(tasks=str(tasks_file), config=ServerConfig(max_episodes=2)) as client:
        assert client.health().max_episodes == 2
        started = client.start_episode(TASK)
        assert client.step(started.episode_id, tool_calls=toy_fix_calls()).reward == 1.0


def test_long_ids_are_not_echoed_whole(served) -> None:
    _, raw, _, _ = served
    response = raw.get("/episodes/" + "a" * 5000)
    assert response.status_code == 404 and len(response.json()["error"]) < 300


def test_finished_episodes_are_forgotten_beyond_the_kept_number(prepared, factory) -> None:
    app = create_app([prepared], ServerConfig(keep_finished=1), factory=factory)
    with EnvClient.in_process(app) as client:
        ids = []
        for _ in range(2):
            started = client.start_episode(TASK)
            client.step(started.episode_id, tool_calls=[{"name": "submit", "arguments": {}}])
            ids.append(started.episode_id)
        assert client.get_episode(ids[1]).status == "submitted"
        with pytest.raises(EnvError) as caught:
            client.get_episode(ids[0])
        assert caught.value.status_code == 404


def test_an_idle_episode_past_its_wall_time_ends_with_time_limit(prepared, factory) -> None:
    app = create_app([prepared], ServerConfig(reap_interval_s=0.1), factory=factory)
    with EnvClient.in_process(app) as client:
        started = client.start_episode(TASK, limits={"wall_time_s": 0.5})
        deadline = time.monotonic() + 10
        while client.get_episode(started.episode_id).status == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        state = client.get_episode(started.episode_id)
        assert (state.status, state.reward) == ("time_limit", 0.0)
        with pytest.raises(EnvError) as caught:
            client.step(started.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "true"}}])
        assert caught.value.status_code == 409 and "time_limit" in caught.value.message


def test_fastapi_telemetry_is_off_unless_asked_for(prepared, factory) -> None:
    quiet = create_app([prepared], ServerConfig(), factory=factory)
    loud = create_app([prepared], ServerConfig(telemetry=True), factory=factory)
    if not hasattr(quiet, "_telemetry"):
        pytest.skip("this FastAPI has no native telemetry")
    assert not any(quiet._telemetry[k] for k in ("tracing", "metrics", "logs", "operation_spans"))
    assert all(loud._telemetry[k] for k in ("tracing", "metrics", "logs", "operation_spans"))


def test_the_step_route_documents_its_body(served) -> None:
    """The step route reads its body itself (env/http.py json_body); the OpenAPI document must
    still describe it, with every schema it refers to."""
    _, raw, _, _ = served
    schema = raw.get("/openapi.json").json()
    body = schema["paths"]["/episodes/{episode_id}/step"]["post"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/StepRequest"}
    components = schema["components"]["schemas"]
    assert set(components["StepRequest"]["properties"]) == {"tool_calls", "text"}
    refs = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            refs.update(v.rsplit("/", 1)[-1] for k, v in node.items() if k == "$ref")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    assert refs <= set(components)
