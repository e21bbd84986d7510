"""A survivor's kind: what running it showed, read off the diff-oracle's evidence.

- ``hidden_by_tolerance``: a closeness assertion of the tests let it through, and a
  tighter tolerance at that line, run on the original (several seeds) and on the mutant,
  passes the one and fails the other (``checks/tolerance.py``). A test gap with its fix.
- ``differs``: the oracle saw the mutant's outputs differ from the original's and the
  checks passed anyway. A test gap: ``outputs`` names which tensor, by how much.
- ``identical``: the oracle saw no difference, and ``reason`` says what kind of none
  (masked-off lanes only, changed values never stored, the same values everywhere).
  It stays a survivor: identical on the launches the checks make is no proof that
  other inputs cannot tell the two apart, so nothing leaves the score on it.
- ``not_checked``: the oracle did not run on it (off, or compiled mode) or could not
  compare (a timeout, no launch).

The kind is derived from the row's ``verdict`` and ``oracle`` section whenever a row is
built (``report.mutant_row``), so it always agrees with the verdict as it stands; the
faces read ``row["survivor"]`` and ``report["survivor_kinds"]``, never this module.
"""

from __future__ import annotations

from collections.abc import Iterable

from .vocabulary import Verdict

HIDDEN = "hidden_by_tolerance"
DIFFERS = "differs"
IDENTICAL = "identical"
NOT_CHECKED = "not_checked"
#: The order the faces list survivors in: test gaps first.
KINDS: tuple[str, ...] = (HIDDEN, DIFFERS, IDENTICAL, NOT_CHECKED)
#: Each kind in words, as every face heads it.
KIND_WORDS: dict[str, str] = {
    HIDDEN: "hidden by tolerance",
    DIFFERS: "outputs differ",
    IDENTICAL: "no difference observed",
    NOT_CHECKED: "not checked",
}
#: What an ``identical`` survivor's evidence says, from the strongest hint that no
#: test could tell it apart to the weakest.
REASONS: dict[str, str] = {
    "masked_lanes": "it changes values only on masked-off lanes, which a GPU never stores",
    "never_stored": "its loads or stores differ on active lanes, yet every output ends the same",
    "same_values": "every value it loads and stores is the original's",
    "identical": "every output is the original's",
}
#: the outputs a ``differs`` row names (the oracle's numbers have them all)
SHOWN_OUTPUTS = 3


def _launches(n: int) -> str:
    return {1: "the only launch", 2: "both launches"}.get(n, f"all {n} launches")


def _number(x: float | None) -> str:
    if x is None:
        return "NaN/inf"
    return f"{x:.3g}" if x == 0 or 1e-3 <= abs(x) < 1e5 else f"{x:.2e}"


def outputs(diffs: Iterable[dict]) -> list[dict]:
    """The oracle's per-launch differences per output tensor: the largest absolute and
    relative difference over the launches, where it first differed, on how many launches."""
    found: dict[tuple, dict] = {}
    for d in diffs:
        if not isinstance(d, dict):
            continue
        key = (d.get("kernel"), d.get("argument"))
        one = found.setdefault(
            key,
            {
                "kernel": d.get("kernel"),
                "argument": d.get("argument"),
                "max_abs": None,
                "max_rel": None,
                "first_index": d.get("first_index"),
                "launches": 0,
            },
        )
        one["launches"] += 1
        _take_larger(one, d)
    return sorted(found.values(), key=lambda o: -(o["max_abs"] or float("inf")))


def _take_larger(one: dict, d: dict) -> None:
    """Raise ``one``'s largest absolute and relative differences to launch ``d``'s where
    they are larger."""
    for k in ("max_abs", "max_rel"):
        if d.get(k) is not None and (one[k] is None or d[k] > one[k]):
            one[k] = d[k]


def _named_outputs(found: list[dict]) -> str:
    """The first ``SHOWN_OUTPUTS`` outputs that differ and by how much (kernel-qualified
    where several kernels), then how many more."""
    kernels = len({o["kernel"] for o in found})
    names = [
        (o["argument"] if kernels <= 1 else f"{o['kernel']}.{o['argument']}")
        + f" differs by up to {_number(o['max_abs'])}"
        for o in found[:SHOWN_OUTPUTS]
    ]
    more = len(found) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _differs_why(oracle: dict, found: list[dict], poisoned: bool) -> str:
    text = _named_outputs(found)
    n = oracle.get("launches") or 0
    k = max((o["launches"] for o in found), default=0)
    on = _launches(n) if k >= n else f"{k} of {n} launches"
    if poisoned:
        return (
            f"{text} on {on} with undefined lanes poisoned, as the checks ran "
            "(identical where the interpreter reads them as 0)"
        )
    return f"{text} on {on}, yet the checks pass"


def _not_checked(why: str) -> dict:
    return {"kind": NOT_CHECKED, "why": why, "evidence": []}


def classify(verdict: str, oracle: object, tolerance: object = None) -> dict | None:
    """A survivor's kind (None for any other verdict): ``kind``, ``why`` (words),
    ``reason`` (a key of ``REASONS`` for ``identical``, ``outputs`` or ``divergence``
    for ``differs``), ``launches``, ``outputs`` (``differs``: which tensor, by how much)
    and ``evidence`` (the row sections it rests on). A checked tighter tolerance
    (``tolerance``: the row's section) makes it ``hidden_by_tolerance``."""
    if str(verdict) != Verdict.SURVIVED.value:
        return None
    if isinstance(tolerance, dict) and tolerance.get("hidden"):
        return _hidden(tolerance)
    if not isinstance(oracle, dict):
        return _not_checked("the diff-oracle did not run on it")
    if not oracle.get("divergence") and oracle.get("identical") is None:
        return _not_checked(str(oracle.get("sentence") or "the diff-oracle could not compare"))
    return _differs(oracle) or _identical(oracle)


def _hidden(tolerance: dict) -> dict:
    """The ``hidden_by_tolerance`` kind, from the tolerance check's row section."""
    return {
        "kind": HIDDEN,
        "why": str(tolerance.get("line") or ""),
        "reason": "tolerance",
        "where": tolerance.get("where"),
        "evidence": ["tolerance"],
    }


def _poisoned(oracle: dict) -> dict | None:
    """The oracle's run with undefined lanes poisoned, where it made one."""
    return oracle.get("poisoned") if isinstance(oracle.get("poisoned"), dict) else None


def _differs(oracle: dict) -> dict | None:
    """The ``differs`` kind where the oracle saw the mutant differ: its launches diverge,
    its outputs differ, or they differ once undefined lanes are poisoned; else None."""
    poisoned = _poisoned(oracle)
    if oracle.get("divergence"):
        why = f"the launches diverge: {oracle['divergence']}"
        reason, found = "divergence", outputs(oracle.get("diffs") or [])
    elif oracle["identical"] is False:
        found, why = _outputs_differ(oracle)
        reason = "outputs"
    elif poisoned and poisoned.get("identical") is False and poisoned.get("diffs"):
        found = outputs(poisoned["diffs"])
        why, reason = _differs_why(oracle, found, True), "poisoned"
    else:
        return None
    return {
        "kind": DIFFERS,
        "why": why,
        "reason": reason,
        "launches": oracle.get("launches") or 0,
        "outputs": found,
        "evidence": ["oracle"],
    }


def _outputs_differ(oracle: dict) -> tuple[list[dict], str]:
    """The outputs that differ where the oracle saw the mutant's outputs differ, and why
    in words (no output named: its launches fail where the original's pass)."""
    found = outputs(oracle.get("diffs") or [])
    if found:
        return found, _differs_why(oracle, found, False)
    return found, "its launches fail where the original's pass, and the checks pass"


def _identical(oracle: dict) -> dict:
    """The ``identical`` kind: the oracle saw no difference, and what kind of none."""
    launches = oracle.get("launches") or 0
    reason = _identical_reason(oracle)
    return {
        "kind": IDENTICAL,
        "why": f"identical on {_launches(launches)}: {REASONS[reason]}",
        "reason": reason,
        "launches": launches,
        "evidence": ["oracle"],
    }


def _identical_reason(oracle: dict) -> str:
    """The strongest hint the oracle's lanes give that no test could tell the mutant
    apart (a key of ``REASONS``)."""
    if oracle.get("masked_only") or (_poisoned(oracle) or {}).get("masked_only"):
        return "masked_lanes"
    if oracle.get("active_lanes_differ"):
        return "never_stored"
    if oracle.get("active_lanes_differ") is False and not oracle.get("masked_lanes_differ"):
        return "same_values"
    return "identical"  # a report from before the oracle recorded its lanes


def counts(rows: Iterable[dict]) -> dict[str, int]:
    """How many survivors (not accepted in the baseline file) are of each kind."""
    found = dict.fromkeys(KINDS, 0)
    for row in rows:
        kind = (row.get("survivor") or {}).get("kind")
        if kind in found and not row.get("accepted"):
            found[kind] += 1
    return found
