"""``python -m mutant_gate.cli``: the same as the ``mutant-gate`` script."""

from mutant_gate.cli.main import entry

if __name__ == "__main__":
    entry()
