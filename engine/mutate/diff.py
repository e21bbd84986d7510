"""Unified diffs of one local change, without diffing the whole file.

A mutant changes one run of characters, so the lines before and after it are
equal and the diff is one hunk around it. That hunk is written directly, in
``difflib.unified_diff``'s exact format, when the changed lines share no line
(the usual case); otherwise difflib runs on those lines plus context only, and
its hunk headers are shifted back to file line numbers. Either way the text is
what ``difflib.unified_diff(original_lines, mutated_lines, a/NAME, b/NAME, n=3)``
gives; a test checks that on a realistic file.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import os
import re

CONTEXT = 3
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.MULTILINE)


def _range(start: int, stop: int) -> str:
    """A hunk range as difflib writes it (``_format_range_unified``)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _same_ends(old: list[str], new: list[str]) -> tuple[int, int]:
    """How many lines ``old`` and ``new`` share at their start, then at their end."""
    same_head = 0
    while same_head < min(len(old), len(new)) and old[same_head] == new[same_head]:
        same_head += 1
    same_tail = 0
    while (
        same_tail < min(len(old), len(new)) - same_head
        and old[-1 - same_tail] == new[-1 - same_tail]
    ):
        same_tail += 1
    return same_head, same_tail


class LocalDiffer:
    def __init__(self, source: str, path: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0, *itertools.accumulate(map(len, self.lines))]
        base = os.path.basename(path)
        self.header = f"--- a/{base}\n+++ b/{base}\n"
        self.names = (f"a/{base}", f"b/{base}")

    def __call__(self, mutated: str, begin: int, end: int) -> str:
        """Diff of the original against ``mutated``, which differs from it only
        in the characters ``begin:end`` of the original."""
        lines, starts = self.lines, self.starts
        first = bisect.bisect_right(starts, begin) - 1
        last = max(first, bisect.bisect_right(starts, end - 1) - 1)
        grown = len(mutated) - starts[-1]
        old = lines[first : last + 1]
        new = mutated[starts[first] : starts[last + 1] + grown].splitlines(keepends=True)
        same_head, same_tail = _same_ends(old, new)
        removed = old[same_head : len(old) - same_tail]
        added = new[same_head : len(new) - same_tail]
        if not removed and not added:
            return ""
        if set(removed) & set(added):
            return self._difflib(mutated, first, last, grown)
        return self._hunk(first + same_head, removed, added)

    def _hunk(self, a1: int, removed: list[str], added: list[str]) -> str:
        """The diff of one run of lines from line ``a1`` (0-based) replaced, written
        as difflib would, with its context."""
        lines = self.lines
        a2 = a1 + len(removed)
        low = max(0, a1 - CONTEXT)
        high = min(len(lines), a2 + CONTEXT)
        b2 = a1 + len(added)
        parts = [
            self.header,
            f"@@ -{_range(low, high)} +{_range(low, b2 + high - a2)} @@\n",
            *(" " + line for line in lines[low:a1]),
            *("-" + line for line in removed),
            *("+" + line for line in added),
            *(" " + line for line in lines[a2:high]),
        ]
        return "".join(parts)

    def _difflib(self, mutated: str, first: int, last: int, grown: int) -> str:
        low = max(0, first - CONTEXT)
        high = min(len(self.lines), last + 1 + CONTEXT)
        window = mutated[self.starts[low] : self.starts[high] + grown]
        text = "".join(
            difflib.unified_diff(
                self.lines[low:high], window.splitlines(keepends=True), *self.names, n=CONTEXT
            )
        )
        if not low:
            return text

        def shift(match: re.Match[str]) -> str:
            old, old_len, new, new_len = match.groups()
            return f"@@ -{int(old) + low}{old_len or ''} +{int(new) + low}{new_len or ''} @@"

        return _HUNK.sub(shift, text)
