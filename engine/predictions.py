"""Pre-registered predictions: what the user expects of some mutants, written down
before the run, scored after it.

``--predict FILE`` (TOML or JSON) holds a list ``predict`` of predictions. Each names
mutants, by ``id`` (or a unique prefix), or by ``operator`` and ``line`` (optionally
``function``; every mutant that matches is held to it), and expects one or more of:

- ``verdict``: killed | survived | equivalent | not_compilable | error
- ``by``: what killed it (own-check, bounds, crash, timeout, test:NAME)
- ``oracle``: identical | differs (the diff-oracle's outcome)
- ``compile``: compiles | fails (the compile-check on every target)

The file's text and its sha256 go into the run record before the baseline runs (the
run section ``predictions``), so what is scored is what was written before anything
executed. After the run each prediction is right when every expectation holds for
every mutant it names; the report says "predicted 4 of 5" and lists the misses. If the
file on disk no longer has the stored hash, the report says so (``file_now``): it is
scored against the stored copy either way.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import tomllib

from .errors import BadInput
from .vocabulary import REPORT_STATES

EXPECTATIONS = {
    "verdict": tuple(REPORT_STATES),
    "by": None,  # any string
    "oracle": ("identical", "differs"),
    "compile": ("compiles", "fails"),
}
SELECTORS = ("id", "operator", "line", "function", "note")


def parse(text: str, where: str) -> list[dict]:
    """The predictions in ``text``: TOML, or JSON (an object with ``predict``, or a list)."""
    data = _loads(text, where)
    items = data if isinstance(data, list) else data.get("predict")
    if not isinstance(items, list) or not items:
        raise BadInput(f"{where}: expected a non-empty list `predict` ([[predict]] in TOML)")
    for n, item in enumerate(items, 1):
        _check_prediction(item, f"{where}: prediction {n}")
    return list(items)


def _loads(text: str, where: str):
    """``text`` read as TOML, else as JSON; BadInput when it is neither."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        try:
            return json.loads(text)
        except ValueError:
            raise BadInput(f"{where}: neither valid TOML nor JSON: {exc}") from None


def _check_prediction(item: object, here: str) -> None:
    """BadInput (said at ``here``) unless ``item`` is a table of known keys that names its
    mutants and expects something."""
    if not isinstance(item, dict):
        raise BadInput(f"{here}: not a table")
    unknown = set(item) - set(SELECTORS) - set(EXPECTATIONS)
    if unknown:
        raise BadInput(f"{here}: unknown key {sorted(unknown)[0]!r}")
    _check_selectors(item, here)
    _check_expectations(item, here)


def _check_selectors(item: dict, here: str) -> None:
    """BadInput unless the prediction names its mutants: by ``id``, or by ``operator`` and
    a whole-number ``line``."""
    if not item.get("id") and not (item.get("operator") and item.get("line")):
        raise BadInput(f"{here}: name its mutants by `id`, or by `operator` and `line`")
    if "line" in item and not isinstance(item["line"], int):
        raise BadInput(f"{here}: `line` must be a whole number")


def _check_expectations(item: dict, here: str) -> None:
    """BadInput unless the prediction expects something, each expectation a string (one
    of those its key allows, where it names them)."""
    expected = {k: item[k] for k in EXPECTATIONS if k in item}
    if not expected:
        raise BadInput(f"{here}: expects nothing (verdict, by, oracle or compile)")
    for key, value in expected.items():
        _check_value(key, value, here)


def _check_value(key: str, value: object, here: str) -> None:
    """BadInput unless ``value`` is a string that expectation ``key`` allows."""
    allowed = EXPECTATIONS[key]
    if not isinstance(value, str) or (allowed is not None and value not in allowed):
        what = ", ".join(allowed) if allowed else "a string"
        raise BadInput(f"{here}: {key} must be {what}, not {value!r}")


def register(path: str) -> dict:
    """The run section stored before anything executes: the file, its text and hash."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise BadInput(f"--predict: no such file: {path}") from None
    except OSError as exc:
        raise BadInput(f"--predict: cannot read {path}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--predict: {path} is not UTF-8 text") from None
    parse(text, path)
    return {
        "file": os.path.abspath(path),
        "sha256": hashlib.sha256(data).hexdigest(),
        "stored_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "text": text,
    }


def file_now(section: dict) -> str:
    """``same``, ``changed`` (the hash differs from the stored one) or ``missing``."""
    try:
        with open(section.get("file") or "", "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return "missing"
    return "same" if digest == section.get("sha256") else "changed"


def _outcome(row: dict, key: str) -> str | None:
    """What happened to the mutant of ``row`` in the terms of expectation ``key``."""
    if key in ("verdict", "by"):
        return row.get(key)
    if key == "oracle":
        oracle = row.get("oracle")
        identical = oracle.get("identical") if isinstance(oracle, dict) else None
        return {True: "identical", False: "differs"}.get(identical, "not run")
    return _compile_outcome(row)


def _compile_outcome(row: dict) -> str:
    """``fails`` when a target failed to compile, ``compiles`` when every one did, else
    ``not run``."""
    results = [r for r in (row.get("compile") or {}).values() if isinstance(r, dict)]
    if any(r.get("ok") is False for r in results):
        return "fails"
    return "compiles" if results and all(r.get("ok") for r in results) else "not run"


def _named(rows: list[dict], item: dict) -> list[dict]:
    """The rows a prediction names: by its id (else the ids it begins), else every row of
    its operator and line (and function, where given)."""
    if item.get("id"):
        return _by_id(rows, str(item["id"]))
    return [r for r in rows if _at(r, item)]


def _by_id(rows: list[dict], ref: str) -> list[dict]:
    """The row whose id is ``ref``, else every row whose id begins with it."""
    exact = [r for r in rows if r.get("id") == ref]
    return exact or [r for r in rows if str(r.get("id", "")).startswith(ref)]


def _at(row: dict, item: dict) -> bool:
    """Whether ``row`` is of the operator and line (and function, where given) ``item`` names."""
    return all(
        (
            row.get("operator") == item["operator"],
            row.get("line") == item["line"],
            not item.get("function") or row.get("function") == item["function"],
        )
    )


def _label(item: dict) -> str:
    if item.get("id"):
        return str(item["id"])
    where = f" in {item['function']}" if item.get("function") else ""
    return f"{item['operator']} line {item['line']}{where}"


def score(section: dict, rows: list[dict]) -> dict:
    """``right`` of ``total`` predictions, and the misses with what happened."""
    items = parse(section.get("text") or "", "the stored predictions")
    misses = []
    for item in items:
        expected = {k: item[k] for k in EXPECTATIONS if k in item}
        wrong = _misses(_named(rows, item), expected)
        if wrong:
            misses.append({"prediction": _label(item), "expected": expected, "got": wrong})
    return {"right": len(items) - len(misses), "total": len(items), "misses": misses}


def _misses(named: list[dict], expected: dict) -> list[str]:
    """Each expectation a named mutant did not meet, in words (none named: a miss too)."""
    wrong = []
    if not named:
        wrong.append("no such mutant in the run")
    for row in named:
        wrong += _row_misses(row, expected)
    return wrong


def _row_misses(row: dict, expected: dict) -> list[str]:
    """Each expectation the mutant of ``row`` did not meet, in words."""
    wrong = []
    for key, value in expected.items():
        got = _outcome(row, key)
        if got != value:
            wrong.append(f"{row.get('id')}: {key} {got or 'none'}, predicted {value}")
    return wrong


def lines(section: dict | None) -> list[str]:
    """The predictions in words, for every face and format: the score, the file's state,
    one line per miss."""
    if not isinstance(section, dict) or "result" not in section:
        return []
    result = section["result"]
    out = [
        f"predicted {result['right']} of {result['total']} (registered before the run, "
        f"sha256 {str(section.get('sha256'))[:12]})"
    ]
    out += _file_state_lines(section)
    out += [f"missed: {m['prediction']}: {'; '.join(m['got'])}" for m in result["misses"]]
    return out


def _file_state_lines(section: dict) -> list[str]:
    """A line where the prediction file changed or is gone since the run stored it."""
    state = section.get("file_now")
    if state == "changed":
        return [
            f"the prediction file {section.get('file')} changed after the run stored it "
            "(hash mismatch): scored against the stored copy"
        ]
    if state == "missing":
        return [f"the prediction file {section.get('file')} is gone; scored the stored copy"]
    return []
