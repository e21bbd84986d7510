"""The help screen: what the grid shows, and every key (from the bindings themselves)."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

INTRO = """\
# mutant-gate explorer

Each cell is one **mutant**: a small Triton-specific bug planted in a `@triton.jit`
function. The file's own check (and any `--tests`) ran against it in the sandbox:

- **killed** (`✓`): a check failed, the bounds check fired, it crashed or timed out;
- **survived** (`✗`): every check passed; nothing tells this bug apart;
- **equivalent** (`≡`): a writer *claims* it changes nothing (a claim, not a proof);
- **not compilable** (`⊘`): the compile-check set it aside;
- **error** (`!`): the harness failed; never counted as killed.

The score is shown raw (killed / all) and adjusted (without not-compilable and
claimed-equivalent mutants). Mark survivors (`[✗]`) and run stage 2 on them: a
model writes a killer test, kept only if it passes the original and fails the
mutant when run. Accept a survivor the team lets stand (`a`, with a reason): it is
written to the baseline file (`--accepted`, else `mutant-gate-baseline.toml`), shown
dim, and left out of the adjusted score, never counted as killed. A replay
(`mutant-gate replay`) is offline and read-only, except that `a` writes the baseline.

## Keys
"""

GRID_KEYS = [
    ("arrows / h j k l", "move between mutants (the inspector follows)"),
    ("page up / down, home / end", "move by a page, to the first / last"),
    ("enter, double click", "open the mutant full screen, the keyboard in it (escape returns)"),
    ("ctrl+p", "command palette: every action by name"),
]


def key_names(binding: Binding, display: Callable[[Binding], str]) -> str:
    """A binding's keys as the keyboard shows them (``/`` and ``?``, not ``slash`` and
    ``question_mark``), ``display`` being the app's ``get_key_display``."""
    keys = [k.strip() for k in binding.key.split(",")]
    return " / ".join(display(Binding(k, binding.action)) for k in keys)


def keys_table(bindings: list[Binding], display: Callable[[Binding], str]) -> str:
    rows = ["| key | action |", "|---|---|"]
    rows += [f"| `{k}` | {what} |" for k, what in GRID_KEYS]
    for b in bindings:
        if b.description:
            rows.append(f"| `{key_names(b, display)}` | {b.tooltip or b.description} |")
    return "\n".join(rows)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "close help"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%; max-width: 100; height: 90%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__()
        self.app_bindings = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(INTRO + keys_table(self.app_bindings, self.app.get_key_display))

    def action_dismiss(self) -> None:
        self.dismiss(None)
