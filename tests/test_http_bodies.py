"""Bad request bodies against the real server on loopback (`patchgym serve` in a child process):
every one is a 4xx naming what was wrong, none a 500, none a traceback in the server's log.

Fuzzed: deep nesting (in the body and in a tool call's arguments), huge integers (1e999 and NaN
are accepted and reach the arguments as null: test_serve_api holds that), invalid UTF-8, duplicate keys, and Content-Length headers that lie (longer and shorter than
the body, not a number), sent on raw sockets. Also here, because they need the same server: `GET
/episodes` finds a live episode, and `/docs` loads with no network (Swagger UI's files from the
installed package), public while /openapi.json still needs the token.
"""

from __future__ import annotations

import json
import random
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from patchgym.env.client import EnvClient
from patchgym.env.docs_ui import swagger_ui_dir
from patchgym.env.http import parse_json_body
from patchgym.env.testing import ServerProcess, make_toy_task, sandbox_unavailable_reason

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")
TOKEN = "bodies-token-5d1e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json", **AUTH}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("bodies")
    task = make_toy_task(workdir)
    (workdir / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    running = ServerProcess(["--tasks", str(workdir / "tasks.jsonl"), "--token", TOKEN, "--store", str(workdir / "store"),
                             "--episode-log", str(workdir / "episodes.jsonl")],
                            env={"PATCHGYM_HOME": str(workdir / "home")}, start_timeout_s=120)
    yield running
    running.stop()
    log = "".join(running.output)
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


def _deep(levels: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * levels + closer * levels


def _args(raw: bytes) -> bytes:
    return b'{"tool_calls":[{"name":"bash","arguments":{"command":' + raw + b"}}]}"


BAD_BODIES = {
    "nested 100000 deep": (_deep(100_000), "nested too deeply"),
    "nested 3000 deep": (_deep(3000, b'{"a":', b"}").replace(b"{\"a\":}", b"{\"a\":1}"), "nested too deeply"),
    "arguments nested 900 deep": (_args(_deep(900)), "nested more than 200 levels"),
    "a 10000-digit integer": (b'{"text": ' + b"9" * 10_000 + b"}", "4300-digit limit"),
    "invalid UTF-8": (b'{"text": "\xff\xfe abc"}', "not valid UTF-8"),
    "a lone continuation byte": (b'{"text": "\x80"}', "not valid UTF-8"),
    "duplicate keys": (b'{"text": "ls", "text": "rm -rf /"}', "the key 'text' twice"),
    "duplicate keys inside arguments": (b'{"tool_calls":[{"name":"bash","arguments":{"command":"a","command":"b"}}]}',
                                        "the key 'command' twice"),
    "truncated JSON": (b'{"text": "ls"', "not valid JSON"),
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_bad_bodies_are_4xx_that_say_what_was_wrong(server: ServerProcess, name: str) -> None:
    body, expected = BAD_BODIES[name]
    response = httpx.post(f"{server.url}/episodes/no-such-episode/step", content=body, headers=JSON, timeout=30)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert expected in response.json()["error"], response.text[:300]


def test_tool_call_errors_name_the_request_path_not_the_union_tag(server: ServerProcess) -> None:
    body = {"tool_calls": [{"name": "", "arguments": {}}]}
    response = httpx.post(f"{server.url}/episodes/x/step", json=body, headers=AUTH, timeout=30)
    assert response.status_code == 422
    error = response.json()["error"]
    assert "tool_calls.0.name" in error and "plain" not in error, error
    assert all("plain" not in item["loc"] for item in response.json()["detail"])


def test_random_bytes_never_give_a_5xx(server: ServerProcess) -> None:
    rng = random.Random(14)
    seeds = [b'{"text": "ls"}', b'{"tool_calls":[{"name":"bash","arguments":{"command":"ls"}}]}']
    with httpx.Client(base_url=server.url, headers=JSON, timeout=30) as client:
        for _ in range(150):
            body = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 6)):  # flip, insert or delete bytes
                at = rng.randrange(len(body) + 1)
                action = rng.random()
                if action < 0.4 and at < len(body):
                    body[at] = rng.randrange(256)
                elif action < 0.8:
                    body[at:at] = bytes([rng.choice(b'{}[]",:\\0e9-\xff\xc3')])
                elif at < len(body):
                    del body[at]
            response = client.post("/episodes/nope/step", content=bytes(body))
            assert response.status_code < 500, (bytes(body), response.text[:300])


def _raw_exchange(url: str, request: bytes, *, shut_write: bool = True, timeout_s: float = 10.0) -> bytes:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s) as sock:
        sock.sendall(request)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return received


def _statuses(raw: bytes) -> list[int]:
    return [int(line.split()[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


def _request(content_length: bytes, body: bytes) -> bytes:
    host = f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n".encode()
    return b"POST /episodes/nope/step HTTP/1.1\r\nHost: x\r\n" + host + b"Content-Length: " + content_length + b"\r\n\r\n" + body


@pytest.mark.parametrize("case", ["longer than the body", "shorter than the body", "not a number", "negative", "two different"])
def test_a_lying_content_length_gets_a_4xx_or_a_closed_connection(server: ServerProcess, case: str) -> None:
    body = b'{"text": "ls"}'
    request = {
        "longer than the body": _request(b"400", body),
        "shorter than the body": _request(b"5", body),
        "not a number": _request(b"12abc", body),
        "negative": _request(b"-1", body),
        "two different": _request(b"14\r\nContent-Length: 3", body),
    }[case]
    statuses = _statuses(_raw_exchange(server.url, request))
    assert all(400 <= status < 500 for status in statuses), statuses
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200  # the server is still fine


def test_list_episodes_finds_a_live_episode(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        assert client.get("/episodes", headers={"Authorization": "Bearer wrong"}).status_code == 401
        started = client.post("/episodes", json={"task_id": "toy__calc-1"})
        assert started.status_code == 201, started.text
        episode_id = started.json()["episode_id"]
        listed = client.get("/episodes").json()["episodes"]
        mine = [e for e in listed if e["episode_id"] == episode_id]
        assert mine and mine[0]["live"] is True and mine[0]["status"] == "running" and mine[0]["task_id"] == "toy__calc-1"
        assert "transcript" not in mine[0] and mine[0]["idle_s"] >= 0
        with EnvClient(server.url, token=TOKEN) as env:  # the sync client's twin of the route
            summaries = {e.episode_id: e for e in env.list_episodes()}
        assert summaries[episode_id].live and summaries[episode_id].task_id == "toy__calc-1"
        client.delete(f"/episodes/{episode_id}")
        assert episode_id not in {e["episode_id"] for e in client.get("/episodes").json()["episodes"]}


@pytest.mark.skipif(swagger_ui_dir() is None, reason="swagger-ui-bundle is not installed")
def test_docs_load_offline_and_openapi_still_needs_the_token(server: ServerProcess) -> None:
    page = httpx.get(f"{server.url}/docs", timeout=10)  # no token: the page is static and public
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "cdn" not in page.text.lower() and "http" not in page.text.split("<body>")[1].split("</script>")[0]
    assert "#token=" not in page.text and 'fragment.get("token")' in page.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        served = httpx.get(f"{server.url}/docs/assets/{asset}", timeout=10)
        assert served.status_code == 200 and len(served.content) > 10_000
        assert served.content == (swagger_ui_dir() / asset).read_bytes()
    assert httpx.get(f"{server.url}/openapi.json", timeout=10).status_code == 401
    document = httpx.get(f"{server.url}/openapi.json", headers=AUTH, timeout=10).json()
    assert "/episodes" in document["paths"] and "get" in document["paths"]["/episodes"]
    assert httpx.get(f"{server.url}/docs/assets/../openapi.json", timeout=10).status_code in (401, 404)


def test_parse_json_body_units() -> None:
    assert parse_json_body(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    assert parse_json_body('{"a": "é"}'.encode("utf-16")) == {"a": "é"}  # as json.loads: UTF-16 with a BOM
    with pytest.raises(Exception) as caught:
        parse_json_body(b'{"a": 1, "b": {"c": 1, "c": 2}}')
    assert "'c' twice" in str(caught.value.detail)
    assert parse_json_body(json.dumps({"deep": json.loads(_deep(150))}).encode())  # 150 levels are fine
