"""The legend under the header: every cell state with its glyph, in the grid's palette."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from mutant_gate.engine.vocabulary import CELL_STATES, GLYPHS, Verdict

#: Where the legend says more than the state's name.
LABELS = {
    Verdict.EQUIVALENT.value: "equivalent (claimed)",
    Verdict.NOT_COMPILABLE.value: "not compilable",
    Verdict.FLAKY.value: "flaky (runs disagree)",
}
#: What a click does (the grid is mouse-driven as much as key-driven).
CLICKS = "click a cell: inspect it, double click: full screen"
GAP = "  "


class Legend(Widget):
    """`` ✓ killed  ✗ survived ...``, styled by the same CSS classes as the grid, and what
    a click does. Items never break: a terminal too narrow for one line gets a second."""

    COMPONENT_CLASSES = {*(f"-{s}" for s in CELL_STATES), "-marked"}
    DEFAULT_CSS = """
    Legend { height: auto; }
    Legend > .-marked { text-style: bold underline; }
    """

    def items(self) -> list[Text]:
        """One piece of text per thing the legend explains."""
        style = self.get_component_rich_style
        out = []
        for state in CELL_STATES:
            item = Text(f"{GLYPHS[state]} ", style(f"-{state}"))
            item.append(LABELS.get(state, state))
            out.append(item)
        marked = Text("[✗]", style("-survived", "-marked"))
        marked.append(" marked for stage 2")
        out.append(marked)
        out.append(Text(CLICKS, "dim"))
        return out

    def lines(self, width: int) -> list[Text]:
        """The items packed into lines of at most ``width`` cells (an item longer than
        a line gets a line of its own)."""
        lines: list[Text] = []
        line = Text()
        for item in self.items():
            if line.cell_len and line.cell_len + len(GAP) + item.cell_len > width:
                lines.append(line)
                line = Text()
            if line.cell_len:
                line.append(GAP)
            line.append_text(item)
        lines.append(line)
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(max(1, width)))

    def render(self) -> Text:
        return Text("\n").join(self.lines(max(1, self.content_size.width)))
