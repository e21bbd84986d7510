"""Command line and (later) the Textual explorer."""
