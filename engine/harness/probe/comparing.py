"""The probe's ``compare``: candidate inputs run on the original and on each mutant of
a job, their outputs compared; for a difference, the original's outputs as golden values."""

from __future__ import annotations

import importlib
import math
import sys
import time
from typing import Any

from ..cuda_fault import lost_cuda_context
from .capturing import GRAD_HELPER, _definitions
from .values import (
    MARKER,
    MAX_GOLDEN_ELEMENTS,
    MIN_GOLDEN_ELEMENTS,
    SHIP_JOB_BYTES,
    VERSION,
    _changed,
    _difference,
    _elements,
    _fits,
    _golden_outputs,
    _ship,
    _unship,
    digest,
)


class ContextLost(RuntimeError):
    """A kernel faulted on the GPU: the process's CUDA context is gone, and every run
    after it in this job would fail for that reason alone. The job ends here; the
    message starts with the marker of the side that did it (``side``), so the tool
    knows whom to blame and runs the others again."""


class _Homes:
    """Project mode, one compare job: the kernel module's import name (empty outside
    project mode) and the copies of other project modules made against each mutant."""

    def __init__(self, kernel_name: str = "") -> None:
        self.kernel_name = kernel_name
        self.copies: dict[tuple[str, str], Any] = {}

    def home(self, name: str, kernel: Any) -> Any:
        """Module ``name`` of the project (where a candidate's entry point, a Function
        over the kernel module's functions, is defined) as it is against ``kernel``:
        imported as it is for the original; for a mutant, a copy of it loaded afresh
        while the mutant stands at the kernel module's import path, so that what it
        imports from the kernel module is the mutant's."""
        real = self.kernel_name
        if kernel is sys.modules.get(real) or not real:
            return importlib.import_module(name)
        key = (name, kernel.__name__)
        if key not in self.copies:
            self.copies[key] = self._copy(name, kernel)
        return self.copies[key]

    def _copy(self, name: str, kernel: Any) -> Any:
        from importlib import util

        real = self.kernel_name
        origin = util.find_spec(name).origin  # type: ignore[union-attr]
        spec = util.spec_from_file_location(f"{kernel.__name__}__{name.replace('.', '_')}", origin)
        assert spec is not None and spec.loader is not None
        copy = util.module_from_spec(spec)
        copy.__package__ = name.rpartition(".")[0]  # its relative imports, as the original's
        held = sys.modules.get(real)
        sys.modules[real] = kernel
        try:
            spec.loader.exec_module(copy)
        finally:
            if held is not None:
                sys.modules[real] = held
        return copy


def _execute(
    module: Any, candidate: dict, homes: _Homes, side: str | None = None
) -> tuple[dict | None, str | None, dict | None]:
    """(outputs, error, bounds violation) of one candidate on one module (``side``:
    ``original``, else the module's name); ``homes``: where a candidate's entry point
    lives when another module of the project defines it."""
    from .. import bounds

    namespace = _namespace(module, candidate, homes)
    bounds.reset()
    try:
        before, result = _run_candidate(candidate, namespace)
    except BaseException as exc:  # noqa: BLE001 - an exception is an observation
        violations = bounds.violations()
        bounds.reset()
        if violations:
            return None, None, violations[0]
        line = (str(exc).strip().splitlines() or [""])[0]
        if lost_cuda_context(str(exc)):
            who = side or module.__name__
            raise ContextLost(f"{MARKER} {candidate['id']} {who} {line}") from exc
        return None, f"{type(exc).__name__}: {line}"[:300], None
    violations = bounds.violations()
    bounds.reset()
    if violations:
        return None, None, violations[0]
    outputs = {} if candidate.get("launch") else {"result": result}
    for name in before:
        outputs[name] = namespace[name]
    return outputs, None, None


def _namespace(module: Any, candidate: dict, homes: _Homes) -> dict:
    """What a candidate's setup and call run in: torch, math, its entry point (from its
    home module where another module of the project defines it), ``_mg_grad`` if called."""
    import torch

    namespace: dict = {"torch": torch, "math": math}
    root = candidate["function"].split(".")[0]  # ``XFunction.apply``: the class
    home = homes.home(candidate["module"], module) if candidate.get("module") else module
    namespace[root] = getattr(home, root)
    if "_mg_grad(" in candidate["call"]:
        exec(GRAD_HELPER, namespace)
    return namespace


def _run_candidate(candidate: dict, namespace: dict) -> tuple[dict, Any]:
    """A candidate's setup then its call, in ``namespace``: (a copy of each of its input
    tensors from before the call, what the call returned: None for a launch)."""
    import torch

    exec(candidate["setup"], namespace)
    before = {
        name: namespace[name].clone()
        for name in candidate["tensors"]
        if isinstance(namespace.get(name), torch.Tensor)
    }
    if candidate.get("launch"):  # ``kernel[grid](...)``: what it wrote is the output
        exec(candidate["call"], namespace)
        return before, None
    return before, eval(candidate["call"], namespace)


RANK = {"differs": 0, "mutant_error": 1, "bounds": 2}


def _kept(candidate: dict, outputs: dict) -> dict:
    """The outputs of a run that count: what it returned and the tensors it changed."""
    import torch

    namespace: dict = {"torch": torch, "math": math}
    exec(candidate["setup"], namespace)
    kept = {"result": outputs["result"]} if "result" in outputs else {}  # a launch: none
    for name in candidate["tensors"]:
        if name in outputs and _changed(namespace.get(name), outputs[name]):
            kept[name] = outputs[name]
    return kept


class _Originals:
    """The original's runs in this job: outputs kept per candidate (and checked against
    their digest before each reuse: a mutant's stray write cannot change what it is
    compared with), and what was learned, for the tool to share with later jobs."""

    def __init__(self, module: Any, known: dict, exact: bool, homes: _Homes | None = None) -> None:
        self.module = module
        #: the job's project modules against each mutant (project mode; none outside it)
        self.homes = homes if homes is not None else _Homes()
        #: cid -> {"digest", "kept", and maybe "outputs" (``_ship``)} from an earlier job
        self.known = known
        self.exact = exact  # same input, same bits (the interpreter on the CPU)
        #: bytes of outputs it may still send back whole (``_ship``): a job of the
        #: original alone, in the interpreter; none in any other
        self.ship = 0
        self.held: dict[str, tuple[dict, str | None]] = {}
        self.learned: dict[str, dict] = {}
        self.confirmed: set[str] = set()  # inputs the original agreed with itself on
        self.runs = 0

    def run(self, candidate: dict) -> tuple[dict | None, str]:
        """(the original's kept outputs, "") or (None, why it cannot be compared)."""
        cid = candidate["id"]
        earlier = self._without_a_run(cid)
        if earlier is not None:
            return earlier
        print(f"{MARKER} {cid} original", flush=True)
        self.runs += 1
        start = time.process_time()
        outputs, error, violation = _execute(self.module, candidate, self.homes, "original")
        seconds = time.process_time() - start
        if outputs is None:
            why = (error or (violation or {}).get("message", "bounds"))[:300]
            self.learned[cid] = {"status": "error", "detail": why}
            return None, why
        kept = _kept(candidate, outputs)
        sealed = digest(kept)
        if self._differs_from_before(cid, kept, sealed):
            why = "the original's outputs on this input differ from one run to the next"
            self.learned[cid] = {"status": "unstable", "detail": why}
            return None, why
        self.held[cid] = (kept, sealed)
        self.learned[cid] = {
            "status": "ok",
            "digest": sealed,
            "kept": sorted(kept),
            "seconds": round(seconds, 4),
        }
        if not self._ship_whole(candidate, kept, sealed):
            return None, self.learned[cid]["detail"]
        return kept, ""

    def _without_a_run(self, cid: str) -> tuple[dict | None, str] | None:
        """``run``'s answer where the original need not run: its outputs held here and
        unchanged, the input refused already, or outputs an earlier job sent whole."""
        if cid in self.held:
            outputs, sealed = self.held[cid]
            if sealed is not None and digest(outputs) == sealed:
                return outputs, ""
        elif cid in self.learned and self.learned[cid]["status"] != "ok":
            return None, self.learned[cid]["detail"]
        shipped = self._shipped(cid)
        if shipped is not None:
            return shipped, ""
        return None

    def _differs_from_before(self, cid: str, kept: dict, sealed: str | None) -> bool:
        """Whether this run's outputs differ from an earlier job's run on the same input,
        where the same input gives the same bits."""
        before = self.known.get(cid)
        if not self.exact or before is None or not before.get("digest"):
            return False
        return sealed != before["digest"] or sorted(kept) != sorted(before.get("kept", ()))

    def _ship_whole(self, candidate: dict, kept: dict, sealed: str | None) -> bool:
        """The kept outputs sent whole where this job may still send some (``ship``), once
        a second run agrees with them (``_again``); False where it did not."""
        if not (self.ship and self.exact and sealed is not None):
            return True
        whole = _ship(kept, self.ship)
        if whole is None:
            return True
        if not self._again(candidate, sealed):
            return False
        self.learned[candidate["id"]]["outputs"] = whole
        self.ship -= sum(len(v["data"]) for v in whole.values())
        return True

    def _again(self, candidate: dict, sealed: str) -> bool:
        """Outputs sent whole stand for the original's run in later jobs, which then do
        not run it again (where a run again would show an original that varies on the
        input, unwritten output memory say): run it once more here, alike or unusable."""
        cid = candidate["id"]
        print(f"{MARKER} {cid} original", flush=True)
        self.runs += 1
        outputs, _, _ = _execute(self.module, candidate, self.homes, "original")
        if outputs is not None and digest(_kept(candidate, outputs)) == sealed:
            return True
        why = "the original's outputs on this input differ from one run to the next"
        self.learned[cid] = {"status": "unstable", "detail": why}
        self.held.pop(cid, None)
        return False

    def _shipped(self, cid: str) -> dict | None:
        """The original's outputs an earlier job sent whole (in the interpreter), where
        they are what its digest says: they stand for its run here."""
        before = self.known.get(cid) or {}
        if not self.exact or not before.get("outputs") or not before.get("digest"):
            return None
        try:
            kept = _unship(before["outputs"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError):
            return None
        sealed = digest(kept)
        if sealed != before["digest"] or sorted(kept) != sorted(before.get("kept", ())):
            return None
        self.held[cid] = (kept, sealed)
        return kept

    def confirm(self, candidate: dict, kept: dict) -> str:
        """Where bits may differ between runs (a GPU): before a hit is believed, the
        original runs once more on its input and must agree with ``kept`` within the
        compare's tolerance (outputs left unwritten hold whatever memory held, and
        differ). "" when it does; else why, and the input is unusable from then on."""
        cid = candidate["id"]
        if self.exact or cid in self.confirmed:
            return ""
        self.runs += 1
        whys = _rerun_differences(kept, *_execute(self.module, candidate, self.homes, "original"))
        if whys:
            why = "the original's outputs on this input differ from one run to the next: "
            self.learned[cid] = {"status": "unstable", "detail": (why + whys[0])[:300]}
            return self.learned[cid]["detail"]
        self.confirmed.add(cid)
        return ""


def _rerun_differences(
    kept: dict, again: dict | None, error: str | None, violation: dict | None
) -> list[str]:
    """How the original's second run (``again``, or its ``error`` or bounds ``violation``)
    differs from its ``kept`` outputs; empty where it agrees."""
    whys = (
        [error or (violation or {}).get("message", "")]
        if again is None
        else [
            f"{name}: {why}" for name in kept if (why := _difference(kept[name], again.get(name)))
        ]
    )
    return [w for w in whys if w]


def _against(
    originals: _Originals, candidate: dict, module: Any
) -> tuple[str, str, dict | None, dict | None]:
    """One candidate on one mutant: (status, detail, the original's kept outputs, the
    mutant's). The original runs only where its outputs are needed: not yet known, or
    the mutant's are not bit-identical to them (then compared with tolerance), or a hit
    (its outputs become the golden values)."""
    cid = candidate["id"]
    known = originals.known.get(cid)
    kept = None
    if known is None or not known.get("digest"):
        kept, why = originals.run(candidate)
        if kept is None:
            return _original_failed(originals, cid, why)
        names = list(kept)
    else:
        names = list(known.get("kept", ["result"]))
    print(f"{MARKER} {cid} {module.__name__}", flush=True)
    m_outputs, m_error, m_violation = _execute(module, candidate, originals.homes)
    if m_outputs is not None:
        m_outputs = {name: m_outputs.get(name) for name in names}
        if kept is None and known is not None and digest(m_outputs) == known["digest"]:
            return "same", "", None, m_outputs  # bit for bit the original's
    return _judged(originals, candidate, kept, m_outputs, m_error, m_violation)


def _judged(
    originals: _Originals,
    candidate: dict,
    kept: dict | None,
    m_outputs: dict | None,
    m_error: str | None,
    m_violation: dict | None,
) -> tuple[str, str, dict | None, dict | None]:
    """``_against``'s answer once the mutant ran: the original runs first where its
    outputs are not yet ``kept``, and a hit stands only if the original confirms it."""
    if kept is None:
        kept, why = originals.run(candidate)
        if kept is None:
            return _original_failed(originals, candidate["id"], why)
    hit = _hit(kept, m_outputs, m_error, m_violation)
    if hit is None:
        return "same", "", kept, m_outputs
    unstable = originals.confirm(candidate, kept)
    return ("original_unstable", unstable, None, None) if unstable else hit


def _original_failed(
    originals: _Originals, cid: str, why: str
) -> tuple[str, str, dict | None, dict | None]:
    """``_against``'s answer where the original gave no outputs to compare with."""
    status = "original_unstable" if originals.learned[cid]["status"] == "unstable" else ""
    return status or "original_error", why, None, None


def _hit(
    kept: dict, m_outputs: dict | None, m_error: str | None, m_violation: dict | None
) -> tuple[str, str, dict | None, dict | None] | None:
    """What the mutant's run shows against the original's ``kept`` outputs (``_against``'s
    answer): a bounds violation, an exception, outputs that differ; None where they agree."""
    if m_violation is not None:
        return ("bounds", m_violation.get("message", "out of bounds"), kept, None)
    if m_error is not None:
        return ("mutant_error", f"the mutant raises {m_error}", kept, None)
    assert m_outputs is not None
    diffs = [
        f"{name}: {why}" for name in kept if (why := _difference(kept[name], m_outputs.get(name)))
    ]
    if not diffs:
        return None
    return ("differs", "; ".join(diffs), kept, m_outputs)


def _expected(found: dict | None, limit: int = MAX_GOLDEN_ELEMENTS) -> dict | None:
    """The golden entry for the chosen difference (``found``: id, outputs, mutant), of
    at most ``limit`` values."""
    if found is None:
        return None
    try:
        values = _golden_outputs(found["outputs"], found["mutant"], limit)
    except TypeError as exc:
        return {"id": found["id"], "error": str(exc)}
    size = sum(_elements(v) for v in values.values())
    if size > limit:
        return {"id": found["id"], "error": f"{size} expected values: too many"}
    return {"id": found["id"], "outputs": values}


def _probe_mutant(originals: _Originals, module: Any, candidates: list[dict], limit: int) -> dict:
    """A mutant's candidates in order, until the first hit whose outputs can be kept
    whole in ``limit`` values (a later hit cannot give a better test); hits that cannot
    are ranked as before: values before exceptions before bounds, then the first."""
    results: list[dict] = []
    best: tuple[int, int, dict] | None = None  # (rank, order, found)
    for order, candidate in enumerate(candidates):
        status, detail, kept, m_outputs = _against(originals, candidate, module)
        results.append({"id": candidate["id"], "status": status, "detail": detail[:600]})
        rank = RANK.get(status)
        if rank is None or kept is None:
            continue
        found = {"id": candidate["id"], "outputs": kept, "mutant": m_outputs}
        if _fits(kept, limit):
            best = (-1, order, found)
            break
        if best is None or (rank, order) < best[:2]:
            best = (rank, order, found)
    return {"results": results, "golden": _expected(best[2] if best else None, limit)}


def _mutant_runs(found: dict) -> int:
    """How many times a mutant ran in ``_probe_mutant`` (not where the original failed)."""
    return sum(
        1 for r in found["results"] if r["status"] not in ("original_error", "original_unstable")
    )


def _original_alone(
    originals: _Originals, candidates: list[dict]
) -> tuple[list[dict], dict | None]:
    """A job without mutants: the original on every candidate; the results, and the
    first candidate it accepted with its outputs (None: none)."""
    results, first = [], None
    for candidate in candidates:
        kept, why = originals.run(candidate)
        status = "original_only" if kept is not None else "original_error"
        results.append({"id": candidate["id"], "status": status, "detail": why})
        if kept is not None and first is None:
            first = {"id": candidate["id"], "outputs": kept, "mutant": None}
    return results, first


def _probe_mutants(
    request: dict, workdir: str, originals: _Originals, by_id: dict, found_by: dict
) -> int:
    """Each mutant of the request on its candidates (``_probe_mutant``), its answer (or
    why it could not load) into ``found_by``; how many times mutants ran."""
    mutant_runs = 0
    # The mutants of a job share one budget of expected values: the answer stays far
    # below what a result may hold however many of them find a difference.
    limit = max(
        MIN_GOLDEN_ELEMENTS, MAX_GOLDEN_ELEMENTS // max(1, len(request.get("mutants") or ()))
    )
    for entry in request.get("mutants") or ():
        try:
            module = _definitions(entry["module"], workdir, request.get("package", ""))
        except BaseException as exc:  # noqa: BLE001 - this mutant's failure, not the job's
            found_by[entry["module"]] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        chosen = [by_id[cid] for cid in entry["candidates"]]
        found = _probe_mutant(originals, module, chosen, limit)
        found_by[entry["module"]] = found
        mutant_runs += _mutant_runs(found)
    return mutant_runs


def compare(request: dict, workdir: str) -> dict:
    """Candidates on the original and on each mutant of the request (``mutants``: module
    names, each with the ids of its candidates, in order). ``originals`` holds what
    earlier jobs learned of the original on some candidates (digest, kept outputs):
    there the original runs again only when needed (``_against``). Without mutants, the
    original runs on every candidate: what it learned comes back (``originals``), and
    with ``golden`` its outputs on the first one it accepts."""
    original = _definitions(request["module"], workdir)
    homes = _Homes(request["module"] if request.get("package") else "")
    by_id = {c["id"]: c for c in request["candidates"]}
    originals = _Originals(
        original, request.get("originals") or {}, bool(request.get("exact")), homes
    )
    originals.ship = SHIP_JOB_BYTES if request.get("ship") and not request.get("mutants") else 0
    answer: dict = {"version": VERSION, "mutants": {}}
    mutant_runs = _probe_mutants(request, workdir, originals, by_id, answer["mutants"])
    if not request.get("mutants"):
        answer["results"], first = _original_alone(originals, request["candidates"])
        answer["golden"] = _expected(first) if request.get("golden", True) else None
    answer["originals"] = originals.learned
    answer["runs"] = {"original": originals.runs, "mutant": mutant_runs}
    return answer
