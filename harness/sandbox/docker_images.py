"""Images for the docker backend, built with no registry: the base image from Debian's packages and
task images built from a task's `environment.setup`.

* **Base image** (`patchgym-base:<key>`): `debootstrap --variant=minbase` of Debian bookworm with
  the packages in `BASE_PACKAGES` (bash, python3 with venv, git, patch, procps), imported with
  `docker import`. `<key>` hashes the recipe, so a changed recipe is a new image and a second build
  finds the first (`ensure_base_image`). `.ci/docker-setup` runs `python -m
  patchgym.harness.sandbox.docker_images base`.
* **Environment image** (`patchgym-env:<key>`): the base image after the task's setup ran in a
  container with the host's network (the only networked step): a venv at /patchgym/venv made with
  the image's python3, the task's `environment.setup` in it at /testbed, then pytest when the tests
  need it (patchgym.tasks.environment.ENSURE_PYTEST), exactly as preparation does on the host. The
  host's pip configuration is honoured (PIP_* variables, the local wheel directories they name, its
  pip cache). A `shared` setup runs in an empty /testbed and its image is built once for every task
  with that setup; otherwise setup runs over the task's prepared repository.
* **Task image** (`patchgym-task:<key>`): the prepared repository at /testbed on top of the
  environment image, so opening a sandbox copies nothing (for a non-shared setup the environment
  image already holds it and is the task image).

Builds are keyed like preparation (the prepared task's key, the setup, the image it starts from),
cached by tag, and serialised per key by a file lock under `$PATCHGYM_HOME/docker`, so concurrent
processes build each image once. Progress goes to the `progress` callback. Build containers carry
the owner labels of `remote.labels` (a crashed build's container is reaped like a sandbox's); the
images they become do not: they are a cache shared by every run, like the task store.

Not covered: images for the modal backend; pruning old keys (`docker image prune --filter
label=patchgym.image` does it by hand).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from patchgym.harness.sandbox import remote
from patchgym.harness.sandbox.base import SandboxError
from patchgym.tasks.environment import ENSURE_PYTEST, _pip_cache_dir, _pip_local_paths, needs_pytest
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT, PreparedTask
from patchgym.tasks.store import file_lock, patchgym_home

SUITE = "bookworm"
MIRROR = os.environ.get("PATCHGYM_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# procps: `ps`, which tests and agents use; ca-certificates: pip over https while building.
BASE_PACKAGES = ("bash", "ca-certificates", "git", "patch", "procps", "python3", "python3-venv")
IMAGE_LABEL = "patchgym.image"  # base | env | task
KEY_LABEL = "patchgym.image.key"
PATH = f"{VENV_MOUNT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUILD_TIMEOUT_S = 1800
RECIPE_VERSION = 1

Progress = Callable[[str], None]


class ImageBuildError(SandboxError):
    """An image could not be built; the message names the step and carries the tail of its log."""


def _stderr_progress(message: str) -> None:
    print(f"[docker] {message}", file=sys.stderr, flush=True)


def _key(shape: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def base_recipe() -> dict[str, Any]:
    return {"suite": SUITE, "variant": "minbase", "packages": sorted(BASE_PACKAGES), "path": PATH,
            "v": RECIPE_VERSION}


def base_image_tag() -> str:
    return f"patchgym-base:{_key(base_recipe())}"


def _lock_dir() -> Path:
    return patchgym_home() / "docker"


def _image_exists(client: Any, tag: str) -> bool:
    docker = remote.import_sdk("docker", "docker", "Docker")
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _cache_labels(kind: str, key: str) -> list[str]:
    # A committed image inherits its build container's labels: the owner ones are blanked, so the
    # reaper never takes a cached image for a dead owner's leftover.
    return [f'LABEL {remote.LABEL}="1" {IMAGE_LABEL}="{kind}" {KEY_LABEL}="{key}" '
            f'{remote.OWNER_LABEL}="" {remote.SANDBOX_LABEL}="" {remote.TASK_LABEL}=""']


def ensure_base_image(client: Any, *, progress: Progress = _stderr_progress) -> str:
    """The base image's tag, built first if this engine does not have it (needs root and debootstrap)."""
    tag = base_image_tag()
    if _image_exists(client, tag):
        return tag
    with file_lock(_lock_dir() / f".{tag.replace(':', '-')}.lock"):
        if _image_exists(client, tag):
            return tag
        debootstrap = shutil.which("debootstrap")
        if not debootstrap:
            raise ImageBuildError(f"the base image {tag} is missing and debootstrap is not installed to build it "
                                  "(apt-get install debootstrap, or run .ci/docker-setup as root)")
        if os.geteuid() != 0:
            raise ImageBuildError(f"the base image {tag} is missing and building it with debootstrap needs root")
        started = time.monotonic()
        progress(f"building the base image {tag} from Debian {SUITE} ({', '.join(BASE_PACKAGES)})")
        work = Path(tempfile.mkdtemp(prefix="patchgym-base-", dir=_lock_dir()))
        try:
            rootfs, log = work / "rootfs", work / "debootstrap.log"
            argv = [debootstrap, "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs), MIRROR]
            with open(log, "wb") as handle:
                done = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                raise ImageBuildError(f"debootstrap failed with exit code {done.returncode}:\n"
                                      + log.read_text(errors="replace")[-1500:])
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
                for entry in (rootfs / junk).glob("*"):
                    if entry.is_file() and entry.name != "lock":
                        entry.unlink()
                    elif entry.is_dir() and junk.startswith("usr/share"):
                        shutil.rmtree(entry, ignore_errors=True)
            progress(f"debootstrap done in {time.monotonic() - started:.0f}s; importing")
            archive = work / "rootfs.tar"
            subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(archive), "."], check=True)
            shutil.rmtree(rootfs, ignore_errors=True)
            repository, version = tag.split(":")
            changes = [f"ENV PATH={PATH}", "ENV LC_CTYPE=C.UTF-8", f"WORKDIR {TESTBED}", *_cache_labels("base", version)]
            client.api.import_image_from_file(str(archive), repository=repository, tag=version, changes=changes)
            if not _image_exists(client, tag):
                raise ImageBuildError(f"docker import of {archive} did not produce {tag}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        progress(f"base image {tag} built in {time.monotonic() - started:.0f}s")
    return tag


def setup_script(prepared: PreparedTask) -> str:
    """What runs in the build container: the venv from the image's python3, the task's setup in it
    at /testbed, then the test runner when the grader needs it (as tasks.environment does)."""
    task = prepared.task
    lines = ["set -e", f"mkdir -p {TESTBED}", f"python3 -m venv {VENV_MOUNT}", f". {VENV_MOUNT}/bin/activate", f"cd {TESTBED}"]
    lines += list(task.environment.setup)
    if needs_pytest(task):
        lines.append(ENSURE_PYTEST)
    return "\n".join(lines) + "\n"


def _repository_identity(prepared: PreparedTask) -> dict[str, str]:
    # The preparation key hashes what preparation depends on; the snapshot's commit is added
    # because tasks prepared by hand (tests, tools) may reuse one key for different trees.
    return {"key": prepared.key, "commit": prepared.base_commit, "instance": prepared.instance_id}


def env_image_key(prepared: PreparedTask, base: str) -> str:
    task = prepared.task
    shape = {"base": base, "setup": task.environment.setup, "needs_pytest": needs_pytest(task),
             "repo": None if task.environment.shared else _repository_identity(prepared), "v": RECIPE_VERSION}
    return _key(shape)


def task_image_key(prepared: PreparedTask, base: str) -> str:
    return _key({"env": env_image_key(prepared, base), "repo": _repository_identity(prepared), "v": RECIPE_VERSION})


def _pip_environment() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The host's pip configuration for a build container: PIP_* variables, the local paths they
    and pip.conf name (read-only), pip.conf itself and the pip cache."""
    env = {key: value for key, value in os.environ.items() if key.startswith("PIP_") and key != "PIP_CACHE_DIR"}
    volumes = {path: {"bind": path, "mode": "ro"} for path in _pip_local_paths()}
    for conf in ("/etc/pip.conf",):
        if os.path.isfile(conf):
            volumes[conf] = {"bind": conf, "mode": "ro"}
    cache = _pip_cache_dir()
    if cache:
        volumes[cache] = {"bind": "/tmp/.cache/pip", "mode": "rw"}
    return env, volumes


def _run_build_container(client: Any, image: str, prepared: PreparedTask, *, script: str | None, with_repo: bool,
                         kind: str, key: str, tag: str, log_path: Path) -> None:
    """Create a container from `image`, copy the repository in if asked, run `script` (with network),
    and commit the result as `tag`. The container is removed whatever happens."""
    docker = remote.import_sdk("docker", "docker", "Docker")
    name = f"patchgym-build-{remote.owner_label().replace(':', '-')}-{key}"
    env, volumes = _pip_environment() if script else ({}, {})
    env.update({"HOME": "/tmp", "LC_CTYPE": "C.UTF-8"})
    container = client.containers.create(
        image, ["bash", "-c", script or "true"], name=name, labels=remote.labels(prepared.instance_id, name),
        environment=env, network_mode="host" if script else "none", working_dir="/",
        # HostConfig mounts, not `volumes=`: the SDK also records those as the container's VOLUMEs,
        # which the committed image would then carry into every sandbox.
        mounts=[docker.types.Mount(target=spec["bind"], source=source, type="bind", read_only=spec["mode"] == "ro")
                for source, spec in volumes.items()],
    )
    try:
        if with_repo:
            if not container.put_archive("/", remote.tar_of_directory(Path(prepared.repo_dir), TESTBED.lstrip("/"))):
                raise ImageBuildError(f"docker refused the repository of {prepared.instance_id}")
        if script:
            container.start()
            try:
                status = container.wait(timeout=BUILD_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the SDK raises requests' timeout types
                raise ImageBuildError(f"task {prepared.instance_id}: environment setup in docker took over "
                                      f"{BUILD_TIMEOUT_S}s ({exc})") from exc
            log = container.logs(stdout=True, stderr=True)
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_bytes(log)
            if status.get("StatusCode") != 0:
                raise ImageBuildError(f"task {prepared.instance_id}: environment setup in docker failed with exit code "
                                      f"{status.get('StatusCode')} (log: {log_path}):\n"
                                      + log.decode(errors="replace")[-1500:])
        repository, version = tag.split(":")
        container.commit(repository=repository, tag=version,
                         changes=[f"ENV PATH={PATH}", f"ENV VIRTUAL_ENV={VENV_MOUNT}", f"WORKDIR {TESTBED}",
                                  'CMD ["bash"]', *_cache_labels(kind, key)])
    finally:
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - the reaper takes it if this failed
            pass


def ensure_task_image(client: Any, prepared: PreparedTask, base: str | None = None, *,
                      progress: Progress = _stderr_progress) -> str:
    """The task image for `prepared` (environment.setup run on the base image, the repository at
    /testbed), built if missing; cached by key, one build per key across processes."""
    base = base or ensure_base_image(client, progress=progress)
    task = prepared.task
    env_key = env_image_key(prepared, base)
    env_tag = f"patchgym-env:{env_key}"
    tag = f"patchgym-task:{task_image_key(prepared, base)}"
    if _image_exists(client, tag):
        return tag
    logs = _lock_dir() / "logs"
    with file_lock(_lock_dir() / f".env-{env_key}.lock"):
        if not _image_exists(client, env_tag):
            started = time.monotonic()
            what = "shared setup" if task.environment.shared else f"setup of {task.instance_id}"
            progress(f"building {env_tag} ({what}: {len(task.environment.setup)} command(s)) from {base}")
            _run_build_container(client, base, prepared, script=setup_script(prepared),
                                 with_repo=not task.environment.shared, kind="env", key=env_key, tag=env_tag,
                                 log_path=logs / f"env-{env_key}.log")
            progress(f"{env_tag} built in {time.monotonic() - started:.1f}s")
    if not task.environment.shared:
        # The environment image already holds this task's repository: it is the task image.
        with file_lock(_lock_dir() / f".task-{tag.split(':')[1]}.lock"):
            if not _image_exists(client, tag):
                client.images.get(env_tag).tag(*tag.split(":"))
        return tag
    with file_lock(_lock_dir() / f".task-{tag.split(':')[1]}.lock"):
        if not _image_exists(client, tag):
            started = time.monotonic()
            _run_build_container(client, env_tag, prepared, script=None, with_repo=True, kind="task",
                                 key=tag.split(":")[1], tag=tag, log_path=logs / "unused.log")
            progress(f"{tag} for {task.instance_id} built in {time.monotonic() - started:.1f}s")
    return tag


def main(argv: list[str] | None = None) -> int:
    """`python -m patchgym.harness.sandbox.docker_images base`: build (or find) the base image."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["base"]:
        print("usage: python -m patchgym.harness.sandbox.docker_images base", file=sys.stderr)
        return 2
    from patchgym.harness.sandbox.docker_engine import unavailable_reason

    reason = unavailable_reason()
    if reason:
        print(f"[docker] cannot build the base image: {reason}", file=sys.stderr)
        return 1
    docker = remote.import_sdk("docker", "docker", "Docker")
    try:
        tag = ensure_base_image(docker.from_env())
    except SandboxError as exc:
        print(f"[docker] {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
