"""Failures the user can act on, and the one place exit codes are decided."""

from __future__ import annotations

EXIT_OK = 0
EXIT_UNDER_THRESHOLD = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Input the tool cannot work with; shown as one line, exit code 2."""

    exit_code = EXIT_BAD_INPUT
