"""Pumping and waiting on one started command of the local backend: its output into a
CappedOutput, its stdin in, its exit, all within a deadline.

Owns: the blocking forms (`pump`, `wait_until`: poll() and a pidfd, used by `run` in the calling
thread) and the asyncio forms (`apump`, `await_exit`: the event loop's readiness callbacks, used by
`arun` with no thread per command), and `drain` (what is left in the pipe after a kill).
At the deadline the caller's `kill` callable is run; what killing means (bwrap's group, the pid
namespace's init, the cgroups) is launch.py's.

Does not cover: starting the command, reaping it, or turning the outcome into a CommandResult.
"""

from __future__ import annotations

import asyncio
import math
import os
import select
import subprocess
import time
from typing import Callable

from patchgym.harness.sandbox.output import CappedOutput

READ_CHUNK = 1 << 16


def readable(fd: int, timeout_s: float) -> bool:
    """Wait until `fd` is readable (or hung up). poll(), not select(): a server holding more than
    1024 descriptors (hundreds of episodes) gets descriptor numbers select() cannot take."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(timeout_s * 1000))))  # rounded up: never give up early


def wait_until(proc: subprocess.Popen, deadline: float | None) -> bool:
    """Wait for `proc` to exit, until `deadline` (monotonic; None: no limit). True when it exited.

    With a deadline, Popen.wait polls with sleeps that start at 0.5 ms and double; bwrap usually
    exits a little after its output closes, so most commands paid one such sleep. A pidfd becomes
    readable the moment the process exits."""
    if deadline is None or proc.returncode is not None:
        proc.wait()
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (kernel < 5.3): Popen's own polling
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        if not readable(pidfd, max(0.0, deadline - time.monotonic())):
            return False
    finally:
        os.close(pidfd)
    proc.wait()
    return True


async def await_exit(proc: subprocess.Popen, deadline: float | None) -> bool:
    """`wait_until` for asyncio: the loop watches a pidfd. True when the process exited."""
    if proc.poll() is not None:
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(wait_until, proc, deadline)
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
    try:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        finished, _ = await asyncio.wait({exited}, timeout=remaining)
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    if not finished:
        return False
    proc.wait()
    return True



def pump(
    proc: subprocess.Popen, output: CappedOutput, stdin_data: bytes | None, deadline: float | None, kill: Callable[[], None]
) -> bool:
    """Copy output into `output` (and `stdin_data` in) until EOF or the deadline; at the deadline
    `kill()` the command and drain what is left. True on timeout."""
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    in_fd = proc.stdin.fileno() if proc.stdin is not None else None
    pending = memoryview(stdin_data or b"")
    if in_fd is not None:
        os.set_blocking(in_fd, False)
        if not pending:
            proc.stdin.close()  # type: ignore[union-attr]
            in_fd = None
    poller = select.poll()
    poller.register(out_fd, select.POLLIN)
    if in_fd is not None:
        poller.register(in_fd, select.POLLOUT)
    timed_out = False
    try:
        while True:
            wait_ms = None
            if deadline is not None:
                wait_ms = max(0, int((deadline - time.monotonic()) * 1000) + 1)
            events = poller.poll(wait_ms)
            if not events and deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                kill()
                drain(out_fd, output)
                return True
            done = False
            for fd, event in events:
                if fd == out_fd:
                    chunk = os.read(out_fd, READ_CHUNK) if event & (select.POLLIN | select.POLLHUP) else b""
                    if chunk:
                        output.feed(chunk)
                    elif event & (select.POLLHUP | select.POLLERR | select.POLLIN):
                        done = True
                elif fd == in_fd:
                    try:
                        written = os.write(in_fd, pending[:READ_CHUNK])
                        pending = pending[written:]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(in_fd)
                        proc.stdin.close()  # type: ignore[union-attr]
                        in_fd = None
            if done:
                return timed_out
    finally:
        if in_fd is not None and proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        proc.stdout.close()


async def apump(
    proc: subprocess.Popen, output: CappedOutput, stdin_data: bytes | None, deadline: float | None, kill: Callable[[], None]
) -> bool:
    """`pump` with the event loop's readiness callbacks (`kill` runs in a worker thread). True on timeout."""
    loop = asyncio.get_running_loop()
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    os.set_blocking(out_fd, False)
    eof: asyncio.Future[None] = loop.create_future()
    pending = memoryview(stdin_data or b"")
    in_fd: int | None = None

    def on_output() -> None:
        try:
            chunk = os.read(out_fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            output.feed(chunk)
        else:
            loop.remove_reader(out_fd)
            if not eof.done():
                eof.set_result(None)

    def on_input() -> None:
        nonlocal pending, in_fd
        try:
            written = os.write(in_fd, pending[:READ_CHUNK])  # type: ignore[arg-type]
            pending = pending[written:]
        except BlockingIOError:
            return
        except OSError:
            pending = pending[:0]
        if not pending:
            loop.remove_writer(in_fd)  # type: ignore[arg-type]
            proc.stdin.close()  # type: ignore[union-attr]
            in_fd = None

    if proc.stdin is not None:
        if pending:
            in_fd = proc.stdin.fileno()
            os.set_blocking(in_fd, False)
            loop.add_writer(in_fd, on_input)
        else:
            proc.stdin.close()
    loop.add_reader(out_fd, on_output)
    try:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        finished, _ = await asyncio.wait({eof}, timeout=remaining)
        if finished:
            return False
        loop.remove_reader(out_fd)
        await asyncio.to_thread(kill)
        await asyncio.to_thread(drain, out_fd, output)
        return True
    finally:
        loop.remove_reader(out_fd)
        if in_fd is not None:
            loop.remove_writer(in_fd)
        if proc.stdin is not None and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        proc.stdout.close()


def drain(fd: int, output: CappedOutput, limit_s: float = 2.0) -> None:
    """After a kill: take what is left in the pipe (bounded in time)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if not readable(fd, max(0.0, end - time.monotonic())):
            return
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:  # (non-blocking when it comes from arun)
            continue
        if not chunk:
            return
        output.feed(chunk)

