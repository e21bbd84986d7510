"""Filter the grid by verdict, operator (or family) and function, and a library's by
module; nothing ticked means any."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, SelectionList
from textual.widgets.selection_list import Selection

from mutant_gate.engine.vocabulary import CELL_STATES
from mutant_gate.tui.model import Filters, RunModel


class FilterScreen(ModalScreen[Filters | None]):
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "apply", "apply"),
    ]
    DEFAULT_CSS = """
    FilterScreen { align: center middle; }
    FilterScreen > Vertical {
        width: 90%; max-width: 120; height: 80%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    FilterScreen Horizontal#lists { height: 1fr; }
    FilterScreen Horizontal#lists > Vertical { width: 1fr; }
    FilterScreen SelectionList { height: 1fr; }
    FilterScreen Horizontal#buttons { height: auto; align-horizontal: right; }
    FilterScreen Button { margin: 0 0 0 1; }
    """

    def __init__(self, model: RunModel, current: Filters) -> None:
        super().__init__()
        self.model = model
        self.current = current

    def compose(self) -> ComposeResult:
        model, current = self.model, self.current
        present = set(model.states)
        verdicts = [
            Selection(f"{s.replace('_', ' ')} ({model.states.count(s)})", s, s in current.verdicts)
            for s in CELL_STATES
            if s in present or s in current.verdicts
        ]
        families = model.values("family")
        operators = [Selection(f"family {f}", f, f in current.operators) for f in families] + [
            Selection(o, o, o in current.operators) for o in model.values("operator")
        ]
        functions = [Selection(f, f, f in current.functions) for f in model.values("function")]
        modules = [Selection(m, m, m in current.modules) for m in model.values("file")]
        with Vertical():
            yield Label("Filter mutants: tick what to show (nothing ticked = any)")
            with Horizontal(id="lists"):
                with Vertical():
                    yield Label("verdict")
                    yield SelectionList(*verdicts, id="verdicts")
                with Vertical():
                    yield Label("operator / family")
                    yield SelectionList(*operators, id="operators")
                with Vertical():
                    yield Label("function")
                    yield SelectionList(*functions, id="functions")
                if model.library:
                    with Vertical():
                        yield Label("module")
                        yield SelectionList(*modules, id="modules")
            with Horizontal(id="buttons"):
                yield Button("Apply (ctrl+s)", variant="primary", id="apply")
                yield Button("Clear", id="clear")
                yield Button("Cancel (esc)", id="cancel")

    def filters(self) -> Filters:
        def picked(list_id: str) -> frozenset[str]:
            found = self.query(f"#{list_id}").results(SelectionList)
            return frozenset(value for one in found for value in one.selected)

        return Filters(
            verdicts=picked("verdicts"),
            operators=picked("operators"),
            functions=picked("functions"),
            modules=picked("modules"),
            text=self.current.text,
        )

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        self.dismiss(self.filters())

    @on(Button.Pressed, "#clear")
    def _clear(self) -> None:
        self.dismiss(Filters())

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
