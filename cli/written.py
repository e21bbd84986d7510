"""The line that says where a run's written tests are and how to run them."""

from __future__ import annotations

from rich.console import Console

from mutant_gate.cli.check_lines import counted
from mutant_gate.engine import session


def written_line(written) -> str:
    """``3 tests (2 files, 1 data file) written to DIR/; run them with:`` and the
    command on a line of its own; tests are test functions, files test files, data
    files (golden values) counted apart."""
    folder = written.shown.rstrip("/") + "/"
    parts = [counted(written.files, "file")]
    if written.data:
        parts.append(counted(written.data, "data file"))
    them = "it" if written.tests == 1 else "them"
    return (
        f"{counted(written.tests, 'test')} ({', '.join(parts)}) written to {folder}; "
        f"run {them} with:\n  {written.command}"
    )


def say_written(
    run: session.Session, directory: str | None, console: Console, driver: object = None
) -> None:
    """The run's written tests in ``directory`` (none: the run writes none), in one line;
    nothing when it accepted none. ``driver``: a library module's run (``Session.driver``)."""
    if not directory:
        return
    try:
        written = run.write_tests(directory, driver)
    except OSError as exc:
        console.print(
            f"[yellow]cannot write tests to {directory}: {exc.strerror or exc}[/]",
            highlight=False,
            soft_wrap=True,
        )
        return
    if written.files:
        console.print(written_line(written), highlight=False, markup=False)
