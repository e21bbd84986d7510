"""The small statement builders the batched executor's kernel rewrites share
(``batched_flow`` for divergent flow, ``batched_iterations`` for a loop's iterations
together): names, calls, assignments, and taking names back from a dict of locals."""

from __future__ import annotations

import ast

#: the start of every name a rewrite adds to a kernel (never one of its own)
PREFIX = "_mutant_gate_"


def name(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Load())


def store(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store())


def call(fn: ast.expr, *args: ast.expr, keywords: list | None = None) -> ast.Call:
    return ast.Call(func=fn, args=list(args), keywords=keywords or [])


def attr(obj: str, attribute: str) -> ast.Attribute:
    return ast.Attribute(value=name(obj), attr=attribute, ctx=ast.Load())


def method(obj: str, attribute: str, *args: ast.expr) -> ast.Call:
    return call(attr(obj, attribute), *args)


def locals_call() -> ast.Call:
    return call(name("locals"))


def assign(target: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[store(target)], value=value)


def take_back(source: str, names: tuple[str, ...]) -> list[ast.stmt]:
    """``if 'x' in source: x = source['x']`` for every name."""
    out: list[ast.stmt] = []
    for n in names:
        test = ast.Compare(left=ast.Constant(n), ops=[ast.In()], comparators=[name(source)])
        value = ast.Subscript(value=name(source), slice=ast.Constant(n), ctx=ast.Load())
        out.append(ast.If(test=test, body=[assign(n, value)], orelse=[]))
    return out
