"""`python -m patchgym.tasks.suite [DEST]`: build the bundled suite into DEST, or print the cached one.

Without DEST the cached build (`bundled_tasks()`, under $PATCHGYM_HOME/suite) is used, and built
first if needed. Either way the path of tasks.jsonl is printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from patchgym.tasks.suite.build import SuiteBuildError, build_suite
from patchgym.tasks.suite.cache import bundled_tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patchgym.tasks.suite", description=__doc__.splitlines()[0])
    parser.add_argument("dest", nargs="?", type=Path, help="an empty or new directory to build into")
    args = parser.parse_args(argv)
    try:
        print(build_suite(args.dest) if args.dest else bundled_tasks())
    except SuiteBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
