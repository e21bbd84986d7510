"""The mutate stage: operator catalog, jit-function discovery, generation rules."""

from __future__ import annotations

import difflib
import importlib
import os
import re
import textwrap

import libcst as cst
import pytest

from mutant_gate.engine.mutate import (
    FAMILIES,
    Example,
    Operator,
    all_operators,
    find_jit_functions,
    generate_mutants,
    select_operators,
)
from mutant_gate.engine.records import Mutant

LAYER_NORM = textwrap.dedent(
    '''
    """A layer-norm kernel in the style of the Triton tutorials."""

    import torch
    import triton
    import triton.language as tl


    def _block_for(n, limit=1024):
        # Launcher arithmetic is not a jit function: never mutated.
        return min(limit, triton.next_power_of_2(n)) if n < limit else limit


    @triton.heuristics({"EVEN_N": lambda args: args["N"] % args["BLOCK"] == 0})
    @triton.jit
    def _layer_norm_fwd(X, Y, W, B, Rstd, stride, N, eps=1e-5, BLOCK: tl.constexpr = 128):
        row = tl.program_id(0)
        X += row * stride
        Y += row * stride
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            acc += x
        mean = tl.sum(acc, axis=0) / N
        var_acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            x = tl.where(cols < N, x - mean, 0.0)
            var_acc += x * x
        var = tl.sum(var_acc, axis=0) / N
        rstd = 1 / tl.sqrt(var + eps)
        tl.store(Rstd + row, rstd)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            w = tl.load(W + cols, mask=mask)
            b = tl.load(B + cols, mask=mask)
            x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd * w + b
            tl.store(Y + cols, y, mask=mask)


    def layer_norm(x, weight, bias, eps=1e-5):
        y = torch.empty_like(x)
        M, N = x.shape
        rstd = torch.empty((M,), dtype=torch.float32)
        if N < 1 or tl is None:
            raise ValueError("empty rows")
        grid = (triton.cdiv(M, 1),)
        _layer_norm_fwd[grid](x, y, weight, bias, rstd, x.stride(0), N, eps, BLOCK=_block_for(N))
        return y


    if __name__ == "__main__":
        x = torch.randn(7, 33)
        print(layer_norm(x, torch.ones(33), torch.zeros(33)).shape)
    '''
).lstrip()

FAMILY_MODULES = {
    family: importlib.import_module(f"mutant_gate.engine.mutate.{family}") for family in FAMILIES
}


def _examples() -> list[tuple[Operator, int, Example]]:
    return [(op, i, ex) for op in all_operators() for i, ex in enumerate(op.examples)]


def _jit_line_ranges(source: str) -> list[range]:
    return [range(f.line, f.end_line + 1) for f in find_jit_functions(cst.parse_module(source))]


# -- the catalog -----------------------------------------------------------------


def test_registry_is_complete_and_well_formed():
    operators = all_operators()
    names = [op.name for op in operators]
    assert len(operators) >= 12
    assert len(set(names)) == len(names)
    assert operators == all_operators()  # stable order
    for op in operators:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", op.name), op.name
        assert op.family in FAMILIES
        assert op.description and "\n" not in op.description
        assert op.examples, f"{op.name} has no example"
    for family, module in FAMILY_MODULES.items():
        assert module.__doc__ and "->" in module.__doc__, f"{family} docstring lacks examples"
        assert len(module.OPERATORS) >= 2, family
        assert all(op.family == family for op in module.OPERATORS)
    assert {op.family for op in operators} == set(FAMILIES)


@pytest.mark.parametrize(
    ("op", "index", "example"),
    _examples(),
    ids=[f"{op.name}-{i}" for op, i, _ in _examples()],
)
def test_operator_example(op: Operator, index: int, example: Example):
    assert find_jit_functions(cst.parse_module(example.before)), "example is not a jit kernel"
    mutants = generate_mutants(example.before, "ex.py", [op])
    assert any(m.source == example.after for m in mutants), (
        f"{op.name} example {index} not produced; got:\n"
        + "\n".join(f"  {m.before!r} -> {m.after!r}" for m in mutants)
    )
    assert all(m.operator == op.name and m.family == op.family for m in mutants)


# -- generation rules ------------------------------------------------------------


def test_generation_is_deterministic_and_ids_unique():
    first = generate_mutants(LAYER_NORM, "kernels/layer_norm.py")
    second = generate_mutants(LAYER_NORM, "kernels/layer_norm.py")
    assert [m.id for m in first] == [m.id for m in second]
    assert first == second
    assert len({m.id for m in first}) == len(first)
    assert len({m.source for m in first}) == len(first)  # no duplicates
    assert all(m.source != LAYER_NORM for m in first)
    keys = [(m.line, m.col, m.operator, m.after) for m in first]
    assert keys == sorted(keys)


def test_id_is_the_record_hash():
    for m in generate_mutants(LAYER_NORM, "layer_norm.py"):
        assert m.id == Mutant.make_id(m.operator, m.line, m.col, m.end_line, m.end_col, m.source)


def test_realistic_kernel_covers_all_families():
    mutants = generate_mutants(LAYER_NORM, "layer_norm.py")
    assert {m.family for m in mutants} == set(FAMILIES)
    operators = {m.operator for m in mutants}
    for expected in (
        "mask-drop",
        "other-change",
        "compare-lt-le",
        "range-bound-shift",
        "accumulator-fp16",
        "upcast-drop",
        "program-id-swap",
        "block-offset-drop",
        "add-sub",
        "epsilon-change",
        "where-swap",
    ):
        assert expected in operators
    assert all(m.function == "_layer_norm_fwd" for m in mutants)


def test_every_mutant_parses_and_records_its_place():
    lines = LAYER_NORM.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    for m in generate_mutants(LAYER_NORM, "kernels/layer_norm.py"):
        compile(m.source, "layer_norm.py", "exec")
        begin = starts[m.line - 1] + m.col
        end = starts[m.end_line - 1] + m.end_col
        assert LAYER_NORM[begin:end] == m.before
        assert m.source == LAYER_NORM[:begin] + m.after + LAYER_NORM[end:]
        expected = difflib.unified_diff(
            lines, m.source.splitlines(keepends=True), "a/layer_norm.py", "b/layer_norm.py", n=3
        )
        assert m.diff == "".join(expected)


def test_nothing_outside_jit_bodies_is_mutated():
    source = LAYER_NORM
    inside = _jit_line_ranges(source)
    assert len(inside) == 1
    signature_line = source.splitlines().index(
        next(line for line in source.splitlines() if line.startswith("def _layer_norm_fwd"))
    )
    for m in generate_mutants(source, "layer_norm.py"):
        assert any(m.line in r for r in inside)
        assert m.line > signature_line + 1  # neither decorators nor signature/defaults
        changed = [
            line[1:]
            for line in m.diff.splitlines()
            if line.startswith("-") and not line.startswith("---")
        ]
        for text in changed:
            assert "def " not in text and "@triton" not in text and "lambda" not in text


def test_helpers_and_launchers_are_untouched():
    source = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        def helper(x_ptr, n):
            # looks like kernel code, but is not jit
            return tl.load(x_ptr, mask=n < 4, other=0.0) + tl.cdiv(n, 2)


        @triton.jit
        def kernel(x_ptr, n):
            tl.store(x_ptr, n + 1)


        def launch(x, n):
            kernel[(triton.cdiv(n, 128),)](x, n < 4)
        """
    )
    mutants = generate_mutants(source, "k.py")
    assert [(m.operator, m.before, m.after) for m in mutants] == [("add-sub", "n + 1", "n - 1")]


def test_skip_comment_excludes_its_line():
    source = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        @triton.jit
        def kernel(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n  # mutant-gate: skip
            tl.store(x_ptr + offs, offs, mask=offs < n)
        """
    )
    mutants = generate_mutants(source, "k.py")
    skipped_line = next(i for i, line in enumerate(source.splitlines(), 1) if "skip" in line)
    assert mutants
    assert all(m.line != skipped_line for m in mutants)
    without_comment = source.replace("  # mutant-gate: skip", "")
    assert any(m.line == skipped_line for m in generate_mutants(without_comment, "k.py"))


DECORATED = textwrap.dedent(
    """
    import triton
    import triton as tr
    import triton.language as tl
    from triton import jit
    from triton import jit as triton_jit


    @triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def tuned(x_ptr, n, BLOCK: tl.constexpr):
        tl.store(x_ptr, n + 1)


    @triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
    @triton.jit(debug=True)
    def heuristic(x_ptr, n, EVEN: tl.constexpr):
        tl.store(x_ptr, n + 2)


    @jit
    def bare(x_ptr, n):
        tl.store(x_ptr, n + 3)


    @tr.jit
    def aliased(x_ptr, n):
        tl.store(x_ptr, n + 4)


    @triton_jit
    def renamed(x_ptr, n):
        tl.store(x_ptr, n + 5)


    class Kernels:
        @staticmethod
        @triton.jit
        def in_class(x_ptr, n):
            tl.store(
                x_ptr,
                n + 6,
            )


    if triton is not None:
        @triton.jit
        def in_if(x_ptr, n):
            tl.store(x_ptr, n + 7)


    @some.other.decorator
    def not_jit(x_ptr, n):
        tl.store(x_ptr, n + 8)


    def plain(x_ptr, n):
        tl.store(x_ptr, n + 9)
    """
)
DECORATED_JIT = ["tuned", "heuristic", "bare", "aliased", "renamed", "in_class", "in_if"]


def test_find_jit_functions_sees_every_spelling():
    found = find_jit_functions(cst.parse_module(DECORATED))
    assert [f.name for f in found] == DECORATED_JIT
    lines = DECORATED.splitlines()
    for f in found:
        assert lines[f.line - 1].lstrip().startswith(f"def {f.name}(")
        assert f.end_line >= f.line
        assert isinstance(f.node, cst.FunctionDef)


def test_generation_reaches_the_same_functions():
    mutants = generate_mutants(DECORATED, "k.py", select_operators("add-sub"))
    assert sorted({m.function for m in mutants}) == sorted(DECORATED_JIT)
    in_class = next(m for m in mutants if m.function == "in_class")
    assert in_class.after == "n - 6"
    for m in mutants:
        compile(m.source, "k.py", "exec")


def test_default_values_and_decorators_are_not_mutated():
    source = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        @triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0 and args["n"] < 1e-4})
        @triton.jit
        def kernel(x_ptr, n, eps=1e-5, BLOCK: tl.constexpr = 2 * 64):
            tl.store(x_ptr, eps)
        """
    )
    assert generate_mutants(source, "k.py") == []


def test_replacements_are_parenthesised_where_precedence_needs_it():
    source = Example.kernel("y = 3 * tl.cdiv(n, BLOCK)", "").before
    (mutant,) = generate_mutants(source, "k.py", select_operators("cdiv-floordiv"))
    assert mutant.after == "(n // BLOCK)"
    assert "y = 3 * (n // BLOCK)" in mutant.source


def test_file_without_final_newline_and_with_crlf():
    for variant in (LAYER_NORM.rstrip("\n"), LAYER_NORM.replace("\n", "\r\n")):
        mutants = generate_mutants(variant, "layer_norm.py")
        assert len(mutants) == len(generate_mutants(LAYER_NORM, "layer_norm.py"))
        for m in mutants:
            compile(m.source, "layer_norm.py", "exec")
            expected = difflib.unified_diff(
                variant.splitlines(keepends=True),
                m.source.splitlines(keepends=True),
                "a/layer_norm.py",
                "b/layer_norm.py",
                n=3,
            )
            assert m.diff == "".join(expected)


class _Invalid(Operator):
    """Test operator: rewrites that are not valid code, or change nothing."""

    name = "test-invalid"
    family = "arith"
    description = "renames n to a keyword, reorders arguments, or changes nothing"
    examples = ()
    node_types = (cst.Name, cst.Call)

    def mutations(self, node):
        if isinstance(node, cst.Name) and node.value == "n":
            yield node.with_changes(value="lambda")  # libcst builds it; it does not parse
        yield node
        if isinstance(node, cst.Call) and len(node.args) == 2:
            first, second = node.args  # positional after keyword: libcst refuses to build it
            yield node.with_changes(args=[second, first.with_changes(comma=second.comma)])


class _EarlyAddSub(Operator):
    """Test operator: the same rewrite as add-sub under a name that sorts first."""

    name = "a-add-sub"
    family = "arith"
    description = "same as add-sub"
    examples = ()
    node_types = (cst.BinaryOperation,)

    def mutations(self, node):
        yield node.with_changes(operator=cst.Subtract())


def test_unparsable_identical_and_duplicate_mutants_are_dropped():
    source = Example.kernel("y = tl.load(x_ptr, mask=n + 1 > 0)", "").before
    assert generate_mutants(source, "k.py", [_Invalid()]) == []
    mutants = generate_mutants(source, "k.py", [*select_operators("add-sub"), _EarlyAddSub()])
    assert [(m.operator, m.after) for m in mutants] == [("a-add-sub", "n - 1")]


def test_no_jit_function_means_no_mutants():
    assert generate_mutants("def f(a, b):\n    return a < b\n", "plain.py") == []


# -- selection -------------------------------------------------------------------


def _names(spec: str | None) -> list[str]:
    return [op.name for op in select_operators(spec)]


def test_select_operators():
    everything = [op.name for op in all_operators()]
    assert _names(None) == everything
    assert _names("") == everything
    assert _names("mask-drop, add-sub") == ["mask-drop", "add-sub"]  # registry order
    assert _names("add-sub,mask-drop") == ["mask-drop", "add-sub"]
    masks = [op.name for op in FAMILY_MODULES["masks"].OPERATORS]
    assert _names("masks") == masks
    assert _names("masks,-other-drop") == [n for n in masks if n != "other-drop"]
    assert _names("-masks") == [n for n in everything if n not in masks]
    assert _names("-masks,-add-sub") == [n for n in everything if n not in masks + ["add-sub"]]
    assert _names("arith,add-sub") == [op.name for op in FAMILY_MODULES["arith"].OPERATORS]


def test_select_operators_rejects_unknown_names():
    with pytest.raises(ValueError) as error:
        select_operators("masks,xyz")
    message = str(error.value)
    assert message.startswith("unknown operator or family 'xyz' (known: masks, boundaries")
    assert "mask-drop" in message and "\n" not in message
    with pytest.raises(ValueError, match="'nope'"):
        select_operators("-nope")


# -- operators from real bugs -------------------------------------------------------


def _after(source: str, operator: str) -> list[str]:
    return [m.after for m in generate_mutants(source, "k.py", select_operators(operator))]


def test_operators_page_tables_list_every_operator_in_its_family():
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "reference", "operators.md")
    text = open(docs, encoding="utf-8").read()  # the repository's page, however installed
    table = text.split("## Operators by family", 1)[1].split("Mutants are planted", 1)[0]
    listed = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) == 2 and cells[0] in FAMILIES:
            listed[cells[0]] = re.findall(r"`([a-z0-9-]+)`", cells[1])
    assert listed == {f: [op.name for op in m.OPERATORS] for f, m in FAMILY_MODULES.items()}
    real_bugs = text.split("Operators modelled on kinds of bug", 1)[1].split("\n\n", 2)[1]
    rows = [row.split("|")[1:4] for row in real_bugs.splitlines()[2:]]
    named = [re.fullmatch(r" `([a-z0-9-]+)`( \(extended\))? ", row[0]).group(1) for row in rows]
    assert named == [*REAL_BUG_OPERATORS, "mask-term-drop", "other-change"]
    assert set(named) <= {op.name for op in all_operators()}
    assert all(len(sentence.strip()) > 40 for _, _, sentence in rows)  # says what bug it is


REAL_BUG_OPERATORS = [
    "int64-cast-drop",
    "int-narrow",
    "offset-term-drop",
    "block-ptr-offset-zero",
    "range-step-change",
    "guard-true",
    "mask-bound-swap",
    "rounding-drop",
    "where-drop",
    "abs-drop",
    "clamp-drop",
    "reduce-axis-drop",
    "acc-init-hoist",
]


HOIST = Example.kernel(
    """
    # persistent loop over tiles
    for tile in range(tl.program_id(0), n, tl.num_programs(0)):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for k in range(0, n, BLOCK):
            acc += tl.load(x_ptr + k + tl.arange(0, BLOCK))
        tl.store(y_ptr + tile * BLOCK + tl.arange(0, BLOCK), acc)
    """,
    "",
).before


def test_a_moved_statement_is_reported_at_the_lines_it_changes():
    (mutant,) = generate_mutants(HOIST, "k.py", select_operators("acc-init-hoist"))
    lines = HOIST.splitlines(keepends=True)
    loop_line = next(i for i, line in enumerate(lines, 1) if "for tile" in line)
    assert (mutant.line, mutant.col, mutant.end_line, mutant.end_col) == (
        loop_line,
        0,
        loop_line + 2,
        0,
    )
    assert mutant.before == lines[loop_line - 1] + lines[loop_line]
    assert mutant.after == "    " + lines[loop_line].lstrip() + lines[loop_line - 1]
    assert mutant.source.count("acc = tl.zeros") == 1
    assert "# persistent loop over tiles\n    acc = tl.zeros" in mutant.source
    compile(mutant.source, "k.py", "exec")
    expected = difflib.unified_diff(
        lines, mutant.source.splitlines(keepends=True), "a/k.py", "b/k.py", n=3
    )
    assert mutant.diff == "".join(expected)
    assert mutant.id == Mutant.make_id(
        mutant.operator, mutant.line, mutant.col, mutant.end_line, mutant.end_col, mutant.source
    )


def test_skip_comment_on_a_loop_keeps_its_initialisation_in_place():
    skipped = HOIST.replace("tl.num_programs(0)):", "tl.num_programs(0)):  # mutant-gate: skip")
    assert _after(skipped, "acc-init-hoist") == []
    elsewhere = HOIST.replace("tl.float32)\n", "tl.float32)  # mutant-gate: skip\n", 1)
    assert len(_after(elsewhere, "acc-init-hoist")) == 1  # the move starts at the loop


def test_acc_init_hoist_needs_an_accumulation_and_a_loop_free_initialiser():
    reset_only = HOIST.replace("acc += tl.load", "acc = tl.load")
    assert _after(reset_only, "acc-init-hoist") == []  # hoisting it changes nothing
    depends = HOIST.replace(
        "tl.zeros((BLOCK,), dtype=tl.float32)", "tl.full((BLOCK,), tile, tl.float32)"
    )
    assert _after(depends, "acc-init-hoist") == []  # it reads the loop variable
    scalar = HOIST.replace("tl.zeros((BLOCK,), dtype=tl.float32)", "0.0")
    assert _after(scalar, "acc-init-hoist") == []  # a scalar would change type in the loop


SCALAR_HOIST = Example.kernel(
    """
    for row in range(tl.program_id(0), n, tl.num_programs(0)):
        acc = 0.0
        for k in range(0, n, BLOCK):
            x = tl.load(x_ptr + row * n + k + tl.arange(0, BLOCK))
            acc += tl.sum(x, axis=0)
        tl.store(y_ptr + row, acc)
    """,
    """
    acc = 0.0
    for row in range(tl.program_id(0), n, tl.num_programs(0)):
        for k in range(0, n, BLOCK):
            x = tl.load(x_ptr + row * n + k + tl.arange(0, BLOCK))
            acc += tl.sum(x, axis=0)
        tl.store(y_ptr + row, acc)
    """,
)


def test_acc_init_hoist_moves_a_scalar_initialiser():
    (mutant,) = generate_mutants(SCALAR_HOIST.before, "k.py", select_operators("acc-init-hoist"))
    assert mutant.source == SCALAR_HOIST.after
    assert mutant.before == (
        "    for row in range(tl.program_id(0), n, tl.num_programs(0)):\n        acc = 0.0\n"
    )
    assert mutant.after == (
        "    acc = 0.0\n    for row in range(tl.program_id(0), n, tl.num_programs(0)):\n"
    )
    counter = SCALAR_HOIST.before.replace("acc = 0.0", "acc = 0").replace(
        "acc += tl.sum(x, axis=0)", "acc += 1"
    )
    assert _after(counter, "acc-init-hoist") == [
        "    acc = 0\n    for row in range(tl.program_id(0), n, tl.num_programs(0)):\n"
    ]
    running_max = SCALAR_HOIST.before.replace("acc = 0.0", 'acc = -float("inf")').replace(
        "acc += tl.sum(x, axis=0)", "acc = tl.maximum(acc, tl.max(x, axis=0))"
    )
    assert _after(running_max, "acc-init-hoist") == [
        '    acc = -float("inf")\n    for row in range(tl.program_id(0), n, tl.num_programs(0)):\n'
    ]


def test_acc_init_hoist_keeps_a_scalar_that_could_change_type():
    straight = Example.kernel(
        """
        for row in range(tl.program_id(0), n, tl.num_programs(0)):
            acc = 0.0
            x = tl.load(x_ptr + row * n + tl.arange(0, BLOCK))
            acc += tl.sum(x, axis=0)
            tl.store(y_ptr + row, acc)
        """,
        "",
    ).before
    assert _after(straight, "acc-init-hoist") == []  # once loop-carried, it could become a block
    block = SCALAR_HOIST.before.replace("acc += tl.sum(x, axis=0)", "acc += x")
    assert _after(block, "acc-init-hoist") == []  # known to be a block: a type change
    reset_only = SCALAR_HOIST.before.replace("acc += tl.sum(x, axis=0)", "acc = tl.sum(x, axis=0)")
    assert _after(reset_only, "acc-init-hoist") == []  # nothing accumulates
    named = SCALAR_HOIST.before.replace("acc = 0.0", "acc = start")
    assert _after(named, "acc-init-hoist") == []  # not a literal: no scalar initialiser


def test_rounding_drop_takes_a_dtype_expression_for_the_inner_cast():
    kernel = Example.kernel(
        """
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs) * 3.0
        y = tl.load(y_ptr + offs)
        a = x.to(y.dtype).to(tl.float32)
        b = x.to(y_ptr.dtype.element_ty).to(tl.float32)
        c = tl.cast(tl.cast(x, OUT_DTYPE), tl.float32)
        """,
        "",
        params="x_ptr, y_ptr, n, BLOCK: tl.constexpr, OUT_DTYPE: tl.constexpr",
    ).before
    mutants = generate_mutants(kernel, "k.py", select_operators("rounding-drop"))
    assert [(m.before, m.after) for m in mutants] == [
        ("x.to(y.dtype).to(tl.float32)", "x"),
        ("x.to(y_ptr.dtype.element_ty).to(tl.float32)", "x"),
        ("tl.cast(tl.cast(x, OUT_DTYPE), tl.float32)", "x"),
    ]
    assert mutants[1].source == kernel.replace(
        "b = x.to(y_ptr.dtype.element_ty).to(tl.float32)", "b = x"
    )


def test_rounding_drop_leaves_casts_that_round_nothing():
    kernel = Example.kernel(
        """
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs) * 3.0
        y = tl.load(y_ptr + offs)
        d = x.to(x.dtype).to(tl.float32)
        e = x.to(y.dtype).to(tl.float16)
        f = x.to(tl.float32).to(tl.float32)
        g = x.to(y.dtype)
        h = tl.load(y_ptr + offs).to(tl.float32)
        """,
        "",
    ).before
    # its own dtype, not back to float32, no low precision, no round trip, one cast
    assert _after(kernel, "rounding-drop") == []


def test_offset_term_drop_keeps_to_pointer_sums_and_scalar_terms():
    kernel = Example.kernel(
        """
        offs = tl.arange(0, BLOCK)
        total = n + n * n + n
        x = tl.load(x_ptr + n * n)
        y = tl.load(x_ptr + offs * n + n * n + offs[:, None] + offs)
        z_ptrs = x_ptr + n * n
        """,
        "",
    ).before
    assert sorted(_after(kernel, "offset-term-drop")) == [
        "tl.load(x_ptr + n * n + offs[:, None] + offs)",
        "tl.load(x_ptr + offs * n + offs[:, None] + offs)",
        "z_ptrs = x_ptr",
    ]


def test_guard_true_rewrites_if_statements_only():
    kernel = Example.kernel(
        """
        i = 0
        while i < n:
            i += 1
        y = 1.0 if n > 0 else 0.0
        if True:
            tl.store(x_ptr, y)
        if n > 0:
            tl.store(x_ptr, y)
        elif n < 0:
            tl.store(y_ptr, y)
        """,
        "",
    ).before
    assert _after(kernel, "guard-true") == [
        "    if True:\n        tl.store(x_ptr, y)\n    elif n < 0:\n        tl.store(y_ptr, y)\n",
        "    elif True:\n        tl.store(y_ptr, y)\n",
    ]


def test_reduce_axis_drop_leaves_axis_zero_and_index_reductions_alone():
    kernel = Example.kernel(
        _TILE_2D
        + "a = tl.sum(x, axis=0)\nb = tl.argmax(x, axis=1)\nc = tl.max(x, 1, return_indices=True)\nd = tl.min(x, axis=-1)",
        "",
    ).before
    assert _after(kernel, "reduce-axis-drop") == ["tl.zeros_like(tl.min(x, axis=-1)) + tl.min(x)"]


_TILE_2D = (
    "x = tl.load(x_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :])\n"
)


def test_mask_term_drop_takes_and_only_in_masks():
    kernel = Example.kernel(
        """
        offs = tl.arange(0, BLOCK)
        if n > 0 and n < 8:
            tl.store(y_ptr + offs, 1.0, mask=(offs < n) and (offs > 0))
        ok = n > 0 and n < 8
        """,
        "",
    ).before
    assert sorted(_after(kernel, "mask-term-drop")) == [
        "tl.store(y_ptr + offs, 1.0, mask=(offs < n))",
        "tl.store(y_ptr + offs, 1.0, mask=(offs > 0))",
    ]


def test_other_change_fills():
    def fills(other: str) -> list[str]:
        kernel = Example.kernel(f"x = tl.load(x_ptr, mask=n > 0, other={other})", "").before
        return [a.split("other=")[1][:-1] for a in _after(kernel, "other-change")]

    assert fills("0.0") == ['-float("inf")', "1.0"]
    assert fills("0") == ["1"]  # an integer load gets no infinity
    assert fills("1") == ["0"]
    assert fills("1.0") == fills("-2.5") == ['-float("inf")', "0.0"]
    assert fills("pad") == fills("-pad") == fills("INF") == ['-float("inf")', "0.0"]
    assert fills("None") == fills("True") == []
    assert fills("float('inf')") == fills("math.inf") == ['-float("inf")', "0.0"]
    # already minus infinity: to 0.0 only, never -inf -> -inf
    for negative in ("NEG_INF", "-inf", "-INF", "MINUS_INF", "ninf", "-float('inf')"):
        assert fills(negative) == ["0.0"], negative
    assert fills("float('-inf')") == fills("-math.inf") == ["0.0"]
    assert fills("-NEG_INF") == ['-float("inf")', "0.0"]  # plus infinity


def test_other_change_named_fill_goes_to_minus_infinity_and_to_zero():
    kernel = Example.kernel(
        """
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=pad_value)
        tl.store(y_ptr + offs, x, mask=offs < n)
        """,
        "",
        params="x_ptr, y_ptr, n, pad_value, BLOCK: tl.constexpr",
    ).before
    mutants = generate_mutants(kernel, "k.py", select_operators("other-change"))
    assert [m.source for m in mutants] == [
        kernel.replace("other=pad_value", 'other=-float("inf")'),
        kernel.replace("other=pad_value", "other=0.0"),
    ]
    assert len({m.id for m in mutants}) == 2


def test_new_operators_fire_on_the_tutorial_style_kernel():
    operators = {m.operator for m in generate_mutants(LAYER_NORM, "layer_norm.py")}
    assert {"range-step-change", "where-drop"} <= operators


def test_mul_div_divides_integer_index_arithmetic_with_floor_division():
    kernel = Example.kernel(
        """
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        for k in range(0, n, BLOCK):
            idx = tl.load(x_ptr + k * n + offs)
            x = tl.load(y_ptr + idx * n).to(tl.float32)
            tl.store(y_ptr + offs, x * 2.0)
        """,
        "",
    ).before
    assert sorted(_after(kernel, "mul-div")) == [
        "idx / n",  # a loaded index: its type is unknown here, so the float division stays
        "k // n",  # a range() loop variable times a scalar parameter
        "pid // BLOCK",  # a program id times a constexpr
        "x / 2.0",  # float arithmetic keeps the float division
    ]


def test_sum_axis_leaves_one_dimensional_blocks_alone():
    one_d = "x = tl.load(x_ptr + tl.arange(0, BLOCK))\ns = tl.sum(x * x, axis=0)"
    assert _after(Example.kernel(one_d, "").before, "sum-axis") == []
    assert _after(
        Example.kernel(_TILE_2D + "s = tl.sum(x * x, axis=0)", "").before, "sum-axis"
    ) == ["tl.sum(x * x, axis=1)"]
    unknown = "x = tl.reshape(tl.load(x_ptr + tl.arange(0, BLOCK)), shape)\ns = tl.sum(x, axis=0)"
    assert _after(Example.kernel(unknown, "").before, "sum-axis") == ["tl.sum(x, axis=1)"]


def test_accumulator_fp16_casts_the_updates_of_a_loop_carried_accumulator():
    kernel = Example.kernel(
        """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for k in range(0, n, BLOCK):
            x = tl.load(x_ptr + k + tl.arange(0, BLOCK))
            acc = acc + x * x
        tile = tl.zeros((16, 16), dtype=tl.float32)
        for k in range(0, n, 16):
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            tile = tl.dot(a, a, tile)
        once = tl.zeros((BLOCK,), dtype=tl.float32) + 1.0
        """,
        "",
    ).before
    mutants = generate_mutants(kernel, "k.py", select_operators("accumulator-fp16"))
    assert [(m.line, m.after) for m in mutants] == [
        (
            7,
            "    acc = tl.zeros((BLOCK,), dtype=tl.float16)\n"
            "    for k in range(0, n, BLOCK):\n"
            "        x = tl.load(x_ptr + k + tl.arange(0, BLOCK))\n"
            "        acc = (acc + x * x).to(tl.float16)\n",
        ),
        (11, "tl.zeros((16, 16), dtype=tl.float16)"),  # tl.dot keeps the accumulator's dtype
        (15, "tl.zeros((BLOCK,), dtype=tl.float16)"),  # not loop-carried
    ]


def test_broadcast_swap_keeps_pointer_tiles_two_dimensional():
    kernel = Example.kernel(
        """
        rows = tl.arange(0, BLOCK)
        ptrs = x_ptr + rows[:, None] * n + rows[None, :]
        mask = (rows[:, None] < n) & (rows[None, :] < n)
        tl.store(y_ptr + rows[:, None] * n + rows[None, :], tl.load(ptrs, mask=mask), mask=mask)
        unused = x_ptr + rows[:, None] * n + rows[None, :]
        """,
        "",
    ).before
    mutants = generate_mutants(kernel, "k.py", select_operators("broadcast-swap"))
    # The mask may collapse to one row (it broadcasts); the loaded and stored tiles may not.
    assert sorted({m.line for m in mutants}) == [9, 11]
    assert len([m for m in mutants if m.line == 9]) == 2


def test_accumulator_fp16_sees_a_loop_nested_in_an_if():
    kernel = Example.kernel(
        """
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        if n > 0:
            for k in range(0, n, BLOCK):
                acc += tl.load(x_ptr + k + tl.arange(0, BLOCK))
        """,
        "",
    ).before
    (mutant,) = generate_mutants(kernel, "k.py", select_operators("accumulator-fp16"))
    assert "acc += tl.load(x_ptr + k + tl.arange(0, BLOCK)).to(tl.float16)" in mutant.after


CONCAT = Example.kernel(
    """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < a, other=0.0)
    y = tl.load(y_ptr + offs - a, mask=(offs >= a) & (offs < a + b), other=0.0)
    tl.store(out_ptr + offs, x + y, mask=offs < total)
    """,
    "",
    params="x_ptr, y_ptr, out_ptr, a, b, total, BLOCK: tl.constexpr",
).before


def test_mask_bound_swap_bounds_a_mask_by_another_extent():
    mutants = generate_mutants(CONCAT, "k.py", select_operators("mask-bound-swap"))
    assert [(m.line, m.before, m.after) for m in mutants] == [
        (8, "offs < a", "offs < total"),
        (9, "(offs < a + b)", "(offs < total)"),  # not offs < a: the bound mentions a
        (10, "offs < total", "offs < a"),
    ]  # offs >= a is a lower bound, b is no extent: neither is swapped
    assert mutants[1].source == CONCAT.replace("(offs < a + b)", "(offs < total)")


def test_mask_bound_swap_offers_only_extents_in_scope():
    kernel = Example.kernel(
        """
        pid = tl.program_id(0)
        if pid >= n_rows:
            return
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < 4, other=0.0)
        y = tl.where(x < thresh, x, 0.0)
        tl.store(y_ptr + offs, y, mask=offs < n_cols - 1)
        if EVEN:
            later = n_cols * 2
        tl.store(y_ptr + offs, y, mask=offs < later)
        end = n_cols + 1
        tl.store(y_ptr + offs, y, mask=offs <= end)
        tl.store(y_ptr + offs, y, mask=offs >= lo)
        tl.store(y_ptr + offs, y, mask=n_cols > offs)
        """,
        "",
        params="x_ptr, y_ptr, n_rows, n_cols, thresh, lo, BLOCK: tl.constexpr, EVEN: tl.constexpr",
    ).before
    # No swap in the scalar guard pid >= n_rows, the literal bound offs < 4, the data
    # comparison x < thresh or the lower bound offs >= lo; lo is no extent; later (set
    # in an if) and end (set after) are not offered to the masks before them.
    mutants = generate_mutants(kernel, "k.py", select_operators("mask-bound-swap"))
    assert [(m.line, m.before, m.after) for m in mutants] == [
        (13, "offs < n_cols - 1", "offs < n_rows"),
        (16, "offs < later", "offs < n_cols"),
        (16, "offs < later", "offs < n_rows"),
        (18, "offs <= end", "offs <= n_cols"),
        (18, "offs <= end", "offs <= n_rows"),
        (20, "n_cols > offs", "end > offs"),
        (20, "n_cols > offs", "n_rows > offs"),
    ]


def test_mask_bound_swap_offers_at_most_two_extents_mask_bounds_first():
    kernel = Example.kernel(
        """
        if tl.program_id(2) >= B:
            return
        rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        for k in range(0, tl.cdiv(K, BLOCK)):
            rk = k * BLOCK + tl.arange(0, BLOCK)
            a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=rk[None, :] < K - k * BLOCK)
        c_mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(y_ptr + rm[:, None] * N + rn[None, :], 1.0, mask=c_mask)
        """,
        "",
        params="x_ptr, y_ptr, B, M, N, K, BLOCK: tl.constexpr",
    ).before
    # Extents: M, N (what masks compare against), then B (a program id's guard) and K
    # (tl.cdiv); two per mask, in that order.
    mutants = generate_mutants(kernel, "k.py", select_operators("mask-bound-swap"))
    assert [(m.line, m.before, m.after) for m in mutants] == [
        (13, "rk[None, :] < K - k * BLOCK", "rk[None, :] < M"),
        (13, "rk[None, :] < K - k * BLOCK", "rk[None, :] < N"),
        (14, "(rm[:, None] < M)", "(rm[:, None] < B)"),
        (14, "(rm[:, None] < M)", "(rm[:, None] < N)"),
        (14, "(rn[None, :] < N)", "(rn[None, :] < B)"),
        (14, "(rn[None, :] < N)", "(rn[None, :] < M)"),
    ]
