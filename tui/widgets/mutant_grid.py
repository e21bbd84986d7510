"""The mutant grid: one cell per mutant, grouped by kernel function or operator family
(a library's report: by module first). A group folds to its title line (``fold``, or a
click on its title): its cells leave the grid and the cursor skips them.

A cell's state is a CSS class of the grid's cells (``MutantGrid > .-survived``),
never a colour in Python; the palette lives in ``app.tcss``. The grid is one
Line API widget that renders only the visible lines: two thousand cell widgets
take seconds to mount and make every repaint slow (measured: 2.4 s to mount,
130 ms per message loop), while a line costs microseconds. A changed mutant
repaints its own line and its group's header line, nothing else.
"""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from mutant_gate.engine.vocabulary import CELL_STATES, GLYPHS
from mutant_gate.tui.model import KIND_WORDS, Filters, RunModel, survivor_kind

CELL_WIDTH = 3
_HEADER = -1


class MutantGrid(ScrollView, can_focus=True):
    """Cells of a ``RunModel``'s mutants; arrows or mouse move the cursor."""

    COMPONENT_CLASSES = {
        *(f"-{s}" for s in CELL_STATES),
        "-cursor",
        "-marked",
        "-group",
        "-accepted",
        "-identical",
    }
    BINDINGS = [
        Binding("left,h", "move(-1, 0)", "left", show=False),
        Binding("right,l", "move(1, 0)", "right", show=False),
        Binding("up,k", "move(0, -1)", "up", show=False),
        Binding("down,j", "move(0, 1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "jump(0)", "first", show=False),
        Binding("end", "jump(-1)", "last", show=False),
        Binding("enter", "choose", "inspect", show=False),
    ]
    DEFAULT_CSS = """
    MutantGrid {
        height: 1fr;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
    }
    MutantGrid > .-cursor { text-style: reverse bold; }
    MutantGrid > .-marked { text-style: bold underline; }
    MutantGrid > .-group { text-style: bold; }
    MutantGrid > .-accepted { text-style: dim italic; }
    MutantGrid > .-identical { background: $error-muted; text-style: not bold; }
    """

    class Highlighted(Message):
        """The cursor moved to another mutant (None: nothing is visible)."""

        def __init__(self, grid: MutantGrid, mutant_id: str | None) -> None:
            super().__init__()
            self.grid, self.mutant_id = grid, mutant_id

        @property
        def control(self) -> MutantGrid:
            return self.grid

    class Chosen(Message):
        """Enter or a double click on a mutant: inspect it closely."""

        def __init__(self, grid: MutantGrid, mutant_id: str) -> None:
            super().__init__()
            self.grid, self.mutant_id = grid, mutant_id

        @property
        def control(self) -> MutantGrid:
            return self.grid

    def __init__(
        self,
        model: RunModel,
        *,
        grouping: str = "function",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.model = model
        self.grouping = grouping
        self.filters = Filters()
        self._groups: list[tuple[str, list[int]]] = []  # (key, row indexes) as shown
        self._order: list[int] = []  # row indexes in display order
        self._position: dict[int, int] = {}  # row index -> place in _order
        self._lines: list[tuple[int, int, int]] = []  # (group, first, end) or (group, -1, 0)
        self._where: dict[int, tuple[int, int]] = {}  # row index -> (line, column)
        self._group_line: list[int] = []
        self._columns = 0
        self._cursor = 0
        self._strips: dict[int, Strip] = {}
        self._rebuild_pending = False
        #: the groups folded to their title line, by key (kept across a regroup)
        self.folded: set[str] = set()

    def on_mount(self) -> None:
        self.rebuild()

    # -- public ---------------------------------------------------------------
    @property
    def current(self) -> str | None:
        """The mutant under the cursor."""
        if not self._order:
            return None
        return self.model.rows[self._order[self._cursor]]["id"]

    @property
    def visible_ids(self) -> list[str]:
        return [self.model.rows[i]["id"] for i in self._order]

    @property
    def group_keys(self) -> list[str]:
        return [key for key, _ in self._groups]

    def rebuild(self, *, filters: Filters | None = None, grouping: str | None = None) -> None:
        """Regroup and refilter every row (a user's filter, grouping or a new run)."""
        if filters is not None:
            self.filters = filters
        if grouping is not None:
            self.grouping = grouping
        keep = self.current
        place = self._cursor
        groups: dict[str, list[int]] = {}
        for i in range(len(self.model.rows)):
            if self.model.matches(i, self.filters):
                groups.setdefault(self.model.group_key(i, self.grouping), []).append(i)
        rows = self.model.rows
        self._groups = [
            (key, sorted(members, key=lambda i: (rows[i].get("line", 0), rows[i].get("col", 0))))
            for key, members in groups.items()
        ]
        self._order = [
            i for key, members in self._groups if key not in self.folded for i in members
        ]
        self._position = {i: p for p, i in enumerate(self._order)}
        index = self.model.index.get(keep) if keep else None
        if index is not None and index in self._position:
            self._cursor = self._position[index]
        else:
            self._cursor = min(place, max(0, len(self._order) - 1))
        self._layout()
        self._announce()

    def update_rows(self, indexes: list[int]) -> None:
        """Some rows changed state: repaint their lines (or refilter when one leaves or
        enters the filter)."""
        for i in indexes:
            shown = i in self._position or self._key(i) in self.folded
            if self.filters.active and self.model.matches(i, self.filters) != shown:
                self._schedule_rebuild()
                return
            where = self._where.get(i)
            if where is None:
                continue
            line, _ = where
            self._repaint_line(line)
            group_line = self._group_line[self._lines[line][0]]
            self._repaint_line(group_line)
            if self.current == self.model.rows[i]["id"]:
                self._announce()

    def select(self, mutant_id: str) -> bool:
        index = self.model.index.get(mutant_id)
        if index is None or index not in self._position:
            return False
        self._move_to(self._position[index])
        return True

    # -- layout ---------------------------------------------------------------
    def _schedule_rebuild(self) -> None:
        if not self._rebuild_pending:
            self._rebuild_pending = True

            def later() -> None:
                self._rebuild_pending = False
                self.rebuild()

            self.call_after_refresh(later)

    def _layout(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        self._columns = max(1, width // CELL_WIDTH)
        self._lines, self._where, self._group_line = [], {}, []
        for g, (key, members) in enumerate(self._groups):
            self._group_line.append(len(self._lines))
            self._lines.append((g, _HEADER, 0))
            for start in range(0, 0 if key in self.folded else len(members), self._columns):
                line = len(self._lines)
                chunk = members[start : start + self._columns]
                for col, i in enumerate(chunk):
                    self._where[i] = (line, col)
                self._lines.append((g, start, start + len(chunk)))
        self._strips.clear()
        self.virtual_size = Size(max(width, self._columns * CELL_WIDTH), len(self._lines))
        self.refresh()
        self._scroll_to_cursor()

    def on_resize(self, event: events.Resize) -> None:
        width = self.scrollable_content_region.width or event.size.width
        if max(1, width // CELL_WIDTH) != self._columns:
            self._layout()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    # -- painting -------------------------------------------------------------
    def _repaint_line(self, line: int) -> None:
        self._strips.pop(line, None)
        self.refresh_line(line)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        line = scroll_y + y
        width = self.scrollable_content_region.width
        if line >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(line)
        if strip is None:
            strip = self._strips[line] = self._render_grid_line(line)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    def _render_grid_line(self, line: int) -> Strip:
        g, start, end = self._lines[line]
        key, members = self._groups[g]
        if start == _HEADER:
            return Strip([Segment(self._group_title(key, members), self._style("-group"))])
        cursor_row = self._order[self._cursor] if self._order else None
        segments = []
        states, marked, rows = self.model.states, self.model.marked, self.model.rows
        for i in members[start:end]:
            state = states[i]
            glyph = GLYPHS.get(state, "?")
            names = [f"-{state}"]
            is_marked = rows[i]["id"] in marked
            if is_marked:
                names.append("-marked")
            elif state == "survived" and rows[i].get("accepted"):
                names.append("-accepted")
            if state == "survived" and survivor_kind(rows[i]) == "identical":
                names.append("-identical")  # no difference observed: muted, still a survivor
            if i == cursor_row:
                names.append("-cursor")
            text = f"[{glyph}]" if is_marked else f" {glyph} "
            segments.append(Segment(text, self._style(*names)))
        return Strip(segments, (end - start) * CELL_WIDTH)

    def _style(self, *names: str):
        return self.get_component_rich_style(*names)

    def _group_title(self, key: str, members: list[int]) -> str:
        states = self.model.states
        survived = sum(1 for i in members if states[i] == "survived")
        pending = sum(1 for i in members if states[i] in ("pending", "running"))
        parts = [self._fold_mark(key) + key, str(len(members))]
        if survived:
            kinds = [survivor_kind(self.model.rows[i]) for i in members if states[i] == "survived"]
            said = [f"{kinds.count(k)} {words}" for k, words in KIND_WORDS.items() if k in kinds]
            parts.append(f"{survived} survived" + (f" ({', '.join(said)})" if said else ""))
        if pending:
            parts.append(f"{pending} {'not run' if self.model.stopped else 'to go'}")
        return " · ".join(parts)

    def _fold_mark(self, key: str) -> str:
        """▸ before a folded group, ▾ before an open one where groups fold (a library's
        modules, or once one is folded); nothing in a one-file run's grid as it opens."""
        if key in self.folded:
            return "▸ "
        return "▾ " if self.grouping == "module" or self.folded else ""

    # -- folding --------------------------------------------------------------
    def fold(self, key: str | None = None) -> str:
        """Fold group ``key`` (the cursor's), or unfold it where folded; what it did."""
        current = self._order[self._cursor] if self._order else None
        if key is None:
            if current is None:
                return ""
            key = self._key(current)
        inside = current is not None and self._key(current) == key
        start = next((p for p, i in enumerate(self._order) if self._key(i) == key), None)
        if key in self.folded:
            self.folded.discard(key)
            said = f"unfolded {key}"
        else:
            self.folded.add(key)
            said = f"folded {key}"
        self.rebuild()
        if inside and start is not None and self._order:  # the first cell after the fold
            self._move_to(min(start, len(self._order) - 1))
        return said

    def fold_all(self) -> str:
        """Unfold every group where any is folded; else fold all but the cursor's."""
        if self.folded:
            self.folded.clear()
            self.rebuild()
            return "unfolded every group"
        keep = self._key(self._order[self._cursor]) if self._order else None
        self.folded = {key for key, _ in self._groups if key != keep}
        self.rebuild()
        return f"folded every group but {keep}" if keep else "folded every group"

    def _key(self, i: int) -> str:
        return self.model.group_key(i, self.grouping)

    # -- cursor ---------------------------------------------------------------
    def _move_to(self, place: int) -> None:
        if not self._order:
            return
        place = max(0, min(place, len(self._order) - 1))
        if place == self._cursor:
            return
        old = self._where.get(self._order[self._cursor])
        self._cursor = place
        new = self._where.get(self._order[place])
        for where in (old, new):
            if where is not None:
                self._repaint_line(where[0])
        self._scroll_to_cursor()
        self._announce()

    def _announce(self) -> None:
        self.post_message(self.Highlighted(self, self.current))

    def _scroll_to_cursor(self) -> None:
        if not self._order:
            return
        line, col = self._where[self._order[self._cursor]]
        top = line - 1 if line > 0 and self._lines[line - 1][1] == _HEADER else line
        region = Region(col * CELL_WIDTH, top, CELL_WIDTH, line - top + 1)
        self.scroll_to_region(region, animate=False, force=True, immediate=True)

    def action_move(self, dx: int, dy: int) -> None:
        if not self._order:
            return
        if dx:
            self._move_to(self._cursor + dx)
        elif dy:
            self._move_lines(dy)

    def _move_lines(self, count: int) -> None:
        """Up or down ``count`` lines of cells (group titles do not count), same column."""
        line, col = self._where[self._order[self._cursor]]
        step = 1 if count > 0 else -1
        target = line
        for _ in range(abs(count)):
            nxt = target + step
            while 0 <= nxt < len(self._lines) and self._lines[nxt][1] == _HEADER:
                nxt += step
            if not 0 <= nxt < len(self._lines):
                break
            target = nxt
        if target == line:
            return
        g, start, end = self._lines[target]
        i = self._groups[g][1][min(start + col, end - 1)]
        self._move_to(self._position[i])

    def action_page(self, direction: int) -> None:
        if self._order:
            self._move_lines(direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, place: int) -> None:
        self._move_to(place if place >= 0 else len(self._order) - 1)

    def action_choose(self) -> None:
        if self.current is not None:
            self.post_message(self.Chosen(self, self.current))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self._lines:
            return
        line = offset.y + self.scroll_offset.y
        if not 0 <= line < len(self._lines):
            return
        g, start, end = self._lines[line]
        col = (offset.x + self.scroll_offset.x) // CELL_WIDTH
        if start == _HEADER:  # a group's title: fold or unfold it
            self.fold(self._groups[g][0])
            return
        if not start + col < end:
            return
        i = self._groups[g][1][start + col]
        self._move_to(self._position[i])
        if event.chain >= 2:
            self.action_choose()
