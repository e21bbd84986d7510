"""The legend under the header: every cell state with its glyph, in the grid's palette."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from mutant_gate.tui.model import STATES
from mutant_gate.tui.widgets.mutant_grid import GLYPHS

LABELS = {
    "pending": "pending",
    "running": "running",
    "killed": "killed",
    "survived": "survived",
    "equivalent": "equivalent (claimed)",
    "not_compilable": "not compilable",
    "error": "error",
}


class Legend(Widget):
    """One line: `` ✓ killed  ✗ survived ...``; styled by the same CSS classes as the grid."""

    COMPONENT_CLASSES = {*(f"-{s}" for s in STATES), "-marked"}
    DEFAULT_CSS = """
    Legend { height: 1; }
    Legend > .-marked { text-style: bold underline; }
    """

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for state in STATES:
            text.append(f" {GLYPHS[state]} ", self.get_component_rich_style(f"-{state}"))
            text.append(f"{LABELS[state]}  ")
        text.append("[✗]", self.get_component_rich_style("-survived", "-marked"))
        text.append(" marked for stage 2")
        return text
