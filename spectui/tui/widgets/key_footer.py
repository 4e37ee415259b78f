"""The footer: Textual's, cut to the terminal's width by priority.

Textual's footer lays every shown key in one scrolling row and docks the palette key on
its right, over whatever does not fit (`… f2 h▏^p paletteh`). This one shows F1, F2 and
the palette key always, then as many more as fit, in FOOTER_PRIORITY's order, each whole.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # not exported; test_tui_layout reads the footer at 80/100/160

from spectui.tui.keys import ACTIONS, FOOTER_PRIORITY

_RANK = {ACTIONS[binding_id][0]: rank for rank, group in enumerate(FOOTER_PRIORITY) for binding_id in group}
_GROUP = {ACTIONS[binding_id][0]: group for group in FOOTER_PRIORITY for binding_id in group}
PALETTE_CLASS = "-command-palette"


def key_width(key: FooterKey) -> int:
    """Columns a compact footer key takes: 'f6 k+' and a space after it (the palette key:
    a border on its left instead)."""
    label = cell_len(key.key_display) + (1 + cell_len(key.description) if key.description else 0)
    return label + 1


def fitting(keys: list[FooterKey], width: int) -> list[FooterKey]:
    """The keys to show in `width` columns: by rank, a pair (k−, k+) both or neither; a key
    no rank names comes after those that have one."""
    ranked = sorted(keys, key=lambda key: _RANK.get(key.action, len(FOOTER_PRIORITY)))
    chosen: list[FooterKey] = []
    used = 0
    for key in ranked:
        if key in chosen:
            continue
        group_ids = _GROUP.get(key.action)
        group = [other for other in ranked if group_ids and _GROUP.get(other.action) == group_ids] or [key]
        needed = sum(key_width(member) for member in group)
        if used + needed <= width:
            chosen += group
            used += needed
    return chosen


class KeyFooter(Footer):
    def compose(self):
        self.forget_removed_keys()
        children = list(super().compose())
        palette = [child for child in children if child.has_class(PALETTE_CLASS)]
        hidden = getattr(self.screen, "footer_hidden", frozenset)()  # a screen's keys that act but say nothing here
        keys = [child for child in children if isinstance(child, FooterKey) and child not in palette
                and child.action not in hidden]
        room = self.size.width - sum(key_width(key) for key in palette if isinstance(key, FooterKey))  # each is one
        yield from fitting(keys, room)
        yield from palette

    def forget_removed_keys(self) -> None:
        """Drop the watchers that keys of an earlier compose left on this footer. Each FooterKey
        data-binds `compact`, and Textual (8.2) prunes a reactive's watchers only when it changes,
        which `compact` never does: every recompose (a reply's start and end refresh the keys)
        kept the removed keys alive, ~450 KB a reply in the soak test."""
        watchers = getattr(self, "__watchers", {})
        for name, entries in watchers.items():
            watchers[name] = [(node, callback) for node, callback in entries if node.is_attached]

    def on_resize(self) -> None:
        if self._bindings_ready:  # the keys that fit depend on the width
            self.call_after_refresh(self.recompose)
