"""The probe's sandbox jobs: the capture of the calls, the original's runs on candidates,
the compare jobs of survivors against it; each a harness request (``harness/probe``)."""

from __future__ import annotations

import json

from ...harness import probe as harness
from ...job import Check, CheckKind, Job, JobResult
from ...kernel_file import GIVEN
from ...records import Mutant
from ...stage import StageContext
from .inputs import Candidate

#: the original's outputs a compare job gets whole, in bytes of their text at most (the
#: first candidates', where most hits are): the request travels to the sandbox and its
#: key is hashed
SHIP_BYTES = 4 << 20

REQUEST = "_mg_probe.json"

MUTANT_MODULE = "_mg_mutant"


def kernel_module(ctx: StageContext) -> str:
    """The name the kernel module is imported by: a package's dotted path in project mode."""
    project = ctx.kernel.project
    return project.module if project is not None else ctx.kernel.module


def _harness_job(ctx: StageContext, request: dict, files: tuple, timeout_s: float) -> Job:
    project = ctx.kernel.project
    return Job(
        project=project.to_json() if project is not None else None,
        files=(*files, (REQUEST, json.dumps(request, sort_keys=True))),
        checks=(Check(CheckKind.HARNESS, REQUEST, "probe"),),
        mode=ctx.settings.mode,
        seed=ctx.settings.seed,
        timeout_s=round(timeout_s, 1),
        memory_mb=ctx.settings.memory_mb,
        poison_undefined=ctx.settings.poison_undefined,
        interpreter=ctx.settings.interpreter,
    )


def answer_of(result: JobResult) -> dict | None:
    data = (result.extra or {}).get("harness", {}).get("probe")
    return data if isinstance(data, dict) else None


def capture_job(ctx: StageContext) -> Job:
    """The job that learns the wrapper calls: the original alone, so the driver starts
    it beside the mutant phase once a mutant survives (``Stage.ahead``)."""
    kernel = ctx.kernel
    request = {
        "entry": "probe:capture",
        "version": harness.VERSION,
        "module": kernel_module(ctx),
        "kernel": kernel.name,
        "main": kernel.has_main,
        "tests": bool(kernel.test_functions),
    }
    if kernel.project is not None:  # the project's selected cases, where they lie
        request["project"] = {
            "root": kernel.project.root,
            "import_root": kernel.project.import_root,
            "tests": [[t.path, list(t.select)] for t in kernel.tests if t.origin == GIVEN],
            # the cases -k / -m select: the ones the run judges by, the ones learned from
            "keyword": ctx.settings.keyword or "",
            "marker": ctx.settings.marker or "",
        }
    return _harness_job(ctx, request, (ctx.kernel.own_file(),), ctx.settings.timeout_s)


def calls_of(data: dict) -> list[dict]:
    """The replayable calls of a capture's answer: those that launched a kernel."""
    return [c for c in data.get("calls", []) if c.get("launches")]


def module_name(mutant: Mutant) -> str:
    """The module a mutant's file is loaded as in a compare job (one per survivor)."""
    return f"{MUTANT_MODULE}_{mutant.id}"


def _limit(ctx: StageContext, work_s: float, mutants: int) -> float:
    return min(
        max(10.0, work_s * ctx.settings.timeout_factor + ctx.settings.timeout_base_s + 2.0),
        max(ctx.settings.timeout_s, 10.0) * max(1, mutants),
    )


def _request(ctx: StageContext, batch: list[Candidate]) -> dict:
    project = ctx.kernel.project
    return {
        "entry": "probe:compare",
        "version": harness.VERSION,
        "module": kernel_module(ctx),
        # project mode: mutants load as modules of the kernel's package
        **({"package": project.module.rpartition(".")[0]} if project is not None else {}),
        "exact": ctx.settings.mode == "interpret",
        "candidates": [c.request() for c in batch],
    }


def original_job(
    ctx: StageContext, batch: list[Candidate], golden: bool, ship: bool = False
) -> Job:
    """The original alone on ``batch``: what it does there (digests), shared by every
    survivor probing those candidates; with ``golden`` its outputs on the first; with
    ``ship`` (the first round's inputs, where most hits are) its outputs whole where
    small enough, run twice alike first (``harness/probe/comparing._Originals.run``)."""
    request = {**_request(ctx, batch), "mutants": [], "golden": golden}
    if ship:  # only when set: every other job keeps its cache key
        request["ship"] = True
    work = sum(c.est_s for c in batch) * (2 if ship else 1)
    return _harness_job(ctx, request, (ctx.kernel.own_file(),), _limit(ctx, work, 1))


def compare_job(
    ctx: StageContext, entries: list[tuple[Mutant, list[Candidate]]], known: dict[str, dict]
) -> Job:
    """Several survivors' next candidates in one job, each mutant under its own module
    name, against the original's runs ``known`` from earlier jobs (where it is not
    known, it runs in this job, once per candidate)."""
    union = list({c.id: c for _, batch in entries for c in batch}.values())
    request = {
        **_request(ctx, union),
        "mutants": [
            {"module": module_name(m), "candidates": [c.id for c in batch]} for m, batch in entries
        ],
        "originals": _shipped(union, known),
    }
    files = (ctx.kernel.own_file(),) + tuple((module_name(m) + ".py", m.source) for m, _ in entries)
    # each mutant on its candidates, the original at most once per candidate
    work = sum(c.est_s for _, batch in entries for c in batch) + sum(c.est_s for c in union)
    return _harness_job(ctx, request, files, _limit(ctx, work, len(entries)))


def _shipped(union: list[Candidate], known: dict[str, dict]) -> dict[str, dict]:
    """What a compare job gets of the original's runs on its candidates: digests, and
    outputs whole (``harness/probe/values._ship``) for the first of them up to ``SHIP_BYTES``
    in all (the rest of them run the original again where a mutant differs)."""
    room = SHIP_BYTES
    shipped = {}
    for c in union:
        entry = known.get(c.id)
        if entry is None:
            continue
        size = sum(len(v.get("data", "")) for v in (entry.get("outputs") or {}).values())
        if size > room:
            entry = {k: v for k, v in entry.items() if k != "outputs"}
        else:
            room -= size
        shipped[c.id] = entry
    return shipped


def original_jobs(
    ctx: StageContext, needed: list[Candidate], ship: bool = False
) -> dict[str, tuple[Job, list]]:
    """The original on candidates not run yet, once each, split over the workers;
    ``ship``: the first round's (``original_job``)."""
    n = min(len(needed), ctx.workers)
    chunks: list[list[Candidate]] = [[] for _ in range(n)]
    for i, c in enumerate(needed):
        chunks[i % n].append(c)
    return {
        f"original-{i}": (original_job(ctx, chunk, golden=False, ship=ship), chunk)
        for i, chunk in enumerate(chunks)
    }
