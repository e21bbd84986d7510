"""Screens of the explorer."""
