"""The compare view's parts: its panes and the text of its numbers."""
