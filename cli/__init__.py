"""The ``mutant-gate`` command line: argparse, a rich reporter of the engine's events, and
the commands around a run. No Textual here: ``tui`` and ``replay`` import the explorer
(``mutant_gate.tui``) only when they are used."""
