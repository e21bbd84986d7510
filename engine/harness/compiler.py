"""The compile-check's sandbox side: compile a kernel file's kernels for CUDA targets.

Runs inside the sandbox child; imports only the stdlib, torch, triton.

``triton.compile`` needs no GPU: it lowers to PTX and runs ``ptxas`` for each
target. It does need real ``JITFunction``s, and the warm worker imported
Triton with ``TRITON_INTERPRET=1``, where ``@triton.jit`` makes interpreter
stand-ins -- also for Triton's own library functions (``tl.cdiv``, the
reductions' combine functions...). So the child switches the interpreter knob
off, turns every stand-in in Triton's modules back into a ``JITFunction``, and
only then loads the kernel file (as a module, not ``__main__``: its check does
not run). It compiles each launch signature the tracer captured from the
original's check (``trace.py``): argument types, divisibility attributes,
constexpr values and launch options, exactly as Triton's launcher would.
"""

from __future__ import annotations

import os
import re
import runpy
import sys
import time
import traceback
from typing import Any

from mutant_gate.engine.job import Job

from .runner import tail, write_files

DETAIL_CHARS = 4000


def parse_target(name: str) -> int:
    """``sm_80`` -> 80 (``sm_90a`` -> 90: Triton picks the ``a`` features itself)."""
    match = re.fullmatch(r"sm_(\d{2,3})a?", name)
    if not match:
        raise ValueError(f"not a CUDA target like sm_80: {name!r}")
    return int(match.group(1))


def interpreter_off() -> int:
    """Make ``@triton.jit`` compile again in a process that imported Triton in
    interpreter mode; returns how many library functions were converted."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    os.environ["TRITON_INTERPRET"] = "0"
    triton.knobs.runtime.interpret = False
    converted: dict[int, Any] = {}
    for module in _triton_modules():
        for attr, value in list(vars(module).items()):
            if isinstance(value, InterpretedFunction):
                jit = converted.get(id(value))
                if jit is None:
                    jit = converted[id(value)] = JITFunction(value.fn, **value.kwargs)
                setattr(module, attr, jit)
    return len(converted)


def _triton_modules() -> list[Any]:
    """Triton's own modules (``triton`` and ``triton.*``) among those imported."""
    return [
        module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "triton" or name.startswith("triton."))
    ]


def _find_kernel(namespace: dict, name: str) -> Any:
    """The ``JITFunction`` called ``name`` among the module's globals (through
    ``@triton.autotune`` / ``@triton.heuristics`` wrappers)."""
    from triton.runtime.jit import JITFunction

    for value in namespace.values():
        fn, depth = value, 0
        while not isinstance(fn, JITFunction) and hasattr(fn, "fn") and depth < 8:
            fn, depth = fn.fn, depth + 1
        if isinstance(fn, JITFunction) and fn.__name__ == name:
            return fn
    return None


def _decode(value: Any, namespace: dict) -> Any:
    import triton.language as tl

    if isinstance(value, dict):
        if "dtype" in value:
            return tl.dtype(value["dtype"])
        if "float" in value:
            return float(value["float"])
        if "tuple" in value:
            return tuple(_decode(v, namespace) for v in value["tuple"])
        if "jit" in value:
            found = _find_kernel(namespace, value["jit"])
            if found is None:
                raise ValueError(f"constexpr function {value['jit']} is not a module global")
            return found
        if "function" in value and value["function"] in namespace:
            return namespace[value["function"]]
        raise ValueError(f"cannot rebuild constexpr value {value}")
    return value


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "compilation failed"
    errors = [ln for ln in lines if re.search(r"\berror\b", ln, re.IGNORECASE)]
    line = _unwrapped(errors[0] if errors else lines[-1])
    return line if len(line) <= 400 else line[:397] + "..."


def _unwrapped(line: str) -> str:
    """An exception's repr, ``Kind('message')``, as ``Kind: message`` (an assertion's as
    its message alone); any other line as it is."""
    match = re.fullmatch(r"(\w+)\((['\"])(.*)\2\)", line)
    if not match:
        return line
    kind, message = match.group(1), match.group(3)
    return message if kind == "AssertionError" else f"{kind}: {message}"


def _where(exc: BaseException, namespace: dict, kernel: Any) -> str:
    """``file:line`` of a ``CompilationError`` in the kernel file, when known."""
    from triton.runtime.jit import JITFunction

    node, src = getattr(exc, "node", None), getattr(exc, "src", None)
    lineno = getattr(node, "lineno", None)
    if lineno is None:
        return ""
    candidates = [kernel] + [v for v in namespace.values() if isinstance(v, JITFunction)]
    for fn in candidates:
        if getattr(fn, "src", None) == src:
            base = getattr(fn, "def_file_line_number", None)
            if base is not None:
                return f" at line {base + lineno - 1}"
    return ""


class _StderrCapture:
    """Collect what the compiler's C++ side prints on fd 2 (MLIR diagnostics)."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, ".compile-stderr")

    def __enter__(self) -> _StderrCapture:
        sys.stderr.flush()
        self.saved = os.dup(2)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)

    def text(self) -> str:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                return fh.read()[-DETAIL_CHARS:]
        except OSError:
            return ""


#: Exceptions that say the harness, not the kernel, failed: never "not compilable".
_HARNESS_ERRORS = (OSError, MemoryError, ImportError, RecursionError)


def compile_signature(sig: dict, namespace: dict, capability: int, workdir: str) -> dict:
    """Compile one captured signature for one target.

    Returns {"status": "ok" | "failed" | "error", "message", "detail"}: ``failed`` is
    the compiler rejecting the kernel, ``error`` is anything that says nothing
    about the kernel (a signature that cannot be rebuilt, a file system error).
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    name = sig["kernel"]
    kernel = _find_kernel(namespace, name)
    if kernel is None:
        return _outcome("error", f"{name} is not a module-level @triton.jit function")
    target = GPUTarget("cuda", capability, 32)
    try:
        backend = make_backend(target)
        signature, constexprs, attrs = _launch_signature(sig, namespace, backend)
        options = backend.parse_options(dict(sig.get("options", {}))).__dict__
    except Exception as exc:  # noqa: BLE001
        return _outcome("error", f"{name}: cannot rebuild the launch signature: {exc!r}")
    capture = _StderrCapture(workdir)
    try:
        with capture:
            triton.compile(ASTSource(kernel, signature, constexprs, attrs), target, options)
    except Exception as exc:  # noqa: BLE001 - the compiler's failure is the result
        return _compile_failure(exc, capture.text(), name, namespace, kernel)
    return _outcome("ok")


def _launch_signature(sig: dict, namespace: dict, backend) -> tuple[dict, dict, dict]:
    """The captured signature rebuilt for ``ASTSource``: (param -> type, constexpr
    values, attributes), each by parameter index."""
    signature, constexprs, attrs = {}, {}, {}
    for i, (param, ty, attr) in enumerate(
        zip(sig["params"], sig["types"], sig["attrs"], strict=True)
    ):
        signature[param] = ty
        if ty == "constexpr":
            constexprs[(i,)] = _decode(sig["constexprs"].get(param), namespace)
            attrs[(i,)] = backend.parse_attr("")
        elif isinstance(attr, str):
            attrs[(i,)] = backend.parse_attr(attr)
    return signature, constexprs, attrs


def _compile_failure(exc: Exception, stderr: str, name: str, namespace: dict, kernel) -> dict:
    """The outcome of a compile that raised: ``error`` where the harness failed, else
    ``failed`` with the compiler's one line (from its stderr where the text says nothing)."""
    text = str(exc)
    detail = tail(f"{type(exc).__name__}: {text}\n{stderr}".strip(), DETAIL_CHARS)
    if isinstance(exc, _HARNESS_ERRORS):
        return _outcome("error", f"{name}: {type(exc).__name__}: {text}", detail)
    source = stderr if "PassManager" in text or not text.strip() else text
    message = f"{name}{_where(exc, namespace, kernel)}: {_one_line(source or text)}"
    return _outcome("failed", message, detail)


def _outcome(status: str, message: str = "", detail: str = "") -> dict:
    return {"status": status, "message": message, "detail": detail or message}


def _private_triton_dirs(workdir: str) -> None:
    """Triton resolved its cache directory from the worker's home at import."""
    base = os.path.join(workdir, ".triton")
    os.environ["TRITON_HOME"] = workdir
    for var, sub in (
        ("TRITON_CACHE_DIR", "cache"),
        ("TRITON_DUMP_DIR", "dump"),
        ("TRITON_OVERRIDE_DIR", "override"),
    ):
        os.environ[var] = os.path.join(base, sub)


def run(request: dict, workdir: str) -> dict:
    """Harness entry ``compiler:run``. ``request``: ``job`` (the variant's files),
    ``kernel`` (its kernel file), ``signatures`` (from ``trace:capture`` of the
    original), ``targets`` (``sm_NN``), optionally ``kernels`` (only these).

    Returns {"compile": {target: {ok, message, seconds, signatures, detail?}}, "load_s"}.
    """
    job = Job.from_json(request["job"])
    write_files(job, workdir)
    sys.path.insert(0, workdir)
    _private_triton_dirs(workdir)
    interpreter_off()
    wanted = set(request.get("kernels") or ())
    signatures = [s for s in request["signatures"] if not wanted or s["kernel"] in wanted]
    results: dict[str, dict] = {}
    load_start = time.perf_counter()
    try:
        namespace = runpy.run_path(
            os.path.join(workdir, request["kernel"]), run_name="__mutant_gate_compile__"
        )
    except BaseException as exc:  # noqa: BLE001 - a file that cannot load cannot compile
        return _load_failure(request, exc)
    load_s = time.perf_counter() - load_start
    for target in request["targets"]:
        capability = parse_target(target)
        t0 = time.perf_counter()
        outcomes = [compile_signature(sig, namespace, capability, workdir) for sig in signatures]
        results[target] = _target_entry(outcomes, len(signatures), t0)
    return {"compile": results, "load_s": round(load_s, 3)}


def _load_failure(request: dict, exc: BaseException) -> dict:
    """The answer when the kernel file fails to load (called while ``exc`` is handled):
    every target not judged (ok None), with why."""
    message = f"loading {request['kernel']} with the interpreter off failed: " + _one_line(
        f"{type(exc).__name__}: {exc}"
    )
    detail = tail(traceback.format_exc(), DETAIL_CHARS)
    results: dict[str, dict] = {}
    for target in request["targets"]:
        # Not the compiler's verdict: say so (ok None) rather than "not compilable".
        results[target] = {"ok": None, "message": message, "detail": detail, "seconds": 0.0}
    return {"compile": results, "load_s": 0.0}


def _target_entry(outcomes: list[dict], signatures: int, t0: float) -> dict:
    """One target's result from its signatures' outcomes (compiling began at ``t0``): ok
    when none failed, None when only the harness erred, and the first failure's words."""
    failed = [o for o in outcomes if o["status"] == "failed"]
    errors = [o for o in outcomes if o["status"] == "error"]
    first = _first_failure(failed, errors)
    entry: dict[str, Any] = {
        "ok": None if errors and not failed else not failed,
        "message": first["message"] if first is not None else "",
        "seconds": round(time.perf_counter() - t0, 3),
        "signatures": signatures,
    }
    if first is not None:
        entry["detail"] = first["detail"]
        entry["failed_signatures"] = len(failed)
        entry["errors"] = len(errors)
    return entry


def _first_failure(failed: list[dict], errors: list[dict]) -> dict | None:
    """The outcome whose words a target's entry gives: the first compile failure, else
    the first harness error; None when every signature compiled."""
    if failed:
        return failed[0]
    return errors[0] if errors else None


def warm() -> None:
    """Before the worker forks: Triton's compiler hashes its own sources and
    library once per process (about 0.4 s); paid here, no compile job pays it."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001 - an optional warm-up, never fatal
        pass
