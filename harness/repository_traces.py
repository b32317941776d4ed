"""What the repository's own code names at base, of what the audit hook lets a test's call do only
where the repository does it too: tracing, profiling, frames, source reads, forks, processes,
ctypes and the like (`repository_traces`, the startup config's `traces`, audit_hook `asked_for_code`).
Host side only: `git grep` over the base checkout, kept per repository, commit and test files.
"""

from __future__ import annotations

import re
import subprocess

_TRACING_WORDS = {"settrace": "sys.settrace", "PyEval_SetTrace": "sys.settrace", "setprofile": "sys.setprofile",
                  "setstatprofile": "sys.setprofile", "PyEval_SetProfile": "sys.setprofile",
                  # and the standard library's profilers and tracer, which call those for their user
                  # (stop 44, fpAI FP-B1: werkzeug's ProfilerMiddleware and profilehooks name only
                  # `cProfile`/`profile`, coverage-like tools `trace.Trace`; audit_hook._PROFILER_WORDS)
                  "cProfile": "sys.setprofile", "from profile import": "sys.setprofile", "import profile$": "sys.setprofile",
                  "import profile[ ,]": "sys.setprofile", r"trace\.Trace": "sys.settrace", "from trace import": "sys.settrace",
                  "import trace$": "sys.settrace", "import trace[ ,]": "sys.settrace",
                  # and the collector's walks (stop 42: allowed from a test's call only where the repository walks)
                  "get_referrers": "gc.get_referrers", "get_referents": "gc.get_referents", "get_objects": "gc.get_objects",
                  # and frames (stop 43: handed to the patch's code only where the repository reaches for them;
                  # audit_hook._FRAME_WORDS, the same words)
                  **{word: "frames" for word in ("_getframe", "currentframe", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                                                 "f_back", "f_locals", "f_globals", "_current_frames", "walk_stack", "walk_tb",
                                                 "getouterframes", "getinnerframes", "inspect.stack", "inspect.trace",
                                                 "import stack", r"stack\(\)", "getframeinfo", "DEBUG_SAVEALL", "f_code", "f_lineno")},
                  # and processes told apart (stop 44: where the repository's own code does, the original
                  # test called alone in a fork tells nothing: audit_hook._FORK_WORDS, the same words)
                  **{word: "forks" for word in ("getpid", "getppid", "register_at_fork")},
                  # and ctypes (stop 45: importing it is refused to the patch's code where the
                  # repository never names it; `ctypes.memmove` raises no audit event)
                  "ctypes": "ctypes",
                  # and readline, whose history files are read and written in C (stop 51, rt41's a02, a06)
                  "readline": "readline",
                  # and faulthandler, whose stack dumps name every frame's function (stop 54, rt49's C6)
                  "faulthandler": "faulthandler",
                  # and Tcl, whose `open` raises no audit event (rt42's a3, a7), and the collector's
                  # callbacks, which run with no frame of their own (rt42's a8)
                  "tkinter": "tkinter", "Tkinter": "tkinter", r"gc\.callbacks": "gc.callbacks",
                  # and a hypothesis profile the repository's own code loads (stop 45, fpAJ FP-R: a
                  # library's testing helper that a conftest calls; test_globals.hypothesis_settings_changed)
                  "load_profile": "hypothesis.load_profile",
                  # and processes started (stop 48: where the repository's own code starts them, a start
                  # from the patch's code is the library's; fpAM AM-1: aiomultiprocess, pebble)
                  **{word: "spawns" for word in ("subprocess", "Popen", "multiprocessing", "ProcessPool", "posix_spawn",
                                                 "os.system", "os.exec", "os.fork", "pexpect", "ptyprocess", "loky")},
                  # and Python source read (stop 47: a protected test module is read by the patch's code only
                  # where the repository reads source; audit_hook._SOURCE_WORDS, the same words)
                  **{word: "source" for word in ("linecache", "getsource", "findsource", "tokenize", "extract_stack", "format_stack",
                                                 "print_stack", "StackSummary", "import executing", "from executing", "asttokens",
                                                 "stack_data", "stack_info")}}
# frame words that are source reads too (inspect's frame records read each frame's lines)
_ALSO_SOURCE = ("getouterframes", "getinnerframes", "getframeinfo", "inspect.stack", "inspect.trace", "import stack")
_traces_seen: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}


def repository_traces(repo: str, commit: str, test_files: tuple[str, ...]) -> list[str]:
    """The events of `_TRACING_WORDS` that the repository's files at `commit` name, `test_files`
    left out (`git grep`, kept per repository, commit and test files: ~20 ms on a mid-sized repository)."""
    key = (repo, commit, test_files)
    if key not in _traces_seen:
        pattern = "|".join(_TRACING_WORDS)
        excluded = [f":(exclude,literal){path}" for path in test_files]
        done = subprocess.run(["git", "-C", repo, "grep", "-I", "-o", "-h", "-E", pattern, commit, "--", ".", *excluded],
                              capture_output=True, text=True, errors="replace")
        found = set(done.stdout.splitlines()) if done.returncode in (0, 1) else set()  # (each match, as found)
        events = {event for word, event in _TRACING_WORDS.items() if any(re.fullmatch(word, match) for match in found)}
        if any(re.fullmatch(word, match) for word in _ALSO_SOURCE for match in found):
            events.add("source")
        _traces_seen[key] = sorted(events)
    return _traces_seen[key]

