"""``[tool.mutant-gate]`` in pyproject.toml: defaults for ``run`` and ``tui``, flags win.

Keys are the long flag names (``fail-under``, ``compile-target``, ``base-url``...;
``fail_under`` is accepted too). The table is looked up from the kernel file's
directory upward, then from the current directory upward; the first pyproject.toml
holding a ``[tool.mutant-gate]`` table is used. ``--config PATH`` names one file
(its table may be empty), ``--no-config`` ignores configuration.

Values are checked as the flag would check them: a number where the flag takes a
number, one of its choices, ``true``/``false`` for an on/off flag, a list of strings
for a repeatable flag (``tests``, ``exclude``); ``operators`` and ``compile-target`` also
take a list; ``paths`` (the kernel files and directories, when the command line names
none) is a list of paths; the table ``[tool.mutant-gate.fail-under-paths]`` maps path
globs to percents (per-path thresholds). Relative paths (``paths``, ``tests``, ``json``, ``cache-dir``,
report paths...) are relative to the pyproject.toml that names them. An unknown key, or
a value of the wrong kind, is one line naming the key, exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tomllib

from mutant_gate.engine.errors import BadInput

TABLE = "mutant-gate"
#: Options that are about configuration itself, never configurable.
NOT_CONFIGURABLE = {"help", "config", "no_config"}
#: Options holding paths: relative values are relative to the config file.
PATH_KEYS = {
    "json",
    "cache_dir",
    "tests",
    "write_tests",
    "stryker",
    "junit",
    "markdown",
    "html",
    "project_root",
    "accepted",
    "predict",
}
#: Old spellings still read, each said once per process: old key -> new key.
RENAMED_KEYS = {"baseline": "accepted"}
_said: set[str] = set()


def deprecated(old: str, new: str) -> None:
    """Say once (on stderr) that ``old`` is an old spelling of ``new``."""
    if old not in _said:
        _said.add(old)
        print(f"mutant-gate: {old} is deprecated: it is called {new} now", file=sys.stderr)


class Renamed(argparse.Action):
    """An option's old spelling: stores into the new one's dest, and says so once."""

    def __init__(self, option_strings, dest, new: str, **kwargs) -> None:
        self.new = new
        kwargs.setdefault("metavar", "PATH")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        deprecated(option_string or self.option_strings[0], self.new)
        setattr(namespace, self.dest, values)


#: Options whose comma-separated value may be written as a TOML list.
LIST_KEYS = {"operators", "compile_target", "probe_triggers"}


def find_config(start_dirs: list[str]) -> str | None:
    """The first pyproject.toml with a ``[tool.mutant-gate]`` table above any start dir."""
    seen: set[str] = set()
    for start in start_dirs:
        here = os.path.abspath(start)
        while here not in seen:
            seen.add(here)
            candidate = os.path.join(here, "pyproject.toml")
            if os.path.isfile(candidate) and TABLE in _read(candidate).get("tool", {}):
                return candidate
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    return None


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML: {exc}") from None


def load_table(path: str) -> dict:
    """The ``[tool.mutant-gate]`` table of ``path`` (empty when it has none)."""
    table = _read(path).get("tool", {}).get(TABLE, {})
    if not isinstance(table, dict):
        raise BadInput(f"{path}: [tool.{TABLE}] must be a table")
    return table


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest -> action for every long option a config key may set."""
    found = {}
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in NOT_CONFIGURABLE:
            found[action.dest] = action
    return found


def _is_flag(action: argparse.Action) -> bool:
    return action.nargs == 0 and action.const is True


def _convert(key: str, value: object, action: argparse.Action, path: str) -> object:
    where = f"{path}: [tool.{TABLE}] {key}"
    base = os.path.dirname(os.path.abspath(path))
    dest = action.dest
    if dest == "write_tests" and value in (False, ""):
        return ""  # write-tests = false: no tests written (--no-write-tests)
    if _is_flag(action):
        if not isinstance(value, bool):
            raise BadInput(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise BadInput(f"{where}: expected a list of strings, got {value!r}")
        return [_path(v, base) if dest in PATH_KEYS else v for v in items]
    if dest in LIST_KEYS and isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise BadInput(f"{where}: expected a string or a list of strings, got {value!r}")
        value = ",".join(value)
    if isinstance(value, bool | dict | list):
        raise BadInput(f"{where}: expected a single value, got {value!r}")
    if action.type is not None:
        if action.type in (int, float) and isinstance(value, str):
            raise BadInput(f"{where}: expected a number, got {value!r}")
        if action.type is int and isinstance(value, float):
            raise BadInput(f"{where}: expected a whole number, got {value!r}")
        try:
            value = action.type(value)
        except (TypeError, ValueError):
            raise BadInput(f"{where}: expected {action.type.__name__}, got {value!r}") from None
    elif not isinstance(value, str):
        raise BadInput(f"{where}: expected a string, got {value!r}")
    if action.choices is not None and value not in action.choices:
        raise BadInput(f"{where}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    return _path(value, base) if dest in PATH_KEYS and isinstance(value, str) else value


def _path(value: str, base: str) -> str:
    value = os.path.expanduser(value)
    return value if os.path.isabs(value) else os.path.normpath(os.path.join(base, value))


#: ``paths``: the kernel files and directories a run takes when the command line names
#: none (``run``'s positional PATH...), relative to the pyproject.toml
PATHS_KEY = "paths"


def _paths_value(value: object, path: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise BadInput(f"{path}: [tool.{TABLE}] paths: expected a list of paths, got {value!r}")
    base = os.path.dirname(os.path.abspath(path))
    return [_path(v, base) for v in items]


#: ``[tool.mutant-gate.fail-under-paths]``: per-path thresholds, glob -> percent (a
#: module under the first glob its path matches fails the gate); not a flag
THRESHOLDS_KEY = "fail_under_paths"


def _thresholds_value(value: object, path: str) -> list[tuple[str, float]]:
    """``{"src/ops/*.py": 90, ...}`` -> [(absolute glob, percent)] in the table's order;
    globs are relative to the pyproject.toml, percents between 0 and 100."""
    where = f"{path}: [tool.{TABLE}.fail-under-paths]"
    if not isinstance(value, dict) or not value:
        raise BadInput(f"{where}: expected a table of GLOB = PERCENT, got {value!r}")
    base = os.path.dirname(os.path.abspath(path))
    found: list[tuple[str, float]] = []
    for glob, pct in value.items():
        if isinstance(pct, bool) or not isinstance(pct, int | float):
            raise BadInput(f"{where} {glob!r}: expected a percent (a number), got {pct!r}")
        if not 0 <= pct <= 100:
            raise BadInput(f"{where} {glob!r}: {pct:g} is not between 0 and 100")
        found.append((_path(glob, base), float(pct)))
    return found


def config_values(table: dict, path: str, run_parser: argparse.ArgumentParser) -> dict[str, object]:
    """dest -> value for every key of ``table``, checked against ``run``'s options."""
    options = _options(run_parser)
    values: dict[str, object] = {}
    for key, value in table.items():
        dest = key.replace("-", "_")
        if dest == PATHS_KEY:
            values[dest] = _paths_value(value, path)
            continue
        if dest == THRESHOLDS_KEY:
            values[dest] = _thresholds_value(value, path)
            continue
        if dest in RENAMED_KEYS:
            deprecated(f"[tool.{TABLE}] {key}", RENAMED_KEYS[dest])
            dest = RENAMED_KEYS[dest]
        if dest not in options:
            known = sorted(a.option_strings[-1][2:] for a in options.values())
            close = difflib.get_close_matches(key.replace("_", "-"), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
            raise BadInput(f"{path}: unknown key {key!r} in [tool.{TABLE}] ({hint})")
        values[dest] = _convert(key, value, options[dest], path)
    return values


def _explicit(parser: argparse.ArgumentParser, argv: list[str] | None) -> set[str]:
    """The dests the command line itself set (parsed again with every default hidden)."""
    hidden = {}
    for action in parser._actions:
        hidden[action] = action.default
        action.default = argparse.SUPPRESS
    try:
        namespace, _ = parser.parse_known_args(argv)
    finally:
        for action, default in hidden.items():
            action.default = default
    return set(vars(namespace))


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def apply_config(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None
) -> argparse.Namespace:
    """``args`` with the config's values wherever the command line left a default.

    ``run`` and ``tui`` take every key; commands that only read the cache (``report``,
    ``rerun``, ``cache``) take ``cache-dir`` from the current directory's config.
    """
    if args.command not in ("run", "tui"):
        wants = [k for k in ("cache_dir", "accepted") if getattr(args, k, "") is None]
        if wants:
            path = find_config([os.getcwd()])
            if path is not None:
                values = config_values(load_table(path), path, subparser(parser, "run"))
                for key in wants:
                    setattr(args, key, values.get(key))
        return args
    if getattr(args, "no_config", False):
        return args
    path = getattr(args, "config", None)
    if path:
        if not os.path.isfile(path):
            raise BadInput(f"--config: no such file: {path}")
    else:
        first = getattr(args, "file", None)
        starts = [os.getcwd()]
        if first:  # a directory's table first, else the kernel file's directory's
            here = first if os.path.isdir(first) else os.path.dirname(os.path.abspath(first))
            starts.insert(0, here)
        path = find_config([d for d in starts if os.path.isdir(d)])
        if path is None:
            return args
    values = config_values(load_table(path), path, subparser(parser, "run"))
    explicit = _explicit(subparser(parser, args.command), _sub_argv(argv, args.command))
    paths = values.pop(PATHS_KEY, None)
    if paths and not getattr(args, "paths", None):  # the command line's paths win
        args.paths, args.file = list(paths), paths[0]  # type: ignore[index]
    args.fail_under_paths = values.pop(THRESHOLDS_KEY, [])
    for dest, value in values.items():
        if dest not in explicit and hasattr(args, dest):
            setattr(args, dest, value)
    args.config = path
    return args


def _sub_argv(argv: list[str] | None, command: str) -> list[str]:
    argv = list(sys.argv[1:] if argv is None else argv)
    return argv[argv.index(command) + 1 :] if command in argv else argv
