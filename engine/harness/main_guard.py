"""What counts as a file's ``__main__`` block: one rule for the tool and the sandbox.

Stdlib only: the harness imports it inside a sandbox (``probe``), the engine
(``own_check``, ``testlist``) imports it on the host.
"""

from __future__ import annotations

import ast


def _is_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "__name__"


def _is_main(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == "__main__"


def is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``, in either order (``"__main__" == __name__``);
    quote style does not matter. ``!=``, chained comparisons and other names do not count."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    left, right = test.left, test.comparators[0]
    return (_is_name(left) and _is_main(right)) or (_is_main(left) and _is_name(right))
