"""The contract every sandbox backend keeps, run against each backend that can run here.

`local` runs wherever bubblewrap and root are available, `docker` wherever an engine is reachable;
Modal only when asked for (it spends money). Each is skipped with the reason otherwise:

    PATCHGYM_TEST_BACKENDS=docker pytest tests/test_sandbox_contract.py   # needs a Docker engine
    PATCHGYM_TEST_BACKENDS=modal pytest tests/test_sandbox_contract.py    # needs Modal credentials
    PATCHGYM_TEST_BACKENDS=local,docker,modal pytest tests/test_sandbox_contract.py

Docker and Modal use the image in PATCHGYM_TEST_IMAGE; by default Docker uses the base image that
`.ci/docker-setup` builds from Debian's packages (patchgym.harness.sandbox.docker_images) and Modal
python:3.11-slim (both have bash and git).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from pathlib import Path

import pytest

from patchgym.harness.sandbox.base import Limits, SandboxClosed, get_factory
from .test_sandbox_support import BINARY_BLOB, git, local_available, make_prepared, snapshot_tree

ALL_BACKENDS = ("local", "docker", "modal")
REQUESTED = [b.strip() for b in os.environ.get("PATCHGYM_TEST_BACKENDS", "local,docker").split(",") if b.strip()]
TEST_IMAGE = os.environ.get("PATCHGYM_TEST_IMAGE")


def _image_for(backend: str) -> str:
    if TEST_IMAGE:
        return TEST_IMAGE
    if backend == "docker":
        from patchgym.harness.sandbox.docker_images import base_image_tag

        return base_image_tag()
    return "python:3.11-slim"


def _unavailable(backend: str) -> str | None:
    if backend not in REQUESTED:
        return f"backend {backend} not requested: set PATCHGYM_TEST_BACKENDS={backend} to run it"
    if backend == "local":
        return local_available()
    if backend == "docker":
        from patchgym.harness.sandbox.docker_backend import image_missing_reason, unavailable_reason

        return unavailable_reason() or image_missing_reason(_image_for("docker"))
    from patchgym.harness.sandbox.modal_backend import unavailable_reason as modal_reason

    return modal_reason()


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker),
                                        pytest.param("modal", marks=pytest.mark.modal)])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    reason = _unavailable(request.param)
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp(f"contract-{request.param}")
    prepared = make_prepared(root)
    if request.param != "local":
        prepared.task.environment.image = _image_for(request.param)
    options = {"state_root": root / "state"} if request.param == "local" else {}
    factory = get_factory(request.param, **options)
    yield factory, prepared
    factory.close_all()


@pytest.fixture()
def sandbox(backend):
    factory, prepared = backend
    box = factory.open(prepared, Limits(timeout_s=30, max_output_bytes=64 * 1024))
    yield box
    box.close()


@pytest.fixture(params=["run", "arun-asyncio", "arun-uvloop"])
def execute(request: pytest.FixtureRequest):
    """A command through `run`, or through `arun` on asyncio's loop or on uvloop (the server's):
    every form must give the same results."""
    if request.param == "run":
        return lambda box, command, **kwargs: box.run(command, **kwargs)
    if request.param == "arun-uvloop":
        uvloop = pytest.importorskip("uvloop")
        return lambda box, command, **kwargs: uvloop.run(box.arun(command, **kwargs))
    return lambda box, command, **kwargs: asyncio.run(box.arun(command, **kwargs))


def test_exit_code_and_merged_output(sandbox, execute) -> None:
    result = execute(sandbox, "echo first; echo second >&2; echo third; exit 3")
    assert result.exit_code == 3 and not result.ok and not result.timed_out
    assert result.output == "first\nsecond\nthird\n"
    assert result.truncated_bytes == 0 and result.duration_s > 0


def test_env_cwd_and_stdin(sandbox, execute) -> None:
    result = execute(sandbox, 'echo "$GREETING"; pwd; cat', env={"GREETING": "hi there"}, cwd="pkg", stdin="from stdin\n")
    assert result.output == "hi there\n/testbed/pkg\nfrom stdin\n"
    assert execute(sandbox, "pwd", cwd="/tmp").output == "/tmp\n"
    big = "".join(f"line {i}\n" for i in range(40000))  # larger than a pipe's buffer: written as it drains
    assert execute(sandbox, "wc -l; echo done", stdin=big).output == "40000\ndone\n"


def test_repository_at_testbed_at_base(sandbox, backend) -> None:
    _, prepared = backend
    assert sandbox.run("cat README.md pkg/deep/data.txt").output == "hello\ndeep\n"
    assert sandbox.read_file("blob.bin") == BINARY_BLOB


def test_timeout_kills_the_whole_tree(sandbox, execute) -> None:
    result = execute(sandbox, "sleep 60 & sleep 60 & echo started; wait", timeout_s=1.0)
    assert result.timed_out and not result.ok
    assert "started" in result.output
    assert result.duration_s < 15
    # Nothing of it is left: a later command sees no sleeping process.
    after = sandbox.run("ps -eo comm= 2>/dev/null || ls /proc")
    assert after.ok and "sleep" not in after.output


def test_output_is_capped_with_head_tail_and_notice(backend, execute) -> None:
    factory, prepared = backend
    with factory.open(prepared, Limits(max_output_bytes=1000)) as box:
        result = execute(box, "echo BEGIN; head -c 300000 /dev/zero | tr '\\0' x; echo; echo END")
    assert result.ok
    assert result.output.startswith("BEGIN\n") and result.output.endswith("END\n")
    assert result.truncated_bytes == 6 + 300000 + 1 + 4 - 1000
    assert f"[... {result.truncated_bytes} bytes cut ...]" in result.output
    assert len(result.output) < 1100


def test_write_then_read_files(sandbox) -> None:
    sandbox.write_file("new/dir/file.txt", "text\n", mode=0o600)
    assert sandbox.read_file("/testbed/new/dir/file.txt") == b"text\n"
    assert sandbox.run("stat -c %a new/dir/file.txt; cat new/dir/file.txt").output == "600\ntext\n"
    sandbox.write_file("/tmp/scratch.bin", BINARY_BLOB)
    assert sandbox.read_file("/tmp/scratch.bin") == BINARY_BLOB
    sandbox.run("printf changed > README.md")
    assert sandbox.read_file("README.md") == b"changed"
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("does/not/exist")
    with pytest.raises(IsADirectoryError):
        sandbox.read_file("pkg")


def test_read_through_a_symlink_inside_the_sandbox(sandbox) -> None:
    sandbox.run("ln -s pkg/deep/data.txt link-to-data && ln -s /tmp tmp-link && echo inside > /tmp/in.txt")
    assert sandbox.read_file("link-to-data") == b"deep\n"
    assert sandbox.read_file("tmp-link/in.txt") == b"inside\n"


def test_diff_has_new_deleted_binary_mode_and_symlink_changes(sandbox, backend, tmp_path: Path) -> None:
    _, prepared = backend
    new_blob = bytes(reversed(BINARY_BLOB)) + b"\x00tail"
    sandbox.write_file("pkg/new_module.py", "NEW = 2\n")
    sandbox.write_file("assets/new.bin", new_blob)
    script = (
        "printf 'hello\\nworld\\n' > README.md && rm blob.bin && chmod -x run.sh && ln -s pkg/__init__.py alias.py"
        " && echo junk > debug.log && echo more > build-artifact/out2.o && echo x > .git/agent-note"
    )
    assert sandbox.run(script).ok
    diff = sandbox.diff()
    assert "diff --git a/README.md b/README.md" in diff and "+world" in diff
    assert "deleted file mode 100644" in diff and "a/blob.bin" in diff
    assert "new file mode 100644" in diff and "b/pkg/new_module.py" in diff
    assert "GIT binary patch" in diff
    assert "old mode 100755\nnew mode 100644" in diff
    assert "new file mode 120000" in diff and "+pkg/__init__.py" in diff
    for hidden in ("debug.log", "build-artifact", "agent-note", ".git/"):
        assert hidden not in diff
    # The diff reproduces the sandbox's tree when applied to a clean checkout of base_commit.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(prepared.repo_dir), str(clone)], check=True)
    (tmp_path / "agent.diff").write_bytes(diff.encode("utf-8", "surrogateescape"))
    git(clone, "apply", "--binary", str(tmp_path / "agent.diff"))
    assert (clone / "README.md").read_text() == "hello\nworld\n"
    assert not (clone / "blob.bin").exists()
    assert (clone / "assets" / "new.bin").read_bytes() == new_blob
    assert os.readlink(clone / "alias.py") == "pkg/__init__.py"
    assert not os.access(clone / "run.sh", os.X_OK)


def test_diff_of_untouched_sandbox_is_empty(sandbox) -> None:
    assert sandbox.diff() == ""


def test_sandboxes_are_independent_and_snapshot_untouched(backend) -> None:
    factory, prepared = backend
    before = snapshot_tree(Path(prepared.repo_dir))
    with factory.open(prepared) as first, factory.open(prepared) as second:
        assert first.run("echo one > README.md; echo tmp > /tmp/mine; rm -r pkg").ok
        assert second.read_file("README.md") == b"hello\n"
        assert second.run("test -e /tmp/mine").exit_code != 0
        assert second.run("test -d pkg").ok
    assert snapshot_tree(Path(prepared.repo_dir)) == before


def test_close_is_idempotent_and_closed_sandbox_refuses_work(backend) -> None:
    factory, prepared = backend
    box = factory.open(prepared)
    assert not box.closed
    box.close()
    box.close()
    assert box.closed
    for call in (lambda: box.run("true"), lambda: box.read_file("README.md"),
                 lambda: box.write_file("x", "y"), box.diff):
        with pytest.raises(SandboxClosed):
            call()


def test_asyncio_forms(backend) -> None:
    factory, prepared = backend

    async def scenario() -> tuple[str, bytes, str]:
        box = await factory.aopen(prepared)
        try:
            results = await asyncio.gather(*(box.arun(f"echo {i}") for i in range(4)))
            await box.awrite_file("async.txt", "async\n")
            data = await box.aread_file("async.txt")
            diff = await box.adiff()
            return "".join(r.output for r in results), data, diff
        finally:
            await box.aclose()

    outputs, data, diff = asyncio.run(scenario())
    assert sorted(outputs.split()) == ["0", "1", "2", "3"]
    assert data == b"async\n" and "b/async.txt" in diff


def test_threads_share_sandboxes_safely(backend) -> None:
    factory, prepared = backend
    boxes = [factory.open(prepared) for _ in range(3)]
    failures: list[str] = []

    def work(index: int) -> None:
        box = boxes[index % len(boxes)]
        for step in range(3):
            result = box.run(f"echo {index}-{step} > /tmp/t{index}; cat /tmp/t{index}")
            if result.output != f"{index}-{step}\n":
                failures.append(f"{index}-{step}: {result}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    closers = [threading.Thread(target=box.close) for box in boxes for _ in range(2)]
    for thread in closers:
        thread.start()
    for thread in closers:
        thread.join()
    assert failures == []
    assert all(box.closed for box in boxes)
