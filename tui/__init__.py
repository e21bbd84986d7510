"""The command line and the Textual explorer (app, bridge, screens, widgets)."""
