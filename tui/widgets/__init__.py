"""Widgets of the explorer, one per file."""
