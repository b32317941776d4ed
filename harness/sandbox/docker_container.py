"""What runs inside a docker sandbox's container, and how the container is configured.

The container's pid 1 (INIT: python3, else perl, else an idle loop), the reaper of a command's
processes (REAPER, bash builtins only), the scripts read_file and write_file run (READ_SCRIPT,
WRITE_SCRIPT: exit codes are errno values), the bash script a `docker exec` runs around the
agent's command (command_script) and the keyword arguments for `containers.run`
(container_config). All pure text and dicts, so they are unit-tested without an engine; the
backend that uses them is docker_backend.py.
"""

from __future__ import annotations

import shlex
from typing import Any

from patchgym.harness.sandbox import remote
from patchgym.harness.sandbox.base import Limits, SandboxError
from patchgym.harness.sandbox.docker_engine import docker_sdk
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT, PreparedTask

COMMAND_ID = "PATCHGYM_CMD"
# The environment every command starts from (as the local backend's: HOME and TMPDIR in /tmp).
BASE_ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "LC_CTYPE": "C.UTF-8"}

# Bash with builtins only (no process of its own to mistake for a victim): the processes to kill
# for command `$2` are those whose nearest ancestor carrying PATCHGYM_CMD carries `$2`; with mode
# `timeout`, also those no live command owns (no marked ancestor, or the mark of a finished
# command; `$3...` are the ids of the commands still running). Pid 1 (INIT), the reaper itself
# and the command server ($PATCHGYM_SPARE_PID: it is not dumpable, so its mark cannot be read; any
# other process whose environment cannot be read counts as unowned) are spared. Every round STOPs what it finds (a stopped
# process cannot fork), and once a round finds nothing new, all of them get SIGKILL; it returns
# when a scan finds none left.
REAPER = r'''
__pg_reap() {
  local mode=$1 id=$2; shift 2
  local -A keep=() stopped=()
  local k; for k in "$@"; do keep[$k]=1; done
  local round d p q e rest owner hops new
  local -a fields env victims
  for ((round = 0; round < 200; round++)); do
    local -A mark=() parent=()
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      [[ $p == 1 || $p == "$$" || $p == "$BASHPID" || $p == "${PATCHGYM_SPARE_PID:-}" ]] && continue
      read -r rest < "$d/stat" 2>/dev/null || continue
      rest=${rest##*) }
      read -r -a fields <<< "$rest"
      [[ ${fields[0]} == Z || ${fields[0]} == X ]] && continue
      parent[$p]=${fields[1]}
      mark[$p]=
      if mapfile -d '' env < "$d/environ" 2>/dev/null; then
        for e in "${env[@]}"; do
          if [[ $e == PATCHGYM_CMD=* ]]; then mark[$p]=${e#PATCHGYM_CMD=}; break; fi
        done
      fi
    done
    victims=() new=0
    for p in "${!parent[@]}"; do
      owner= q=$p
      for ((hops = 0; hops < 128 && ${#q} > 0; hops++)); do
        if [[ -n ${mark[$q]} ]]; then owner=${mark[$q]}; break; fi
        q=${parent[$q]}
      done
      # A mark of a command started after this one is spared too (it may be missing from `keep`).
      if [[ -n $owner && ${owner%.*} == "${id%.*}" && ${owner##*.} -gt ${id##*.} ]]; then continue; fi
      if [[ $owner == "$id" ]] || [[ $mode == timeout && ( -z $owner || -z ${keep[$owner]} ) ]]; then
        victims+=("$p")
        [[ -n ${stopped[$p]} ]] || new=1
      fi
    done
    ((${#victims[@]})) || return 0
    kill -STOP "${victims[@]}" 2>/dev/null
    for p in "${victims[@]}"; do stopped[$p]=1; done
    if ((new == 0)); then kill -KILL "${victims[@]}" 2>/dev/null; stopped=(); fi
  done
  return 1
}
'''




# Pid 1 of every container: a reaper of what commands orphan, with no process of its own to kill.
# Inside its pid namespace nothing can kill it (init gets only the signals it handles, and this one
# handles none: SIGCHLD is blocked and taken with sigtimedwait), so `kill -9 -1` from a command
# cannot stop the container (with docker's init, tini, and an idle child, killing the child ended
# it; bash as init does not reap orphans). python3, else perl; an image with neither gets an idle
# loop that leaves zombies until the sandbox closes.
INIT_PYTHON = ("import os, signal\n"
               "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"
               "while True:\n"
               "    try:\n"
               "        while os.waitpid(-1, os.WNOHANG)[0] > 0:\n"
               "            pass\n"
               "    except ChildProcessError:\n"
               "        pass\n"
               "    signal.sigtimedwait({signal.SIGCHLD}, 3600)\n")
INIT_PERL = 'use POSIX ":sys_wait_h"; $SIG{CHLD} = sub { 1 while waitpid(-1, WNOHANG) > 0 }; sleep 3600 while 1;'
INIT = ('command -v python3 >/dev/null 2>&1 && exec python3 -c "$1"; '
        'command -v perl >/dev/null 2>&1 && exec perl -e "$2"; '
        'while :; do sleep 3600; done')

# read_file and write_file run these in the container; their exit codes are errno values.
READ_SCRIPT = r'''f=$1
[ -e "$f" ] || exit 2
[ -d "$f" ] && exit 21
[ -f "$f" ] || exit 22
[ -r "$f" ] || exit 13
size=$(stat -L -c %s -- "$f") || exit 5
[ "$size" -le "$2" ] || exit 27
exec cat -- "$f"
'''
WRITE_SCRIPT = r'''f=$1
[ -d "$f" ] && exit 21
mkdir -p -- "$(dirname -- "$f")" || exit 5
cat > "$f" && chmod "$2" -- "$f"
'''


def command_script(limits: Limits, command_id: str, *, cwd: str = TESTBED, env: dict[str, str] | None = None) -> str:
    """The bash script `docker exec` runs; the agent's command is its `$1` (module docstring)."""
    lines = ["exec 2>&1", "ulimit -c 0"]
    if limits.max_file_bytes is not None:
        lines.append(f"ulimit -f {-(-limits.max_file_bytes // 1024)}")
    for key, value in (env or {}).items():
        if not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"environment variable name {key!r} is not a valid shell name")
        if key == COMMAND_ID:
            raise ValueError(f"environment variable {COMMAND_ID} is reserved by the docker backend")
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append(f"cd {shlex.quote(cwd)} || exit 1")
    lines.append(REAPER)
    lines.append('bash -c "$1"; __pg_code=$?')
    lines.append(f"__pg_reap own {command_id} </dev/null >/dev/null 2>&1")
    lines.append("exit $__pg_code")
    return "\n".join(lines) + "\n"


def container_config(
    image: str, prepared: PreparedTask, limits: Limits, *, network: bool, name: str,
    cpus: float | None, mount_host_venv: bool, environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.run` (pure, so it is unit-tested)."""
    docker = None
    try:
        docker = docker_sdk()
    except SandboxError:
        pass
    ulimits: list[Any] = []
    for kind, value in (("core", 0), ("fsize", limits.max_file_bytes)):
        if value is None:
            continue
        ulimits.append(docker.types.Ulimit(name=kind, soft=value, hard=value) if docker else {"Name": kind, "Soft": value, "Hard": value})
    tmp = f"size={limits.max_write_bytes},mode=1777,exec" if limits.max_write_bytes else "mode=1777,exec"
    config: dict[str, Any] = {
        "image": image,
        "command": ["sh", "-c", INIT, "patchgym-init", INIT_PYTHON, INIT_PERL],
        "init": False,
        "name": name,
        "detach": True,
        "network_disabled": not network,
        "labels": remote.labels(prepared.instance_id, name),
        "working_dir": "/",
        "environment": dict(BASE_ENV, **(environment or {})),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": ulimits,
        "tmpfs": {"/tmp": tmp},
    }
    if network:
        config["cap_drop"] = []  # trusted setup steps (pip, apt) may need ordinary root powers
    if limits.memory_bytes is not None:
        config["mem_limit"] = limits.memory_bytes
        config["memswap_limit"] = limits.memory_bytes
    if limits.max_processes is not None:
        config["pids_limit"] = limits.max_processes
    if cpus is not None:
        config["nano_cpus"] = int(cpus * 1e9)
    if mount_host_venv and prepared.venv_dir is not None:
        config["volumes"] = {str(prepared.venv_dir): {"bind": VENV_MOUNT, "mode": "ro"}}
    return config
