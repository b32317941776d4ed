"""One deadline for a whole grading: every step asks it how much time is left."""

from __future__ import annotations

import time


class DeadlineExceeded(Exception):
    """The grading's time is up (raised between steps; a running command is cut by its timeout)."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return self.seconds - self.elapsed()

    def check(self, step: str) -> float:
        """Time left, or DeadlineExceeded naming the step that could not start."""
        left = self.remaining()
        if left <= 0:
            raise DeadlineExceeded(f"the {self.seconds:.0f}s grading deadline passed before {step}")
        return left
