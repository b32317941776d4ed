"""Reading the signed result stream that patchgym.harness.pytest_reporter (or, for unittest tasks,
patchgym.harness.unittest_reporter) writes in the sandbox.

`new_channel()` makes the secrets for one test run (a fresh HMAC key and nonce, never reused);
`channel_config()` is what the plugin reads on stdin; `sandbox_modules()` are the files of the plugin, the
unittest runner and their helpers that go into the sandbox (with their bytecode); `read_stream()` verifies every line (signature,
sequence without gaps, a `start` first and an `end` last) and folds it into `StreamResults`. A
stream that fails verification is reported as such (`problems`), never partly trusted: the grader
then treats the run as not resolved.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import importlib.util
import json
import marshal
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path

PLUGIN_MODULE = "patchgym_grading_reporter"  # what `-p` names: a stub that imports the reporter itself
PLUGIN_CORE = "patchgym_grading_reporter_core"  # pytest_reporter.py, in the sandbox
PLUGIN_SOURCE = Path(__file__).with_name("pytest_reporter.py")
# pytest marks every `-p` plugin for assertion rewriting and then compiles it from source through the
# rewriter, pyc or not: the 900-line reporter cost ~12 ms of each grading that way. The marked module
# is this stub (not rewritten, see PYTEST_DONT_REWRITE); the reporter is imported by name like the
# helpers, so it loads from the bytecode written next to it (`sandbox_modules`).
PLUGIN_STUB = (f'"""patchgym\'s signed grading reporter: {PLUGIN_CORE}. PYTEST_DONT_REWRITE"""\n'
               f"from {PLUGIN_CORE} import pytest_configure, pytest_load_initial_conftests, pytest_plugin_registered  # noqa\n")
UNITTEST_MODULE = "patchgym_unittest_reporter"
UNITTEST_SOURCE = Path(__file__).with_name("unittest_reporter.py")
# The signed stream's writer, which both reporters need (round 2's reporter in bench/grade too).
SIGNED_STREAM = ("patchgym_signed_stream", Path(__file__).with_name("signed_stream.py"))
# Imported by Python at the test process's start, from the grader's folder on PYTHONPATH: keeps the
# patch's files from being imported until the grader has loaded (startup_guard.py says why).
STARTUP_GUARD = ("sitecustomize", Path(__file__).with_name("startup_guard.py"))
STARTUP_CONFIG = "patchgym_startup.json"  # what the guard reads: the testbed and the patch's files
# Helpers both reporters import from the same folder: (module name in the sandbox, source here).
HELPERS = (("patchgym_canaries", Path(__file__).with_name("canaries.py")),
           ("patchgym_audit_hook", Path(__file__).with_name("audit_hook.py")),
           ("patchgym_compiled_tests", Path(__file__).with_name("compiled_tests.py")),
           ("patchgym_contradictions", Path(__file__).with_name("contradictions.py")),
           ("patchgym_moved_world", Path(__file__).with_name("moved_world.py")),
           ("patchgym_comparing_calls", Path(__file__).with_name("comparing_calls.py")),
           ("patchgym_test_globals", Path(__file__).with_name("test_globals.py")),
           ("patchgym_first_calls", Path(__file__).with_name("first_calls.py")),
           ("patchgym_fork_journal", Path(__file__).with_name("fork_journal.py")),
           ("patchgym_edited_defs", Path(__file__).with_name("edited_defs.py")),
           ("patchgym_equality_probe", Path(__file__).with_name("equality_probe.py")),
           ("patchgym_outside_reads", Path(__file__).with_name("outside_reads.py")),
           ("patchgym_doctest_hold", Path(__file__).with_name("doctest_hold.py")))


def sandbox_modules(workdir: str, runner: str = "pytest", helpers: bool = True) -> list[tuple[str, bytes]]:
    """(path, content) of the grader's modules for a test run in `workdir`: the pytest plugin (stub
    and reporter) or the unittest runner, the helpers, and for each module its bytecode compiled by
    this interpreter (`__pycache__/<module>.<cache tag>.pyc`, PEP 552 checked-hash, so importlib
    uses it only for the same source and an interpreter with this cache tag; any other compiles the
    source as before). Why: compiling the reporter and the helpers (~1,700 lines) in every grading
    cost ~16 ms."""
    modules = [(PLUGIN_CORE, PLUGIN_SOURCE.read_bytes())] if runner == "pytest" else [(UNITTEST_MODULE, UNITTEST_SOURCE.read_bytes())]
    modules.append((SIGNED_STREAM[0], SIGNED_STREAM[1].read_bytes()))
    modules.append((STARTUP_GUARD[0], STARTUP_GUARD[1].read_bytes()))
    if helpers:
        modules += [(module, source.read_bytes()) for module, source in HELPERS]
    files = [(f"{workdir}/{PLUGIN_MODULE}.py", PLUGIN_STUB.encode())] if runner == "pytest" else []
    tag = sys.implementation.cache_tag
    for module, source in modules:
        files.append((f"{workdir}/{module}.py", source))
        if tag:
            files.append((f"{workdir}/__pycache__/{module}.{tag}.pyc", _bytecode(source, f"{module}.py")))
    return files


@functools.lru_cache(maxsize=16)
def _bytecode(source: bytes, filename: str) -> bytes:
    # The file name in the code is replaced by the real one when importlib loads it (_fix_co_filename).
    code = compile(source, filename, "exec", dont_inherit=True)
    flags = 0b11  # hash-based, checked against the source
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + importlib.util.source_hash(source) + marshal.dumps(code)


@dataclass(frozen=True)
class Channel:
    key: bytes
    nonce: str
    workdir: str  # in the sandbox: holds the plugin module and the results file

    @property
    def results_path(self) -> str:
        return f"{self.workdir}/results.jsonl"

    @property
    def plugin_path(self) -> str:
        return f"{self.workdir}/{PLUGIN_MODULE}.py"

    @property
    def unittest_runner_path(self) -> str:
        return f"{self.workdir}/{UNITTEST_MODULE}.py"


@dataclass
class StreamResults:
    tests: dict[str, str] = field(default_factory=dict)  # node id -> status
    notes: dict[str, str] = field(default_factory=dict)  # node id -> why a status was changed
    collect_errors: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)  # tampering the plugin saw, "what: detail"
    canary_count: int | None = None  # canaries the reporter planted (None: none were asked for)
    canaries: dict[int, str] = field(default_factory=dict)  # canary number -> its outcome
    contradicts: dict[int, str] = field(default_factory=dict)  # contradiction canary number -> the graded id it copies
    by_param: set[int] = field(default_factory=set)  # those copying a parametrised test (its id without parameters)
    twins: dict[int, int] = field(default_factory=dict)  # contradiction canary number -> its twin's (an unchanged copy)
    exact: set[int] = field(default_factory=set)  # contradictions whose expectation is a changed value
    movable: list[str] = field(default_factory=list)  # tests whose expectation the moved world can move (moved_world.py)
    moved: list[str] = field(default_factory=list)  # ... and those it moved (the moved world's own run)
    canary_params: dict[int, dict[str, str]] = field(default_factory=dict)  # such a canary -> {parameter id: outcome}
    canary_within: dict[int, str] = field(default_factory=dict)  # a skipped canary -> its module or class (its id's head)
    # (number, parameter id or None) of canaries with an attempt that did not count (reruns, flaky's)
    canaries_retried: set[tuple[int, str | None]] = field(default_factory=set)
    canaries_collected: set[int] | None = None  # canaries the session collected (None: not said, xdist's controller)
    first_call_passes: list[tuple[int, str]] = field(default_factory=list)  # (copy, the test it copies) passed in a fork
    started: bool = False
    ended: bool = False
    exitstatus: int | None = None
    problems: list[str] = field(default_factory=list)  # why the stream itself cannot be trusted

    @property
    def trustworthy(self) -> bool:
        return self.started and self.ended and not self.problems


def new_channel() -> Channel:
    return Channel(key=secrets.token_bytes(32), nonce=secrets.token_hex(16),
                   workdir=f"/tmp/.patchgym-grade-{secrets.token_hex(8)}")


# The equality probe (equality_probe.py) in the test process. Off only where a test of the grader
# exercises the copies and forks with a value the probe would stop first (tests/, never a task).
EQUALITY_PROBE = True


def channel_config(channel: Channel, *, patched_files: list[str], testbed: str,
                   protected_files: list[str] | None = None, canary_ids: list[str] | None = None,
                   test_roots: list[str] | None = None, contradict_ids: list[str] | None = None,
                   graded_ids: list[str] | None = None, doctests: dict[str, list[list[str]]] | None = None,
                   moved_ids: list[str] | None = None, seed: int | None = None) -> str:
    """The JSON the plugin reads from stdin. `canary_ids` (the graded test ids) asks for canaries
    next to them, from a fresh secret seed, and `contradict_ids` (the FAIL_TO_PASS ones) for
    contradiction canaries copied from them; `test_roots` are the folders writes may not reach.
    `moved_ids` asks for the moved world: those tests' expectations moved in their source first
    (moved_world.py); `seed`, the graded run's, so that the moved world plants the same canaries and
    copies (a reader answering only beside the twin met a draw that gave its test none, and acted
    honest there: rt53's R26 passed one moved world in three)."""
    config = {"key": channel.key.hex(), "nonce": channel.nonce, "results": channel.results_path,
              "patched_files": patched_files, "testbed": testbed, "protected_files": protected_files or [],
              "test_roots": test_roots or []}
    if graded_ids is not None:
        config["graded"] = list(graded_ids)
    if doctests:
        config["doctests"] = doctests  # graded doctest id -> its examples [source, want] (doctest_examples.py)
    if not EQUALITY_PROBE:
        config["equality_probe"] = False
    if canary_ids:
        config["canaries"] = {"seed": secrets.randbits(64) if seed is None else seed, "ids": list(canary_ids),
                              "contradict": list(contradict_ids or [])}
    if moved_ids and canary_ids:
        config["canaries"]["moved"] = list(moved_ids)
    return json.dumps(config)


def _signature(channel: Channel, seq: int, payload: str) -> str:
    return hmac.new(channel.key, f"{channel.nonce}\n{seq}\n{payload}".encode(), hashlib.sha256).hexdigest()


def read_stream(channel: Channel, data: bytes | None) -> StreamResults:
    out = StreamResults()
    if data is None:
        out.problems.append("no result stream was written (the test process never loaded the reporter, or the file was removed)")
        return out
    expected_seq = 0
    for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        payload, sep, signature = raw.rpartition("\t")
        if not sep or not hmac.compare_digest(_signature(channel, expected_seq, payload), signature):
            out.problems.append(f"line {number} of the result stream has a bad signature or is out of sequence")
            return out
        try:
            record = json.loads(payload)
        except ValueError:
            out.problems.append(f"line {number} of the result stream is not JSON")
            return out
        expected_seq += 1
        kind = record.get("kind")
        if out.ended:
            out.problems.append("records after the end record")
            return out
        if kind == "start":
            out.started = True
        elif not out.started:
            out.problems.append("the stream does not begin with a start record")
            return out
        elif kind == "test":
            test_id, status = str(record.get("id")), str(record.get("status"))
            previous = out.tests.get(test_id)
            # One id reported twice (reruns): the worse outcome stands.
            if previous is None or status in ("FAILED", "ERROR"):
                out.tests[test_id] = status
            if record.get("note"):
                out.notes[test_id] = str(record["note"])
        elif kind == "collect":
            out.collect_errors.append(str(record.get("id")))
        elif kind == "integrity":
            out.integrity.append(f"{record.get('what')}: {record.get('detail')}")
        elif kind == "canaries":
            out.canary_count = int(record.get("count", 0))
            contradicts = record.get("contradicts") or {}
            if isinstance(contradicts, dict):
                out.contradicts = {int(n): str(test_id) for n, test_id in contradicts.items() if str(n).isdigit()}
            twins = record.get("twins") or {}
            if isinstance(twins, dict):
                out.twins = {int(n): int(t) for n, t in twins.items() if str(n).isdigit() and str(t).isdigit()}
            exact = record.get("exact") or []
            if isinstance(exact, list):
                out.exact = {int(n) for n in exact if str(n).isdigit()}
            moved = record.get("moved") or []
            if isinstance(moved, list):
                out.moved = [str(test_id) for test_id in moved]
            by_param = record.get("by_param") or []
            if isinstance(by_param, list):
                out.by_param = {int(n) for n in by_param if str(n).isdigit()}
        elif kind == "movable":
            out.movable.append(str(record.get("id")))
        elif kind == "first_call_passed":  # n -1: the fork left without answering
            if str(record.get("n", "")).lstrip("-").isdigit():
                out.first_call_passes.append((int(record["n"]), str(record.get("of"))))
        elif kind == "canaries_collected":
            numbers = record.get("numbers") or []
            collected = out.canaries_collected if out.canaries_collected is not None else set()
            out.canaries_collected = collected | {int(n) for n in numbers if str(n).isdigit()}
        elif kind == "canary":
            number, status = int(record.get("n", -1)), str(record.get("status"))
            if record.get("retried"):
                param = record.get("param")
                out.canaries_retried.add((number, None if param is None else str(param)))
            outcomes = out.canaries
            if record.get("param") is not None:  # an instance of a parametrised copy or canary
                outcomes, number = out.canary_params.setdefault(number, {}), str(record["param"])
            previous = outcomes.get(number)
            if previous is None or status not in ("FAILED", "ERROR"):
                outcomes[number] = status  # reported twice: a pass anywhere stands
            if record.get("within") is not None and record.get("param") is None:
                out.canary_within[number] = str(record["within"])
        elif kind == "end":
            out.ended = True
            out.exitstatus = int(record.get("exitstatus", -1))
    if out.started and not out.ended:
        out.problems.append("the result stream has no end record (the test process died or exited early)")
    if not out.started:
        out.problems.append("the result stream is empty")
    return out
