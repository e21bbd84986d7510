"""The Textual explorer (app, bridge, screens, widgets); the command line is ``cli/``."""
