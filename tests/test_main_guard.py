"""One rule for a file's ``__main__`` block, shared by the engine and the sandbox harness."""

from __future__ import annotations

import ast

import pytest

from mutant_gate.engine.harness.main_guard import is_main_guard
from mutant_gate.engine.own_check import analyse
from mutant_gate.engine.testlist import main_block


def first(source: str) -> ast.stmt:
    return ast.parse(source).body[0]


@pytest.mark.parametrize(
    "test",
    [
        '__name__ == "__main__"',
        "__name__ == '__main__'",
        '"__main__" == __name__',
        "'__main__' == __name__",
        '(__name__) == ("__main__")',
    ],
)
def test_main_guard_in_either_order_and_quote(test):
    assert is_main_guard(first(f"if {test}:\n    pass\n"))


@pytest.mark.parametrize(
    "test",
    [
        '__name__ != "__main__"',
        '"__main__" != __name__',
        '__name__ is "__main__"',
        '__name__ in ("__main__",)',
        '__name__ == "__main__" == __name__',  # chained
        '__name__ == "main"',
        '__file__ == "__main__"',
        'name == "__main__"',
        '"__main__" == "__main__"',
        "__name__ == __name__",
        'x.__name__ == "__main__"',
        '__name__ == b"__main__"',
        '__name__ == "__main__" and True',
    ],
)
def test_not_a_main_guard(test):
    assert not is_main_guard(first(f"if {test}:\n    pass\n"))


@pytest.mark.parametrize(
    "source",
    ['x = __name__ == "__main__"\n', 'while __name__ == "__main__":\n    break\n'],
)
def test_only_an_if_statement(source):
    assert not is_main_guard(first(source))


REVERSED = """\
def check():
    assert 1 + 1 == 2


if "__main__" == __name__:
    check()
"""


def test_engine_sides_use_the_rule():
    assert analyse(REVERSED).has_main
    assert main_block(REVERSED) == 'if "__main__" == __name__:\n    check()'
    inverted = REVERSED.replace('"__main__" == __name__', '__name__ != "__main__"')
    assert not analyse(inverted).has_main
    assert main_block(inverted) is None
