"""Cutting long tool output to its head and tail, with a notice of how much was cut.

The head shows what a command started with (usually the error), the tail how it ended (the
summary line); the middle is what gets dropped. The notice is in the text itself so the agent knows.
"""

from __future__ import annotations


def head_and_tail(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its head and tail joined by a notice of what was cut."""
    if len(text) <= max_chars:
        return text
    notice_room = 80
    keep = max(max_chars - notice_room, 2)
    head_chars = keep // 2
    tail_chars = keep - head_chars
    cut = len(text) - head_chars - tail_chars
    notice = f"\n[... {cut} characters cut from the middle of this output ...]\n"
    return text[:head_chars] + notice + text[len(text) - tail_chars :]
