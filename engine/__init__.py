"""mutant-gate engine: everything that decides a verdict. Imports neither tui nor textual."""
