"""Fast tests of the writers' parts: reading replies, probe inputs, the model client
(the real ``openai`` client against the loopback server), the report's test list."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from mutant_gate.cache import Store
from mutant_gate.engine import kernel_file
from mutant_gate.engine.job import CheckOutcome, JobResult, JobStatus
from mutant_gate.engine.records import MutantOutcome, Verdict
from mutant_gate.engine.settings import DEFAULT_MODEL, LLMSettings
from mutant_gate.engine.testlist import report_tests
from mutant_gate.engine.writers.llm import LLMClient, LLMError, names_model
from mutant_gate.engine.writers.probe.inputs import SHRINK_ELEMENTS, build, candidates
from mutant_gate.engine.writers.probe.kinds import Variant
from mutant_gate.engine.writers.probe.text import render_test
from mutant_gate.engine.writers.reading import extract_code, rename_taken, static_problem
from mutant_gate.engine.writers.stage1 import drop_functions
from mutant_gate.engine.writers.stage2 import equivalent_reason

from .fake_openai import FakeOpenAI, Reply

# -- reading replies -----------------------------------------------------------------


def test_extract_code_picks_the_python_block_with_tests():
    text = (
        "Some prose.\n```diff\n- a\n+ b\n```\n```python\nimport x\n```\n"
        "```python\nimport k\n\ndef test_a():\n    pass\n```\nmore prose"
    )
    assert extract_code(text) == "import k\n\ndef test_a():\n    pass\n"
    assert extract_code("```\ndef test_b():\n    pass\n") == "def test_b():\n    pass\n"
    assert extract_code("I would test odd sizes.") is None
    assert extract_code("```diff\n-x\n+y\n```") is None


def test_static_problems_are_read_not_run():
    assert "not valid Python (line 1" in static_problem("def test_a(:\n", "k")
    assert static_problem("import k\n\ndef helper():\n    pass\n", "k") == (
        "the code has no top-level test_* function"
    )
    assert "never import the kernel module 'k'" in static_problem("def test_a():\n    pass\n", "k")
    assert static_problem("from k import f\n\ndef test_a():\n    f()\n", "k") is None
    code = "import importlib\nk = importlib.import_module('k')\n\ndef test_a():\n    pass\n"
    assert static_problem(code, "k") is None


def test_rename_taken_keeps_every_kill_attributable():
    code = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
    renamed = rename_taken(code, {"test_a", "test_a_2"})
    assert "def test_a_3():" in renamed and "def test_b():" in renamed


def test_equivalent_answers():
    assert equivalent_reason("EQUIVALENT: the store is masked") == "the store is masked"
    assert equivalent_reason("**EQUIVALENT** - same values\nsecond line") == (
        "same values second line"
    )
    assert equivalent_reason("It is NOT EQUIVALENT.") is None
    assert equivalent_reason("Thinking...\nEQUIVALENT: yes", anywhere=True) == "yes"
    assert equivalent_reason("EQUIVALENT") == "(no reason given)"


def test_drop_functions_keeps_the_rest():
    code = "import k\n\n\n@mark\ndef test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
    assert drop_functions(code, {"test_b"}) == "import k\n\n\n\n\ndef test_b():\n    pass\n"


# -- probe inputs -----------------------------------------------------------------------

LAYER_NORM_CALL = {
    "function": "layer_norm",
    "args": [
        {
            "name": "x",
            "kind": "tensor",
            "shape": [23, 300],
            "dtype": "float32",
            "min": -4.2,
            "max": 0.5,
        },
        {"name": "normalized_shape", "kind": "value", "value": [300], "sequence": "tuple"},
        {
            "name": "weight",
            "kind": "tensor",
            "shape": [300],
            "dtype": "float32",
            "min": 0.0,
            "max": 1.0,
        },
        {
            "name": "bias",
            "kind": "tensor",
            "shape": [300],
            "dtype": "float32",
            "min": 0.0,
            "max": 1.0,
        },
    ],
    "kwargs": {"eps": {"kind": "value", "value": 1e-05}},
    "launches": 1,
    "constexprs": {"BLOCK_SIZE": [128]},
    "duration_s": 0.2,
}


def test_a_size_changes_everywhere_it_appears():
    c = build(
        LAYER_NORM_CALL,
        Variant("size", "size 299 instead of 300 (one off)", "size_299", {300: 299}),
        0,
    )
    assert c is not None
    assert c.call == "layer_norm(x, (299,), weight, bias, eps=1e-05)"
    assert "x = torch.empty((23, 299)).uniform_(-4.2, 0.5)" in c.setup
    assert "weight = torch.empty((299,)).uniform_(0.0, 1.0)" in c.setup
    assert c.setup.startswith("torch.manual_seed(0)\n")
    assert c.tensors == ("x", "weight", "bias")


def test_candidates_follow_the_family_and_stay_distinct():
    masks = candidates([LAYER_NORM_CALL], "masks", 40)
    precision = candidates([LAYER_NORM_CALL], "precision", 40)
    assert len({(c.setup, c.call) for c in masks}) == len(masks)
    kinds = [c.kind for c in masks]
    assert kinds[0] == "base" and kinds[1] == "size"
    # every family starts with the learned call itself, fresh values of its dtypes and shapes
    assert precision[0].kind == "base" and precision[0].describe.startswith("the own check's")
    assert precision[1].kind == "magnitude" and "uniform_(-100.0, 100.0)" in precision[1].setup
    assert precision[2].kind == "dtype" and ".to(torch.float16)" in precision[2].setup
    sizes = {c.describe for c in masks}
    assert "size 299 instead of 300 (one off)" in sizes
    assert "size 127 instead of 300 (one off the block size 128)" in sizes
    assert "size 451 instead of 300 (not a power of two)" in sizes
    assert any(c.kind == "values" and "-" in c.setup for c in masks)
    assert len(candidates([LAYER_NORM_CALL], "masks", 5)) == 5
    opaque = {**LAYER_NORM_CALL, "args": [{"name": "f", "kind": "opaque", "type": "object"}]}
    assert candidates([opaque], "masks", 10) == []


def test_a_probe_test_is_plain_python():
    c = build(LAYER_NORM_CALL, Variant("size", "size 299", "s", {300: 299}), 3)
    outputs = {"result": {"kind": "tensor", "dtype": "float32", "shape": [1], "values": [1.0]}}
    source = render_test(
        module="layer_norm",
        kernel_name="layer_norm.py",
        candidate=c,
        outputs=outputs,
        golden_name="test_g.json",
        test_name="test_layer_norm_size_299",
        why='Mutant abc (x) fails it: """quoted""" and a \\ backslash.',
    )
    tree = ast.parse(source)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == [
        "_load",
        "_check",
        "test_layer_norm_size_299",
    ]
    assert "from layer_norm import layer_norm" in source
    assert 'with_name("test_g.json")' in source
    assert "    result = layer_norm(x, (299,), weight, bias, eps=1e-05)" in source


def test_a_big_output_keeps_a_sample_that_still_tells_the_mutant_apart():
    """An output over the golden limit keeps its values where the mutant differs plus a
    seeded uniform sample; the written test's ``_check`` compares exactly those."""
    import torch

    from mutant_gate.engine.harness.probe.values import golden

    torch.manual_seed(0)
    original = torch.rand(600, 500)
    mutant = original.clone()
    mutant[599, 499] += 1.0  # one wrong element, in the last program's tail
    value = golden(original, mutant, budget=1000)
    assert value["kind"] == "sample" and value["shape"] == [600, 500]
    assert len(value["indices"]) == len(value["values"]) <= 1000
    assert value["indices"] == sorted(set(value["indices"]))
    assert 600 * 500 - 1 in value["indices"]  # where the mutant differs is always kept
    assert golden(original, mutant, budget=1000) == value  # seeded
    assert golden(original, budget=10**6)["kind"] == "tensor"  # under the budget: whole

    c = build(
        LAYER_NORM_CALL,
        Variant("base", "the own check's shapes with fresh values", "fresh_values"),
        3,
    )
    source = render_test(
        module="m", kernel_name="m.py", candidate=c, outputs={"result": value},
        golden_name="g.json", test_name="test_m", why="",
    )  # fmt: skip
    helpers = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)][:2]
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=helpers, type_ignores=[]), "probe_test", "exec"), namespace)
    namespace["_check"](original, value)
    with pytest.raises(AssertionError):
        namespace["_check"](mutant, value)
    with pytest.raises(AssertionError):
        namespace["_check"](original[:599], value)  # another shape


def _vector_add_call(n: int, blocks: list[int]) -> dict:
    tensor = {"kind": "tensor", "shape": [n], "dtype": "float32", "min": 0.0, "max": 1.0}
    return {
        "function": "add",
        "args": [{"name": "x", **tensor}, {"name": "y", **tensor}],
        "kwargs": {},
        "launches": 1,
        "constexprs": {"BLOCK_SIZE": blocks},
        "duration_s": 0.05,
    }


def test_big_candidates_shrink_keeping_the_tail_past_the_last_block():
    # An own check of add(x, y) with 614528 = 600 * 1024 + 128 elements: above the probe's
    # size limit, so every candidate shrinks.
    cs = candidates([_vector_add_call(614528, [1024])], "masks", 40)
    assert cs == candidates([_vector_add_call(614528, [1024])], "masks", 40)  # deterministic
    assert len({(c.setup, c.call) for c in cs}) == len(cs)
    assert all(c.elements <= SHRINK_ELEMENTS for c in cs)
    keep = "(same remainder modulo the block size 1024)"
    by = {c.describe: c for c in cs}
    base = by[f"the own check's shapes with fresh values, sizes shrunk 614528 -> 1152 {keep}"]
    assert "x = torch.empty((1152,)).uniform_(0.0, 1.0)" in base.setup and base.elements == 2304
    assert base.slug == "fresh_values_size_1152"
    # one off stays one off of the shrunk size, with the same remainder modulo the block
    below = by[f"size 614527 instead of 614528 (one off), sizes shrunk 614527 -> 1151 {keep}"]
    above = by[f"size 614529 instead of 614528 (one off), sizes shrunk 614529 -> 1153 {keep}"]
    assert "(1151,)" in below.setup and below.slug == "size_1151"
    assert "(1153,)" in above.setup and above.slug == "size_1153"
    assert 614527 % 1024 == 1151 % 1024 and 614529 % 1024 == 1153 % 1024
    # small enough already: unchanged
    assert "size 1025 instead of 614528 (one off the block size 1024)" in by
    npot = next(c for c in cs if c.kind == "npot")
    assert npot.describe.endswith(f"sizes shrunk 921793 -> 1217 {keep}")
    assert 921793 % 1024 == 1217 % 1024
    assert all(d.endswith(keep) for d in by if "shrunk" in d)

    # A block multiple keeps two blocks; its neighbours stay one off.
    multiple = {c.describe: c for c in candidates([_vector_add_call(614400, [1024])], "masks", 40)}
    assert (
        f"the own check's shapes with fresh values, sizes shrunk 614400 -> 2048 {keep}" in multiple
    )
    assert (
        f"size 614401 instead of 614400 (one off), sizes shrunk 614401 -> 2049 {keep}" in multiple
    )
    assert (
        f"size 614399 instead of 614400 (one off), sizes shrunk 614399 -> 2047 {keep}" in multiple
    )

    # No block size captured: about a quarter at a time, odd stays odd, still one off.
    plain = {c.describe: c for c in candidates([_vector_add_call(614528, [])], "masks", 40)}
    assert "the own check's shapes with fresh values, sizes shrunk 614528 -> 153632" in plain
    assert "size 614529 instead of 614528 (one off), sizes shrunk 614529 -> 153633" in plain
    npot = next(c for c in plain.values() if c.kind == "npot")
    assert npot.describe.endswith("sizes shrunk 921793 -> 230449")

    # Rows far below every block size are programs run one by one: they shrink first, to
    # 16 plus their remainder modulo 16, and a row one off stays one off.
    rows = {
        "function": "layer_norm",
        "args": [
            {"name": "x", "kind": "tensor", "shape": [1151, 8192], "dtype": "float16"},
            {"name": "w", "kind": "tensor", "shape": [8192], "dtype": "float16"},
        ],
        "kwargs": {},
        "launches": 1,
        "constexprs": {"BLOCK_SIZE": [8192], "num_warps": [8]},  # num_warps: not a block
        "duration_s": 5.0,
    }
    by_rows = {c.describe for c in candidates([rows], "masks", 40)}
    assert "the own check's shapes with fresh values, sizes shrunk 1151 -> 31" in by_rows
    assert "size 1152 instead of 1151 (one off), sizes shrunk 1152 -> 32" in by_rows
    assert "size 8191 instead of 8192 (one off), sizes shrunk 1151 -> 31" in by_rows

    # Below the limit nothing shrinks: the tutorial's 98432 runs as the own check had it.
    small = {c.describe for c in candidates([_vector_add_call(98432, [1024])], "masks", 40)}
    assert "the own check's shapes with fresh values" in small
    assert not [d for d in small if "shrunk" in d]


def test_every_trigger_kind_comes_round_robin_with_its_input():
    """A persistent row kernel's call (8 programs, 3 rows) with a float threshold: the first
    candidates are one of each trigger kind, each with the input its kind promises."""
    call = {
        "function": "row_sum",
        "args": [
            {"name": "x", "kind": "tensor", "shape": [3, 16], "dtype": "float32", "min": 0.0,
             "max": 1.0},
            {"name": "idx", "kind": "tensor", "shape": [16], "dtype": "int32", "min": 0,
             "max": 15},
        ],
        "kwargs": {"thr": {"kind": "value", "value": 0.25}},
        "launches": 1,
        "constexprs": {"BLOCK": [16]},
        "grids": [[8, 1, 1]],
        "duration_s": 0.05,
    }  # fmt: skip
    cs = candidates([call], "arith", 40)
    kinds = [c.kind for c in cs]
    first = kinds[: len(set(kinds))]
    assert len(set(first)) == len(first) == 13  # every kind once before any twice
    assert first[:2] == ["base", "magnitude"]  # arith: the learned call, then magnitude
    by = {}
    for c in cs:
        by.setdefault(c.kind, []).append(c)
    assert "x = torch.empty((17, 16))" in by["more-rows"][0].setup  # 2 * 8 programs + 1
    assert by["more-rows"][0].describe.endswith("(more rows than the 8 programs the launch had)")
    layouts = {c.slug: c.setup for c in by["non-contiguous"]}
    assert "x = (torch.empty((3, 19)).uniform_(0.0, 1.0))[..., :16]" in layouts["sliced"]
    assert (
        "x = (torch.empty((16, 3)).uniform_(0.0, 1.0)).transpose(-2, -1)" in layouts["transposed"]
    )
    specials = [c.setup.splitlines()[-1] for c in by["special-values"]]
    assert specials == [
        "x[0] = 0.0",  # first: what a person tries first
        'x[0] = float("-inf")',
        'x[0] = float("nan")',
        'x[0] = float("inf")',
        "x[0] = torch.finfo(x.dtype).max ** 0.5 * 2",
    ]
    # float16 with a row whose square overflows it: the first input of its dtype kind
    assert by["dtype"][0].setup.splitlines()[-1] == specials[-1]
    assert ".to(torch.float16)" in by["dtype"][0].setup
    values = [c.setup.splitlines()[1] for c in by["values"]]
    assert values[:2] == ["x = torch.zeros((3, 16))", "x = torch.ones((3, 16))"]
    (boundary,) = by["boundary-values"]
    assert "torch.tensor([0.0, 1.0, 0.25])[torch.randint(0, 3, (3, 16))]" in boundary.setup
    magnitude = [c.setup.splitlines() for c in by["magnitude"]]
    assert "x = torch.empty((3, 16)).uniform_(-100.0, 100.0)" in magnitude[0]
    assert magnitude[1][-1] == 'x[..., 0] = float("-inf")'  # a -inf lane in every row
    ints = [c.setup for c in by["int-dtype"]]
    # float inputs as integers: never all zeros from values in [0, 1)
    assert any("x = torch.randint(0, 8, (3, 16), dtype=torch.int32)" in s for s in ints), ints
    assert any("torch.iinfo(torch.int32).min" in s and "dtype=torch.int32" in s for s in ints)
    assert any("dtype=torch.int64" in s for s in ints)
    # --probe-triggers keeps only the kinds named, in the family's order
    only = candidates([call], "arith", 40, triggers=("non-contiguous", "more-rows"))
    assert [c.kind for c in only] == ["more-rows", "non-contiguous", "non-contiguous"]


# -- the model client ----------------------------------------------------------------------


def client(fake: FakeOpenAI, store: Store | None = None, **kw) -> LLMClient:
    settings = LLMSettings(base_url=fake.base_url, backoff_s=0.0, **kw)
    return LLMClient(settings, "sk-unit", store)


HELLO = [{"role": "user", "content": "hello"}]


def test_500_then_success_is_retried_and_counted():
    with FakeOpenAI([Reply("busy", status=500), Reply("done", prompt_tokens=7)]) as fake:
        c = client(fake, price_in=1.0, price_out=2.0)
        reply = c.chat(HELLO)
    assert reply.content == "done" and not reply.cached
    assert len(fake.chats) == 2 and c.retries == 1
    assert c.tokens() == {
        "prompt": 7,
        "completion": 50,
        "cost_usd": round(7 / 1e6 + 100 / 1e6, 6),
        "price": {
            "in": 1.0,
            "out": 2.0,
            "source": "the run's --price-in/--price-out",
            "date": None,
            "assumed": False,
        },
        "model": DEFAULT_MODEL,
        "calls": 1,
        "cached_calls": 0,
        "retries": 1,
    }


def test_429_waits_as_told_and_giving_up_is_not_fatal():
    script = [Reply("slow down", status=429, headers={"Retry-After": "0"}) for _ in range(3)]
    with FakeOpenAI(script) as fake:
        with pytest.raises(LLMError) as info:
            client(fake, retries=2).chat(HELLO)
    assert "failed after 3 tries: 429: slow down" in str(info.value)
    assert not info.value.fatal and len(fake.chats) == 3


def test_no_answer_in_time_is_retried_then_reported():
    with FakeOpenAI([Reply("late", delay_s=1.0), Reply("late", delay_s=1.0)]) as fake:
        with pytest.raises(LLMError, match=r"no answer within 0.2 s"):
            client(fake, retries=1, timeout_s=0.2).chat(HELLO)


def test_bad_key_and_substituted_model_are_fatal_one_liners():
    with FakeOpenAI([Reply("Invalid API key", status=401)]) as fake:
        with pytest.raises(LLMError) as info:
            client(fake).chat(HELLO)
    assert info.value.fatal and "refused the API key (401): Invalid API key" in str(info.value)
    assert "\n" not in str(info.value)
    with FakeOpenAI([Reply("hi", model="some/other-model")]) as fake:
        with pytest.raises(LLMError, match="names model 'some/other-model', not the requested"):
            client(fake).chat(HELLO)
    assert names_model(DEFAULT_MODEL + "-2026-03-11", DEFAULT_MODEL)
    assert not names_model("nvidia/nemotron-3-super", DEFAULT_MODEL)
    assert not names_model(DEFAULT_MODEL.upper(), DEFAULT_MODEL)


def test_model_list_check(tmp_path):
    with FakeOpenAI(models=("nvidia/Nemotron-3-Super-120B-A12B",)) as fake:
        with pytest.raises(LLMError) as info:
            client(fake).check_model()
    assert "did you mean nvidia/Nemotron-3-Super-120B-A12B" in str(info.value)
    with FakeOpenAI(models_status=404) as fake:
        assert "has no model list" in client(fake).check_model()
    with Store(str(tmp_path)) as store, FakeOpenAI() as fake:
        assert "offered by" in client(fake, store).check_model()
        assert "checked before" in client(fake, store).check_model()
        assert len(fake.requests) == 1


def test_a_model_stage_without_a_key_is_refused_with_what_to_do(monkeypatch):
    from mutant_gate.engine.settings import WriterSettings
    from mutant_gate.engine.writers.model import missing_key

    for key in ("NEBIUS_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert missing_key(WriterSettings(writer="probe")) is None
    keys = "set NEBIUS_API_KEY or OPENAI_API_KEY"
    assert missing_key(WriterSettings(writer="llm")) == (
        f"--writer llm needs a model key: {keys} (or use --writer probe)"
    )
    assert missing_key(WriterSettings(writer="none", stage2=True)) == (
        f"--stage2 needs a model key: {keys} (or leave out --stage2)"
    )
    assert missing_key(WriterSettings(writer="llm", stage2=True)) == (
        f"--writer llm and --stage2 need a model key: {keys} "
        "(or use --writer probe without --stage2)"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert missing_key(WriterSettings(writer="llm", stage2=True)) is None


def test_replies_are_cached_by_request(tmp_path):
    with Store(str(tmp_path)) as store, FakeOpenAI([Reply("one"), Reply("two")]) as fake:
        first = client(fake, store)
        assert first.chat(HELLO).content == "one"
        second = client(fake, store)
        again = second.chat(HELLO)
        assert (again.content, again.cached) == ("one", True)
        assert second.tokens()["prompt"] == 0 and second.tokens()["cached_calls"] == 1
        assert second.chat([{"role": "user", "content": "other"}]).content == "two"
        other_model = client(fake, store, model="x/y")
        with pytest.raises(LLMError):  # a different request: asked, and the model is wrong
            other_model.chat(HELLO)
    assert len(fake.chats) == 3


# -- the report's test list -------------------------------------------------------------------

KERNEL_SOURCE = 'def f():\n    pass\n\n\nif __name__ == "__main__":\n    f()\n'


def test_report_tests_name_origin_source_and_kills():
    written = kernel_file.TestFile(
        "", "t_probe.py", "def test_p():\n    assert 1\n", origin="probe"
    )
    given = kernel_file.TestFile("/x/t.py", "t.py", "def test_g():\n    assert 1\n")
    kernel = kernel_file.KernelFile(
        "/x/k.py", "k.py", KERNEL_SOURCE, "0", (), True, (), (given, written)
    )
    baseline = JobResult(
        JobStatus.PASSED,
        (CheckOutcome("own-check", "passed", 0.5), CheckOutcome("test::test_g", "passed", 0.1)),
    )

    def killed(mid: str, by: str) -> MutantOutcome:
        return MutantOutcome(mid, Verdict.KILLED, by, "why", 0.1, False)

    outcomes = {
        "m1": killed("m1", "own-check"),
        "m2": killed("m2", "test:test_g"),
        "m3": killed("m3", "test:test_p"),
        "m4": killed("m4", "bounds"),
    }

    class M:
        def __init__(self, mid: str) -> None:
            self.id = mid

    entries = report_tests(kernel, baseline, [M(k) for k in outcomes], outcomes)
    assert [(e["name"], e["origin"], e["file"], e["kills"]) for e in entries] == [
        ("own-check", "own", "k.py", ["m1"]),
        ("test::test_g", "given", "t.py", ["m2"]),
        ("test::test_p", "probe", "t_probe.py", ["m3"]),
    ]
    assert entries[0]["source"].startswith('if __name__ == "__main__":')
    assert entries[2]["source"] == "def test_p():\n    assert 1\n"
    assert entries[2]["baseline_duration_s"] is None


def test_the_probe_harness_needs_only_what_a_sandbox_has():
    code = "import sys, mutant_gate.engine.harness.probe; print(' '.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    roots = {name.split(".")[0] for name in out.split()}
    for forbidden in ("libcst", "rich", "diskcache", "textual", "openai"):
        assert forbidden not in roots, forbidden


PROBED_MODULE = """
import functools

import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2


def double(x):
    return x * 2


def _helper(x):
    return x


scale = Scale.apply
twice = lambda x: x * 2  # noqa: E731
partial_double = functools.partial(double)
relu = torch.relu
Klass = Scale
LIMIT = 3

double(torch.ones(2))  # the module-level check: left out when probing
checked = double(torch.ones(2))
print(checked)  # fails without it, and is skipped too
"""


def test_probe_wraps_public_callables_and_can_leave_the_module_check_out(tmp_path):
    """The probe records calls of public functions and of public names bound to
    callables (``layer_norm = LayerNorm.apply`` in the layer-norm tutorial); when it
    only needs the definitions it leaves the module-level check out."""
    import torch

    from mutant_gate.engine.harness.probe import capturing as harness

    path = tmp_path / "probed.py"
    path.write_text(PROBED_MODULE)
    recorder = harness._Recorder()
    _, wrapped, errors = harness._run_wrapped("probed_all", str(path), recorder, main=False)
    assert sorted(wrapped) == ["double", "partial_double", "scale", "twice"]
    assert errors == []
    module, wrapped, errors = harness._run_wrapped("probed_defs", str(path), None, False, False)
    assert wrapped == [] and len(errors) == 1 and "NameError" in errors[0]
    assert not hasattr(module, "checked")
    assert module.scale(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]


def test_probe_candidates_are_keyed_by_what_runs_and_reordered_by_the_run_kills():
    from mutant_gate.engine.records import Mutant
    from mutant_gate.engine.writers.probe.search import Search

    masks = candidates([LAYER_NORM_CALL], "masks", 12)
    arith = candidates([LAYER_NORM_CALL], "arith", 12)
    # the same input planned for two families has one id: its original's run is shared
    shared = {c.id for c in masks} & {c.id for c in arith}
    assert shared and all(
        a.setup == b.setup for a in masks for b in arith if a.id == b.id and a.id in shared
    )
    assert len({c.id for c in masks}) == len(masks)
    search = Search(Mutant.__new__(Mutant), masks)
    assert [c.kind for c in search.pending][:2] == ["base", "size"]  # the family's prior
    search.reorder({"dtype": 1, "values": 2})
    kinds = [c.kind for c in search.pending]
    first = [k for k in kinds if k in ("dtype", "values")]
    assert kinds[: len(first)] == sorted(first, key=lambda k: k != "values")  # most kills first
    rest = [c.id for c in search.pending if c.kind not in ("dtype", "values")]
    assert rest == [c.id for c in masks if c.kind not in ("dtype", "values")]  # as planned


def test_under_the_budgets_floor_a_round_tries_every_kind_a_survivor_never_tried():
    """Out of time (nothing left of the budget), a survivor's next round is empty, but
    while the probe has spent less than its floor, the round still runs the best input of
    every kind it never tried, and nothing past them."""
    from mutant_gate.engine.records import Mutant
    from mutant_gate.engine.writers.probe.search import Search, fit

    queue = candidates([LAYER_NORM_CALL], "arith", 24)
    search = Search(Mutant.__new__(Mutant), queue)
    search.consume(search.batch({}))  # the first round: base and the next kind
    tried = {c.kind for c in search.ran}
    never = {c.kind for c in search.pending} - tried
    assert len(never) >= 5
    fit([search], 0.0, 1.0, {}, {})
    assert search.batch({}) == []  # the budget is spent
    fit([search], 0.0, 1.0, {}, {}, floor=True)
    batch = search.batch({})
    assert {c.kind for c in batch} == never and batch[-1].kind not in {c.kind for c in batch[:-1]}
    search.consume(batch)
    fit([search], 0.0, 1.0, {}, {}, floor=True)
    assert search.batch({}) == []  # every kind tried: the floor asks for nothing more


def test_probe_digest_is_exact():
    import torch

    from mutant_gate.engine.harness.probe.values import digest

    x = torch.tensor([1.0, float("nan"), -0.0])
    assert digest({"result": x}) == digest({"result": x.clone()})
    assert digest({"result": x}) != digest({"result": torch.tensor([1.0, float("nan"), 0.0])})
    assert digest({"result": x}) != digest({"result": x.double()})
    assert digest({"result": x}) != digest({"y": x})
    assert digest({"result": (x, 3, None)}) != digest({"result": (x, 3.0, None)})
    assert digest({"result": object()}) is None


def test_the_originals_outputs_sent_whole_stand_for_its_run_only_as_their_digest_says():
    """In the interpreter a job of the original alone on the first inputs sends its
    outputs back whole (``_ship``), once two runs gave the same bits; a compare job
    given them runs no original where a mutant differs, and compares with them exactly
    as with a run of its own. Outputs that are not what the digest says (or too many,
    or not tensors) are not sent or not believed: it runs."""
    import types

    import torch

    from mutant_gate.engine.harness.probe.comparing import _against, _Originals
    from mutant_gate.engine.harness.probe.values import SHIP_JOB_BYTES, _ship
    from mutant_gate.engine.harness.worker import RESULT_LIMIT

    steady = types.ModuleType("steady")
    steady.f = lambda x: (x * 2).to(torch.bfloat16)
    mutant = types.ModuleType("mutant")
    mutant.f = lambda x: (x * 3).to(torch.bfloat16)
    candidate = {"id": "c1", "function": "f", "setup": "x = torch.arange(8.0)",
                 "call": "f(x)", "tensors": ["x"]}  # fmt: skip

    alone = _Originals(steady, {}, exact=True)
    alone.ship = SHIP_JOB_BYTES  # a job of the original alone
    kept, _ = alone.run(candidate)
    record = alone.learned["c1"]
    assert record["outputs"]["result"]["dtype"] == "bfloat16"
    known = {"c1": {k: record[k] for k in ("digest", "kept", "outputs")}}

    given = _Originals(steady, known, exact=True)
    status, why, golden, _ = _against(given, candidate, mutant)
    assert status == "differs" and given.runs == 0  # the mutant alone ran
    assert torch.equal(golden["result"], kept["result"])
    ran = _Originals(steady, {"c1": {"digest": record["digest"], "kept": ["result"]}}, True)
    assert _against(ran, candidate, mutant)[:2] == (status, why) and ran.runs == 1

    forged = {"c1": {**known["c1"], "outputs": _ship({"result": kept["result"] + 1})}}
    lied = _Originals(steady, forged, exact=True)
    assert _against(lied, candidate, mutant)[0] == "differs" and lied.runs == 1
    # what a job sends fits in what its answer may hold, with room for the rest of it
    assert SHIP_JOB_BYTES <= 0.7 * RESULT_LIMIT
    assert _ship({"result": torch.zeros(SHIP_JOB_BYTES // 4)}) is None
    assert _ship({"result": torch.zeros(100)}, room=100) is None
    assert _ship({"result": 3}) is None
    on_gpu = _Originals(steady, known, exact=False)  # bits may vary: it runs again
    assert _against(on_gpu, candidate, mutant)[0] == "differs" and on_gpu.runs >= 1

    # Sent whole only where a second run here gives the same bits: an original that
    # varies on the input (unwritten output memory, say) makes it unusable at once.
    assert alone.runs == 2
    noisy = types.ModuleType("noisy")
    noisy.f = lambda x: x + torch.rand_like(x)
    varies = _Originals(noisy, {}, exact=True)
    varies.ship = SHIP_JOB_BYTES
    kept, why = varies.run(candidate)
    assert kept is None and "differ from one run to the next" in why
    assert varies.learned["c1"]["status"] == "unstable" and "outputs" not in varies.learned["c1"]


def test_a_hit_on_a_gpu_is_believed_only_if_the_original_repeats_itself():
    """Where bits may differ between runs (compiled mode), a hit first runs the original
    once more: an original whose outputs hold unwritten memory (here: fresh noise each
    run) makes the input unusable instead of a test that fails the original; a stable
    one keeps the hit, and is asked once."""
    import types

    import torch

    from mutant_gate.engine.harness.probe.comparing import _against, _Originals

    noisy = types.ModuleType("noisy")
    noisy.f = lambda x: x + torch.rand_like(x)  # what unwritten output elements look like
    steady = types.ModuleType("steady")
    steady.f = lambda x: x * 2
    mutant = types.ModuleType("mutant")
    mutant.f = lambda x: x * 3
    candidate = {"id": "c1", "function": "f", "setup": "x = torch.ones(8)", "call": "f(x)",
                 "tensors": ["x"]}  # fmt: skip

    originals = _Originals(noisy, {}, exact=False)
    status, why, kept, _ = _against(originals, candidate, mutant)
    assert status == "original_unstable" and kept is None
    assert "differ from one run to the next" in why
    assert originals.learned["c1"]["status"] == "unstable"

    originals = _Originals(steady, {}, exact=False)
    assert _against(originals, candidate, mutant)[0] == "differs"
    runs = originals.runs
    assert _against(originals, candidate, mutant)[0] == "differs"
    assert originals.runs == runs  # confirmed once: the original is not asked again
    exact = _Originals(noisy, {}, exact=True)  # the interpreter: digests judge that
    assert _against(exact, candidate, mutant)[0] == "differs"


def test_a_run_made_ahead_counts_only_where_its_limit_could_not_have_changed_it():
    """A probe test runs on the other survivors in its proof's round, under the limit
    from the original's expected time; ``kill_others`` reuses such a run only where the
    limit it would set itself gives the same run."""
    from mutant_gate.engine.writers.proving import _reusable

    failed = (JobResult(JobStatus.FAILED, duration_s=2.0), False)
    hung = (JobResult(JobStatus.TIMEOUT, duration_s=5.0), False)
    broken = (JobResult(JobStatus.ERROR, duration_s=0.1), False)
    assert _reusable(failed, ran_under=5.0, limit=4.0)  # ended inside both limits
    assert not _reusable(failed, ran_under=5.0, limit=1.5)  # would have timed out
    assert _reusable(hung, ran_under=5.0, limit=4.0)  # a longer limit timed out too
    assert not _reusable(hung, ran_under=5.0, limit=8.0)  # it might end under more time
    assert not _reusable(broken, ran_under=5.0, limit=4.0)
    assert not _reusable(None, ran_under=5.0, limit=4.0)
