"""Compiled mode: a kernel whose Triton IR is one already compiled takes that binary.

A mutant changes the source of one jit function, and Triton's cache key hashes the source:
every specialisation of every kernel that reaches the function is compiled afresh in every
mutant's job, though the change often never reaches the IR of a specialisation (a branch a
``tl.constexpr`` cuts away, a cast to the type the value already has, a bound the constant
folding settles). In a measured library run, compiling was 47% of the mutants' job time and
75% of the original's (``compiles.py``).

What Triton compiles after its first stage depends only on that stage's output (TTIR), the
options, the target and the environment it hashes into its keys. So the ``ttir`` stage of
every compile is watched: its text, without source locations (a mutant moves columns, not
meaning), hashed with the compile's metadata (options, target, Triton's version and
cache-relevant environment, everything but the source's hash) and the backend's own hash
(its ``ptxas``) gives an IR key. A compile whose IR key an earlier compile (the original's,
or another mutant's) left in the store stops there and takes that compile's binary and
metadata from Triton's cache, unchanged: the kernel launched is the very binary an earlier
job ran, apart from its debug line table. Every other compile runs on unchanged, and its
key is stored for the next. The store lies beside Triton's cache (shared by the warm
runners), one small file a key.

Anything unexpected (a Triton whose stages or cache differ) leaves the compile as it was:
the watch only ever skips work, never changes a result. Runs inside the sandbox's
processes; imports only the stdlib and triton.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from typing import Any

STORE = "mutant-gate-same-ir"
#: compiles that took an earlier binary in this process: [count, seconds spent before]
REUSED = [0, 0.0]
#: Triton's cache hash of a compile under way -> its IR key, until the compile ends
_PENDING: dict[str, str] = {}
_LOCAL = threading.local()
_LOC_LINE = re.compile(r"^#loc.*$\n?", re.MULTILINE)


class _SameIR(Exception):
    """Raised in the ``ttir`` stage: an earlier compile made this IR (``entry``)."""

    def __init__(self, entry: dict) -> None:
        super().__init__(entry["hash"])
        self.entry = entry


def without_locations(text: str) -> str:
    """MLIR text without its ``#loc`` definitions and ``loc(...)`` references (nested
    parentheses included)."""
    text = _LOC_LINE.sub("", text)
    out: list[str] = []
    i = 0
    while True:
        at = text.find("loc(", i)
        if at < 0:
            out.append(text[i:])
            return "".join(out)
        if at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_."):
            out.append(text[i : at + 4])  # part of a longer name
            i = at + 4
            continue
        out.append(text[i:at].rstrip(" "))
        depth, j = 0, at + 3
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        i = j


def _store_dir() -> str | None:
    try:
        from triton import knobs

        base = knobs.cache.dir
    except (ImportError, AttributeError):
        base = os.environ.get("TRITON_CACHE_DIR")
    return os.path.join(base, STORE) if base else None


def ir_key(module: Any, metadata: dict, backend: Any) -> str:
    """The IR key of a compile's TTIR (``module``) under its metadata and backend."""
    settings = {k: v for k, v in metadata.items() if k != "hash"}
    digest = hashlib.sha256(without_locations(str(module)).encode())
    digest.update(json.dumps(settings, sort_keys=True, default=repr).encode())
    digest.update(str(backend.hash()).encode())
    return digest.hexdigest()


def _lookup(key: str) -> dict | None:
    where = _store_dir()
    if where is None:
        return None
    try:
        with open(os.path.join(where, key)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _remember(key: str, kernel: Any) -> None:
    where = _store_dir()
    group = getattr(kernel, "metadata_group", None) or {}
    meta = next((name for name in group if name.endswith(".json")), None)
    if where is None or meta is None:
        return
    try:
        os.makedirs(where, exist_ok=True)
        partial = os.path.join(where, f".{key}.{os.getpid()}")
        with open(partial, "w") as f:
            json.dump({"hash": kernel.hash, "json": meta}, f)
        os.replace(partial, os.path.join(where, key))
    except OSError:
        pass


def _watch(stage: Any, backend: Any) -> Any:
    def ttir(module: Any, metadata: dict) -> Any:
        settings = dict(metadata)
        out = stage(module, metadata)
        if not getattr(_LOCAL, "watching", False):  # a compile not through ``install``'s
            return out
        try:
            key = ir_key(out, settings, backend)
        except Exception:  # noqa: BLE001 - no key: the compile goes on as it was
            return out
        entry = None if getattr(_LOCAL, "off", False) else _lookup(key)
        if entry is not None and entry.get("hash") != metadata.get("hash"):
            raise _SameIR(entry)
        _PENDING[str(metadata.get("hash"))] = key  # this compile's binary, for the next
        return out

    return ttir


def _earlier(entry: dict, src: Any) -> Any:
    """The earlier compile's kernel, from Triton's cache, for ``src``; None if it is gone
    or unreadable (then ``src`` is compiled instead)."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.cache import get_cache_manager

    try:
        group = get_cache_manager(entry["hash"]).get_group(entry["json"])
        return CompiledKernel(src, group, entry["hash"]) if group else None
    except Exception:  # noqa: BLE001 - an unreadable entry
        return None


def install() -> None:
    """Watch every compile's ``ttir`` stage in this process (once); a Triton laid out
    otherwise is left as it is."""
    try:
        import triton.compiler as package
        from triton.backends import backends
        from triton.compiler import compiler
    except ImportError:
        return

    if getattr(compiler.compile, "_mutant_gate_same_ir", False):
        return
    for backend in backends.values():
        cls = getattr(backend, "compiler", None)
        add_stages = getattr(cls, "add_stages", None)
        if add_stages is None:
            continue

        def watched(self: Any, stages: dict, options: Any, *rest: Any, _add: Any = add_stages):
            _add(self, stages, options, *rest)
            if "ttir" in stages:
                stages["ttir"] = _watch(stages["ttir"], self)

        cls.add_stages = watched
    original = compiler.compile

    def compile(src: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            kernel = _watched(original, src, *args, **kwargs)
        except _SameIR as same:
            kernel = _earlier(same.entry, src)
            if kernel is not None:
                REUSED[0] += 1
                REUSED[1] += time.perf_counter() - start
                return kernel
            _LOCAL.off = True  # the earlier binary is gone: compile this one, stored anew
            try:
                kernel = _watched(original, src, *args, **kwargs)
            finally:
                _LOCAL.off = False
        key = _PENDING.pop(str(getattr(kernel, "hash", None)), None)
        if key is not None:
            _remember(key, kernel)
        return kernel

    compile._mutant_gate_same_ir = True  # type: ignore[attr-defined]
    compiler.compile = compile
    package.compile = compile


def _watched(original: Any, *args: Any, **kwargs: Any) -> Any:
    """``original(...)`` with this thread's ``ttir`` stages watched: only a compile through
    the installed ``compile`` may stop at its first stage (one through a name bound before,
    ``triton.compile``, runs as it was)."""
    _LOCAL.watching = True
    try:
        return original(*args, **kwargs)
    finally:
        _LOCAL.watching = False
