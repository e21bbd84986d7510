"""A survivor's search: its planned inputs, the rounds that run them, what their jobs'
answers say of it (a hit, a hang, a difference no test came of), and how a round is
fitted to its share of the probe's time."""

from __future__ import annotations

import math
import re

from ...harness import probe as harness
from ...job import JobResult, JobStatus
from ...project import jit_callers
from ...records import Mutant
from ...stage import StageContext
from ...verdicts import summarize_error
from .budget import Spend
from .inputs import Candidate, candidates
from .jobs import answer_of, module_name
from .kinds import kinds

#: inputs per round after the first: the rest of the default budget in one round (a
#: mutant stops at its first difference inside a job, so a long batch wastes nothing on
#: the ones that die, and fewer rounds are fewer jobs one after the other)
BATCH = 24

#: a survivor's first round: the learned call with fresh values and the next kind, where
#: most kills are (the original runs on few inputs before the first proofs can start)
FIRST_BATCH = 2

#: survivors sharing one compare job at most: a hang costs the whole job's time limit
#: (and a retry of the others), and more jobs than workers keep every worker busy
PER_JOB = 4

_MARKER = re.compile(re.escape(harness.MARKER) + r" (\S+) (\S+)")

_WHY = {
    "differs": "its outputs differ",
    "mutant_error": "it raises where the original does not",
    "bounds": "it accesses memory out of bounds",
}

#: what a candidate is worth nothing on: the original rejects it, or varies on it
_UNUSABLE = ("original_error", "original_unstable")

_LOST = (JobStatus.TIMEOUT, JobStatus.CRASH)


def new_search(ctx: StageContext, m: Mutant, calls: list[dict]) -> Search | None:
    """A survivor's search over the calls that launch its function (None: none does)."""
    reach = jit_callers(ctx.kernel.source, m.function)
    reaching = [c for c in calls if reach & set(c.get("kernels", ()))]
    if not reaching:
        return None
    budget = max(1, ctx.settings.writers.probes)
    triggers = ctx.settings.writers.probe_triggers
    return Search(
        m,
        candidates(reaching, m.family, budget, ctx.settings.seed, triggers),
        kinds(reaching, m.family, triggers),
    )


class Search:
    """One survivor's search state."""

    def __init__(self, mutant: Mutant, queue: list[Candidate], offered: list[str] = ()) -> None:
        self.mutant = mutant
        self.offered = list(offered)  # every kind the calls offer it, planned or not
        self.queue = queue  # the planned candidates, in the prior's order
        self.pending = list(queue)  # those not run yet, in the order they will run
        self.ran: list[Candidate] = []
        self.probes = 0  # candidates the original accepted and both sides ran
        self.hit: tuple[Candidate, dict, str] | None = None  # candidate, outputs, why
        self.hang: tuple[Candidate, str] | None = None  # needs the original's outputs
        self.done = False
        self.solo = False  # its shared job failed with no culprit named: run it alone
        self.note = ""
        self.differs = 0  # probes on which the mutant differed (a hit or not)
        self.first: str = ""  # what the first of them showed
        self.unkept: str = ""  # why the last difference did not become a test
        self.hung = False  # its hit is a hang (or a crash): its test may run to the limit
        #: slow, and its test's proof found its outputs alike the original's ("not a
        #: kill"): the run's other tests, which would hang on it the same way, skip it
        self.alike = False
        #: the most candidates its next round may run (the time budget's share); None: all
        self.cap: int | None = None
        #: how much slower than the original its own check ran (a mutant that loops 256
        #: times as often is as slow on every probe): its side of a candidate's cost
        self.slow = 1.0
        self.out_of_time = ""  # the time budget it ran out of, said in its result

    def differed(self, what: str, unkept: str = "") -> None:
        self.differs += 1
        self.first = self.first or what
        self.unkept = unkept or self.unkept

    def result(self) -> str:
        """What the search found, for a survivor it did not separate."""
        if not self.differs:
            return self.note or self._not_distinguished()
        probes = "probe" if self.differs == 1 else "probes"
        text = (
            f"the mutant differs on {self.differs} {probes} (first: {self.first[:300]}), "
            f"but {self.unkept or 'no test came of it'}"
        )
        return f"{text}; then {self.note}" if self.note else text

    def _not_distinguished(self) -> str:
        """``result`` where the mutant never differed: how many inputs of which kinds, and
        what was left unprobed."""
        tried = list(dict.fromkeys(c.kind for c in self.ran))
        probes = "probe" if self.probes == 1 else "probes"
        text = f"not distinguished by {self.probes} {probes}" + (
            f" (kinds {', '.join(tried)})" if tried else ""
        )
        return text + self._unprobed(tried)

    def _unprobed(self, tried: list[str]) -> str:
        """What a budget left unprobed: the kinds never run, and why."""
        text = self._out_of_time(tried) if self.out_of_time and self.pending else ""
        planned = {c.kind for c in self.queue}
        left = [k for k in self.offered if k not in planned]
        if left:
            text += f"; left unprobed when its budget of {len(self.queue)} inputs ran out: "
            text += ", ".join(left)
        return text

    def _out_of_time(self, tried: list[str]) -> str:
        """The planned inputs the time left unprobed, and the kinds among them never tried."""
        never = [k for k in dict.fromkeys(c.kind for c in self.pending) if k not in tried]
        inputs = "input" if len(self.pending) == 1 else "inputs"
        return (
            f"; {len(self.pending)} planned {inputs} left unprobed when {self.out_of_time} "
            "ran out" + (f" (kinds never tried: {', '.join(never)})" if never else "")
        )

    def batch(self, unusable: dict[str, str]) -> list[Candidate]:
        """The next candidates to run: none the original is known to reject."""
        self.pending = [c for c in self.pending if c.id not in unusable]
        size = BATCH if self.ran else FIRST_BATCH
        return self.pending[: size if self.cap is None else min(size, self.cap)]

    def consume(self, batch: list[Candidate]) -> None:
        ids = {c.id for c in batch}
        self.pending = [c for c in self.pending if c.id not in ids]
        self.ran += batch

    def reorder(self, kills: dict[str, int]) -> None:
        """Kinds that killed in this run first (most kills first), the rest as planned."""
        if kills:
            order = {c.id: i for i, c in enumerate(self.queue)}
            self.pending.sort(
                key=lambda c: (
                    (0, -kills[c.kind], order[c.id]) if kills.get(c.kind) else (1, 0, order[c.id])
                )
            )


def read_mutant(
    search: Search,
    batch: list[Candidate],
    answer: dict,
    kernel_name: str,
    tried: dict[str, int],
) -> None:
    """One mutant's part of a compare job's answer into ``search``; ``tried`` counts the
    probes run (both sides) by trigger kind."""
    by_id = {c.id: c for c in batch}
    search.consume(batch)
    if answer.get("error"):
        search.note = f"probe job failed: {answer['error']}"
        search.done = True
        return
    module = module_name(search.mutant) + ".py"
    statuses = answer.get("results", [])
    _count_probes(search, statuses, by_id, tried)
    golden = answer.get("golden") or {}
    unkept = _unkept(golden)
    whys = {}
    for status in statuses:
        if status["status"] in _WHY:
            detail = status["detail"].replace(module, kernel_name)
            whys[status["id"]] = f"{_WHY[status['status']]}: {detail}"
            search.differed(whys[status["id"]], unkept)
    if golden.get("outputs") and golden.get("id") in whys:
        search.hit = (by_id[golden["id"]], golden["outputs"], whys[golden["id"]])


def _count_probes(
    search: Search, statuses: list[dict], by_id: dict[str, Candidate], tried: dict[str, int]
) -> None:
    """The probes a compare job ran on the mutant (not those the original refused), into
    ``search.probes`` and, by trigger kind, into ``tried``."""
    for r in statuses:
        if r["status"] not in _UNUSABLE and r["id"] in by_id:
            search.probes += 1
            kind = by_id[r["id"]].kind
            tried[kind] = tried.get(kind, 0) + 1


def _unkept(golden: dict) -> str:
    """Why a difference found gave no expected values to keep ("" where nothing says so)."""
    if not golden.get("error"):
        return ""
    return (
        "no differing input was small enough to keep its expected values"
        if "too many" in golden["error"]
        else "the original's outputs could not be kept as expected values"
    ) + f" ({golden['error'][:200]})"


def _last_marker(result: JobResult) -> tuple[str, str] | None:
    """The last marker line of a job lost to a timeout or a crash: (candidate id, side)."""
    markers = _MARKER.findall(result.error) if result.status in _LOST else []
    return markers[-1] if markers else None


def _lost_how(result: JobResult) -> str:
    return "hangs" if result.status is JobStatus.TIMEOUT else "crashes"


def failed_job(
    result: JobResult,
    entries: list[tuple[Search, list[Candidate]]],
    unusable: dict[str, str],
    spend: Spend,
) -> None:
    """A compare job that timed out, crashed or failed: the marker lines say which
    candidate on which side did it. That side alone pays: a mutant that hangs or
    crashes has its finding (``hang``), a candidate the original cannot run is left
    out; the other survivors of the job run their candidates again. With no side
    named, each survivor of a shared job runs again alone; one alone is done."""
    culprit = _culprit(result, entries, unusable)
    if culprit is None and len(entries) == 1:
        search = entries[0][0]
        search.note = f"probe job failed: {summarize_error(result.error) or result.status.value}"
        search.done = True
        return
    for search, _ in entries:
        if module_name(search.mutant) != culprit:
            search.solo = search.solo or culprit is None
            spend.retried += 1


def _culprit(
    result: JobResult, entries: list[tuple[Search, list[Candidate]]], unusable: dict[str, str]
) -> str | None:
    """The side a lost compare job's last marker names, which pays for it: "original" (the
    input is unusable), or a mutant's module (its search has the hang); None: no side."""
    marker = _last_marker(result)
    if marker is None:
        return None
    cid, side = marker
    what = _lost_how(result)
    if side == "original":
        unusable[cid] = f"the original {what} on this input"
        return "original"
    by_module = {module_name(s.mutant): (s, batch) for s, batch in entries}
    if side not in by_module or not any(c.id == cid for c in by_module[side][1]):
        return None
    _hung_on(*by_module[side], cid, what)
    return side


def _hung_on(search: Search, batch: list[Candidate], cid: str, what: str) -> None:
    """The mutant of ``search`` was lost (``what`` it did) on its batch's candidate ``cid``:
    the batch is spent and the candidate is its hang to prove."""
    candidate = next(c for c in batch if c.id == cid)
    search.consume(batch)
    search.hang = (candidate, f"the mutant {what} on this input")
    search.probes += 1
    search.differed(f"the mutant {what} on {candidate.call}")


def into_jobs(searches: list[Search], workers: int, est: dict[str, float]) -> list[list[Search]]:
    """Survivors into compare jobs: at most ``PER_JOB`` each, at least as many jobs as
    workers (a multiple of them where there are enough survivors), the estimated work
    balanced (longest first, onto the lightest job)."""
    alone = [[s] for s in searches if s.solo]
    rest = [s for s in searches if not s.solo]
    if not rest:
        return alone
    n = max(math.ceil(len(rest) / PER_JOB), min(workers, len(rest)))
    n = min(len(rest), math.ceil(n / workers) * workers)
    return alone + _balanced(rest, n, est)


def _balanced(searches: list[Search], n: int, est: dict[str, float]) -> list[list[Search]]:
    """``searches`` into at most ``n`` groups of at most ``PER_JOB``, longest first onto
    the lightest group; the groups not left empty."""
    groups: list[list[Search]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for s in sorted(searches, key=lambda s: -est[s.mutant.id]):
        i = min(range(n), key=lambda i: (len(groups[i]) >= PER_JOB, loads[i]))
        groups[i].append(s)
        loads[i] += est[s.mutant.id]
    return [g for g in groups if g]


def read_original(
    result: JobResult, chunk: list[Candidate], known: dict[str, dict], unusable: dict[str, str]
) -> int:
    """What the original did on ``chunk`` into ``known`` (digests, outputs sent whole),
    or ``unusable``; how many of them came with their outputs whole."""
    data = answer_of(result)
    if data is not None:
        return _learned_of_original(data, known, unusable)
    marker = _last_marker(result)
    if marker is not None and marker[1] == "original":
        unusable[marker[0]] = f"the original {_lost_how(result)} on this input"
    else:
        why = summarize_error(result.error) or result.status.value
        for c in chunk:
            unusable.setdefault(c.id, f"probe job failed: {why}")
    return 0


def _learned_of_original(data: dict, known: dict[str, dict], unusable: dict[str, str]) -> int:
    """An original's job's answer into ``known`` (or ``unusable``); how many inputs came
    with their outputs whole."""
    shipped = 0
    for cid, record in (data.get("originals") or {}).items():
        if record.get("status") == "ok":
            known[cid] = {k: record[k] for k in ("digest", "kept", "outputs") if k in record}
            shipped += "outputs" in record
        else:
            unusable[cid] = record.get("detail") or record.get("status", "")
    return shipped


def fit(
    active: list[Search],
    left: float,
    scale: float,
    known: dict,
    unusable: dict,
    floor: bool = False,
) -> None:
    """After its first round (which runs whatever the budget), each survivor's next round
    is what fits its share of the time left (``left`` seconds of jobs): its candidates'
    estimates times ``scale`` (the probe's jobs so far, measured over estimated), on the
    mutant's side times its slowness, plus the original's run where it has not run yet.
    Under the budget's ``floor``, a round also runs every kind the survivor never tried."""
    share = max(0.0, left) / max(1, len(active))
    for search in active:
        search.cap = None
        if not search.ran:
            continue
        cost, n = 0.0, 0
        for c in search.batch(unusable):
            cost += c.est_s * scale * (search.slow + (c.id not in known))
            if cost > share:
                break
            n += 1
        search.cap = max(n, _untried(search, unusable)) if floor else n


def _untried(search: Search, unusable: dict) -> int:
    """How much of its next batch a round must run to try every kind ``search`` never ran
    (the batch holds each kind's best candidate before any kind's second)."""
    seen = {c.kind for c in search.ran}
    last = 0
    for i, c in enumerate(search.batch(unusable)):
        if c.kind not in seen:  # the best input of a kind never tried
            seen.add(c.kind)
            last = i + 1
    return last


def estimate(entries: list[tuple[Search, list[Candidate]]], known: dict) -> float:
    """A compare job's estimated seconds: each mutant on its candidates (times its
    slowness), the original once on each candidate it has not run before."""
    union = {c.id: c for _, batch in entries for c in batch if c.id not in known}
    mutants = sum(c.est_s * s.slow for s, batch in entries for c in batch)
    return mutants + sum(c.est_s for c in union.values())


def slowness(ctx: StageContext, mutant: Mutant) -> float:
    """The mutant's own job over the original's (1 to 100; 1 where either is unknown)."""
    mine = ctx.ledger.spent_s(mutant.id)
    original = ctx.baseline.spent_s if ctx.baseline is not None else 0.0
    if original <= 0 or mine <= 0:
        return 1.0
    return min(100.0, max(1.0, mine / original))


def work(search: Search) -> float:
    return search.slow * sum(
        c.est_s for c in search.pending[: BATCH if search.ran else FIRST_BATCH]
    )
