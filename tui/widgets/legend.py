"""The legend under the header: every cell state with its glyph, in the grid's palette."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from mutant_gate.engine.vocabulary import CELL_STATES, GLYPHS, Verdict

#: Where the legend says more than the state's name.
LABELS = {
    Verdict.EQUIVALENT.value: "equivalent (claimed)",
    Verdict.NOT_COMPILABLE.value: "not compilable",
}


class Legend(Widget):
    """One line: `` ✓ killed  ✗ survived ...``, styled by the same CSS classes as the grid,
    and what a click does (the grid is mouse-driven as much as key-driven)."""

    COMPONENT_CLASSES = {*(f"-{s}" for s in CELL_STATES), "-marked"}
    DEFAULT_CSS = """
    Legend { height: 1; }
    Legend > .-marked { text-style: bold underline; }
    """

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for state in CELL_STATES:
            text.append(f" {GLYPHS[state]} ", self.get_component_rich_style(f"-{state}"))
            text.append(f"{LABELS.get(state, state)}  ")
        text.append("[✗]", self.get_component_rich_style("-survived", "-marked"))
        text.append(" marked for stage 2")
        text.append("   click a cell: inspect it, double click: full screen", "dim")
        return text
