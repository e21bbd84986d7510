"""Every setting of a run, as plain frozen data that lands in the report's ``settings``.

``RunSettings`` is what a face builds from flags and config and hands the engine;
``WriterSettings`` / ``LLMSettings`` say what the test writers are asked to do. The
API key is never part of these settings (nor of the report, the cache or any sandbox
job): it is read from the environment when a model client is built (``api_key``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import asdict, dataclass, field

from .errors import BadInput

DEFAULT_BASE_URL = "https://api.tokenfactory.nebius.com/v1/"
DEFAULT_MODEL = "nvidia/nemotron-3-super-120b-a12b"
#: The accepted-survivors file ``accept`` writes when no path is configured.
DEFAULT_BASELINE = "mutant-gate-baseline.toml"
#: Environment variables read for the key, first one set wins.
KEY_VARIABLES = ("NEBIUS_API_KEY", "OPENAI_API_KEY")
WRITERS = ("none", "probe", "llm")


@dataclass(frozen=True)
class LLMSettings:
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    timeout_s: float = 300.0  # per request; reasoning models think for a while
    retries: int = 4  # on 429, 5xx, timeouts and dropped connections
    backoff_s: float = 2.0  # first wait; doubles per retry (Retry-After wins when sent)
    max_tokens: int | None = 16384
    temperature: float | None = None  # None: the endpoint's default
    #: USD per million prompt / completion tokens for the cost estimate (None: not shown).
    price_in: float | None = None
    price_out: float | None = None
    #: which sample of the same request (a study's repeat): part of each reply's cache
    #: key when not 0, so repeats are asked anew once and then cached
    sample: int = 0


@dataclass(frozen=True)
class WriterSettings:
    #: ``none``; ``probe`` (model-free, the default); ``llm``: stage 1 by the model, then
    #: the probe on what survives it.
    writer: str = "probe"
    stage2: bool = False  # the model answers each remaining survivor
    attempts: int = 3  # model replies per stage-1 file / per survivor in stage 2
    runs: int = 3  # passes on the original, fresh seeds each, before a test is believed
    probes: int = 24  # probe inputs tried per survivor
    #: the probe's time, in seconds of sandbox jobs (run or read from the cache, at the
    #: seconds they took when run): None, 0.8 of what the mutants' jobs took; 0, no limit
    #: but ``probes``. Every survivor's first round runs whatever the limit.
    probe_time: float | None = None
    #: the probe's trigger kinds (``writers/probe/kinds.TRIGGERS``); empty: all of them
    probe_triggers: tuple[str, ...] = ()
    #: the probe shares the original's runs on a candidate among the survivors and batches
    #: several survivors per job (``writers/probe``); off: one job per survivor, the
    #: original beside the mutant on every candidate (an internal switch, for benchmarks)
    probe_share: bool = True
    write_tests: str | None = None  # directory for accepted tests (the CLI writes them)
    #: a written test (each test function) may take at most ``factor`` times the own
    #: check's time on the original, and never less than ``min_s`` is asked of it; a
    #: slower one goes back to the model with its time. A factor of 0: no budget
    test_budget_factor: float = 3.0
    test_budget_min_s: float = 2.0
    llm: LLMSettings = field(default_factory=LLMSettings)

    @property
    def wants_model(self) -> bool:
        return self.writer == "llm" or self.stage2

    @property
    def probe(self) -> bool:
        return self.writer in ("probe", "llm")


def api_key(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return next((env[k] for k in KEY_VARIABLES if env.get(k)), None)


DEFAULT_TARGETS = ("sm_75",)


def parse_targets(text: str) -> tuple[str, ...]:
    """``"sm_80,sm_90"`` -> ("sm_80", "sm_90"); bad input raises ``BadInput``."""
    targets: list[str] = []
    for part in text.split(","):
        name = part.strip().lower()
        if not name:
            continue
        if re.fullmatch(r"\d{2,3}a?", name):
            name = "sm_" + name
        match = re.fullmatch(r"sm_(\d{2,3})a?", name)
        if not match or not 50 <= int(match.group(1)) <= 130:
            raise BadInput(
                f"--compile-target: {part.strip()!r} is not a CUDA target like sm_75, sm_80, sm_90"
            )
        if name not in targets:
            targets.append(name)
    if not targets:
        raise BadInput("--compile-target: no target given (e.g. sm_80,sm_90)")
    return tuple(targets)


@dataclass(frozen=True)
class RunSettings:
    kernel_path: str
    tests: tuple[str, ...] = ()
    operators: str | None = None
    #: only jit functions touched since this git ref are mutated (``engine/changes.py``)
    changed_since: str | None = None
    workers: int | None = None
    timeout_s: float = 120.0  # limit for the original's own check
    timeout_factor: float = 3.0  # mutant limit = factor * original time + base
    timeout_base_s: float = 5.0
    #: ``--case-time S``: test cases slower than S on the original are left out, named
    #: in the report (``baseline.leave_out_cases``); None: every case stays
    case_time_s: float | None = None
    #: each job's address-space limit (interpreted jobs); None: sized to the machine and
    #: the workers when the run starts (``limits.sized_memory_mb``)
    memory_mb: int | None = None
    seed: int = 0
    cache_dir: str = ".mutant-gate"
    use_cache: bool = True
    fail_under: float | None = None
    #: which score ``fail_under`` gates on: ``yours`` (the user's own tests) or
    #: ``written`` (with the tests mutant-gate wrote)
    gate_on: str = "yours"
    #: the baseline file of accepted survivors (``engine/accepted.py``); None: none
    accepted_path: str | None = None
    #: pre-registered predictions (``engine/predictions.py``), stored before the baseline
    predict_path: str | None = None
    mode: str = "interpret"  # interpret (CPU, Triton's interpreter) | compiled (CUDA device)
    #: ``--mode auto`` chose ``mode``: on a GPU, compiled survivors of mask, bound and
    #: offset operators are judged again in the interpreter (``modes.auto_recheck_stage``)
    auto_mode: bool = False
    sanitize: bool = False  # compiled mode under compute-sanitizer memcheck
    compare_modes: bool = False  # run every mutant in both modes
    project_root: str | None = None  # project mode: where the tests run from (default: found)
    select_tests: bool = True  # run only the test cases that launch a mutant's kernel
    #: pytest's own selection for the given test files (``-k EXPR``, ``-m EXPR``); node
    #: ids ride in ``tests`` (``tests/test_x.py::test_case``)
    keyword: str | None = None
    marker: str | None = None
    all_configs: bool = False  # run every @triton.autotune config, not only the first
    backend: str = "local"  # local | contree (engine/sandbox/contree.py) | ray (sandbox/ray.py)
    contree_image: str | None = None  # None: contree.DEFAULT_IMAGE
    contree_url: str | None = None  # None: the SDK's endpoint
    #: --backend ray: the cluster to join; None: a running one, else a local Ray for the run
    ray_address: str | None = None
    extra: dict = field(default_factory=dict)
    #: test writers (probe, model stage 1/2): ``engine/writers``; never holds the API key
    writers: WriterSettings = field(default_factory=WriterSettings)
    #: checks on survivors after the writers: ``engine/checks``
    compile_check: bool = False
    compile_targets: tuple[str, ...] = DEFAULT_TARGETS
    diff_oracle: bool = True  # on survivors: sorts them by what execution showed
    #: the closeness assertion that let each survivor through (``checks/tolerance.py``)
    tolerance: bool = True
    #: interpreter: masked loads without ``other=`` read NaN / the integer maximum on
    #: masked-off lanes (a GPU leaves them undefined); compiled mode: so does device memory
    #: from ``torch.empty`` a kernel leaves unwritten (``runner.fill_uninitialized``);
    #: ``--no-poison`` turns both off
    poison_undefined: bool = True
    #: interpreter: who runs a launch's programs, "batched" (every program at once,
    #: ``harness/batched.py``) or "triton" (Triton's own loop); ``--interpreter``
    interpreter: str = "batched"

    def to_json(self) -> dict:
        return asdict(self)


def _build(cls: type, data: dict) -> object:
    """A frozen settings dataclass from its JSON, ignoring fields it does not know."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def settings_from_json(data: dict, **overrides: object) -> RunSettings:
    """The ``RunSettings`` a report recorded (its ``settings``), with ``overrides``."""
    data = dict(data)
    writers = dict(data.get("writers") or {})
    writers["llm"] = _build(LLMSettings, writers.get("llm") or {})
    if isinstance(writers.get("probe_triggers"), list):
        writers["probe_triggers"] = tuple(writers["probe_triggers"])
    data["writers"] = _build(WriterSettings, writers)
    for key in ("tests", "compile_targets"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    data.update(overrides)
    return _build(RunSettings, data)  # type: ignore[return-value]
