"""Inside the sandbox: every closeness assertion the checks make, and the error it let
through (issue 47: a mutant that survives ``assert_close(out, ref, atol=0.1)`` may differ
from the original far more than the original does; the tolerance hid it).

``install()`` (idempotent) patches the module attributes, so a later ``from torch.testing
import assert_close`` gets the wrapper: ``torch.testing.assert_close``, ``torch.allclose``,
``torch.isclose``, ``torch.Tensor.allclose``, ``numpy.testing.assert_allclose``,
``numpy.testing.assert_array_almost_equal``, ``numpy.allclose``, ``numpy.isclose``, and the
``__eq__`` of the classes ``pytest.approx`` returns. A wrapper never changes behaviour: it
calls the original with the same arguments, returns its value, lets its exception through,
and shows as the original; an error while recording skips the record. Only the checks' own
calls are recorded: a call whose direct caller is library code (site-packages, the standard
library, torch, numpy, triton, pytest, this tool: ``assert_close``'s own ``isclose``) passes
through, as does one while ``torch.compile`` traces.

``where`` is ``"path:LINE"``, relative to the job's directory (the project's root): the line
of the running pytest case's own function the call came through (a helper that made it, in
another file, is ``helper``: ``"test/utils.py:120 name"``), else (the kernel file's own
``__main__`` check, a fixture) the line that made the call. ``case`` is the pytest node id,
or the check's name. ``records()``: one dict per (case, where, fn), first seen first, at
most ``LIMIT`` (``dropped()`` counts the others):

- ``case``, ``where``, ``fn`` (a name above; ``pytest.approx``), ``helper`` (where one);
- ``calls``, ``failed`` (calls that raised, or returned False / not all True);
- ``atol``, ``rtol``: the first call's tolerances in force, given or the function's defaults
  (``assert_close``: torch's per-dtype table; ``assert_array_almost_equal(decimal=d)``: atol
  1.5 * 10**-d, rtol 0; ``pytest.approx``: its abs and rel); ``given``: which of "atol",
  "rtol" it passed; ``varied``: a later call had other tolerances;
- ``shape`` (broadcast), ``dtype`` (the actual's, by name): of the first call;
- ``stats``: whether a call's numbers could be computed (False: shapes that do not match,
  no numbers, a tensor subclass); then the maxima over the calls, computed where the tensors
  are (float32; float64 where an input is 64-bit), with b the expected (second) input and
  err = ``|a - b|``: ``max_abs``, ``max_rel`` (err/|b| over |b| > 0), ``atol_needed`` (the
  smallest atol that passes at the call's rtol, ``max(err - rtol*|b|)``, 0 at least),
  ``rtol_needed`` (the smallest rtol that passes at its atol, ``max((err - atol)/|b|)``; inf
  where |b| = 0 < err - atol), ``nan_mismatch`` (a NaN or an infinity the other input does
  not match, as the call's ``equal_nan`` has it: both needed values are then inf). For
  ``pytest.approx`` (``err <= max(rel*|b|, abs)``) the needed values follow its rule;
- ``tightened``: True where ``Job.tighten`` put other tolerances in force at this line
  (``set_tighten({where: {"atol": ..., "rtol": ...}})``, or ``"where|case"`` for one case's
  calls; ``assert_array_almost_equal`` then
  runs as ``assert_allclose``): the engine checks a proposed tolerance by running with it.

Numbers are JSON-safe: an infinite one is the string ``"inf"`` (``"-inf"``, ``"nan"`` alike).
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import site
import sys
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

#: the most records a job keeps (one per case, line and function)
LIMIT = 300
_HERE = os.path.abspath(__file__)
_MARK = "_mutant_gate_closeness"
_LOCAL = threading.local()  # ``busy``: inside a wrapper; nested calls pass through


# -- what a call says -------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One closeness call as read from its arguments: the two inputs and the rule in force."""

    actual: Any
    expected: Any
    rtol: float | None
    atol: float | None
    given: tuple[str, ...]
    equal_nan: bool
    rule: str = "sum"  # "sum": err <= atol + rtol*|b|; "max": err <= max(atol, rtol*|b|)
    broadcast: bool = True  # the function broadcasts its inputs (assert_close does not)


@dataclass(frozen=True)
class Kind:
    """One wrapped function: its record name, its parameters in order, how a call of it is
    read (``Call``) and run with other tolerances, its defaults, and how it fails."""

    fn: str  # the record's name, and where it is patched ("module.attr", "module.Class.attr")
    params: tuple[str, ...]
    read: Callable[..., Call]
    tight: Callable[..., Any]
    rtol: float = 0.0
    atol: float = 0.0
    equal_nan: bool = False
    returns: bool = False  # passes by returning True (all True), not by not raising
    also: tuple[str, ...] = ()  # other names it is exported under


def _bound(params: tuple[str, ...], args: tuple, kwargs: dict) -> dict:
    """The call's arguments by parameter name (positional ones by ``params``' order)."""
    return {**dict(zip(params, args, strict=False)), **kwargs}


def _read_plain(kind: Kind, args: tuple, kwargs: dict) -> Call:
    """``f(a, b, rtol, atol, equal_nan)``: allclose, isclose, numpy's assert_allclose."""
    b = _bound(kind.params, args, kwargs)
    given = tuple(n for n in ("atol", "rtol") if n in b)
    rtol, atol = float(b.get("rtol", kind.rtol)), float(b.get("atol", kind.atol))
    equal_nan = bool(b.get("equal_nan", kind.equal_nan))
    return Call(b[kind.params[0]], b[kind.params[1]], rtol, atol, given, equal_nan)


def _read_assert_close(kind: Kind, args: tuple, kwargs: dict) -> Call:
    """``assert_close(actual, expected, *, rtol, atol, equal_nan)``; without tolerances,
    torch's own defaults for the inputs' dtypes (the loosest of the two)."""
    b = _bound(kind.params, args, kwargs)
    given = tuple(n for n in ("atol", "rtol") if b.get(n) is not None)
    rtol, atol = b.get("rtol"), b.get("atol")
    if rtol is None or atol is None:
        rtol, atol = _torch_defaults(b["actual"], b["expected"])
    rtol, atol = (None if x is None else float(x) for x in (rtol, atol))
    equal_nan = bool(b.get("equal_nan", False))
    return Call(b["actual"], b["expected"], rtol, atol, given, equal_nan, broadcast=False)


def _torch_defaults(actual: Any, expected: Any) -> tuple[float | None, float | None]:
    """assert_close's (rtol, atol) for these inputs (None, None: not tensor-like)."""
    from torch.testing._comparison import default_tolerances

    try:
        rtol, atol = default_tolerances(_as_tensor(actual), _as_tensor(expected))
    except Exception:  # noqa: BLE001 - a sequence of tensors, a mapping: its own defaults
        return None, None
    return float(rtol), float(atol)


def _read_almost(kind: Kind, args: tuple, kwargs: dict) -> Call:
    """``assert_array_almost_equal(actual, desired, decimal=6)``: passes where
    ``|a - b| < 1.5 * 10**-decimal`` (NaN where both have NaN): atol 1.5e-6, rtol 0."""
    b = _bound(kind.params, args, kwargs)
    decimal = b.get("decimal", 6)
    given = ("atol",) if "decimal" in b else ()
    return Call(b["actual"], b["desired"], 0.0, 1.5 * 10.0 ** (-decimal), given, True)


def _read_approx(kind: Kind, args: tuple, kwargs: dict) -> Call:
    """``actual == approx(expected, rel, abs, nan_ok)``, at the approx object's ``__eq__``:
    passes where ``|a - b| <= max(rel*|b|, abs)``; abs 1e-12 and rel 1e-6 by default, no
    rel at all where only abs is given."""
    approx, actual = args[0], args[1]
    rel, tol_abs = approx.rel, approx.abs
    given = tuple(n for n, v in (("atol", tol_abs), ("rtol", rel)) if v is not None)
    atol = float(tol_abs) if tol_abs is not None else 1e-12
    rtol = float(rel) if rel is not None else (0.0 if tol_abs is not None else 1e-6)
    got, want = _approx_values(approx, actual)
    return Call(got, want, rtol, atol, given, bool(approx.nan_ok), rule="max")


def _approx_values(approx: Any, actual: Any) -> tuple[Any, Any]:
    """What an approx object compares: values in the expected's order for a mapping, the
    items of a sequence, else the two objects (a scalar, an array)."""
    expected = approx.expected
    if hasattr(expected, "keys"):
        keys = list(expected.keys())
        return [actual[k] for k in keys], [expected[k] for k in keys]
    if isinstance(expected, list | tuple):
        return list(actual), list(expected)
    return actual, expected


def _tight_plain(kind: Kind, original: Callable, args: tuple, kwargs: dict, tol: dict) -> Any:
    """The original with the tightening's atol and rtol as keywords."""
    __tracebackhide__ = True
    extra = dict(zip(kind.params[2:], args[2:], strict=False))
    merged = {**extra, **kwargs, "rtol": tol["rtol"], "atol": tol["atol"]}
    return original(*args[:2], **merged)


def _tight_almost(kind: Kind, original: Callable, args: tuple, kwargs: dict, tol: dict) -> Any:
    """assert_array_almost_equal has no rtol: numpy's assert_allclose with both instead."""
    __tracebackhide__ = True
    b = _bound(kind.params, args, kwargs)
    words = {k: b[k] for k in ("err_msg", "verbose") if k in b}
    allclose = _ORIGINALS["numpy.testing.assert_allclose"]
    return allclose(b["actual"], b["desired"], rtol=tol["rtol"], atol=tol["atol"], **words)


def _tight_approx(kind: Kind, original: Callable, args: tuple, kwargs: dict, tol: dict) -> Any:
    """The comparison with an approx object of the same expected value and nan_ok."""
    __tracebackhide__ = True
    approx = args[0]
    tight = type(approx)(approx.expected, rel=tol["rtol"], abs=tol["atol"], nan_ok=approx.nan_ok)
    return original(tight, *args[1:], **kwargs)


def _plain(fn: str, params: tuple[str, ...], rtol: float, atol: float, **kw: Any) -> Kind:
    return Kind(fn, params, _read_plain, _tight_plain, rtol, atol, **{"returns": True, **kw})


_TORCH = ("input", "other", "rtol", "atol", "equal_nan")
_NUMPY = ("a", "b", "rtol", "atol", "equal_nan")
_NUMPY_TESTING = ("actual", "desired", "rtol", "atol", "equal_nan", "err_msg", "verbose")
_ALMOST = ("actual", "desired", "decimal", "err_msg", "verbose")
APPROX = "pytest.approx"  # patched at the ``__eq__`` of each class ``pytest.approx`` returns
KINDS = {k.fn: k for k in (
    _plain("torch.allclose", _TORCH, 1e-5, 1e-8),
    _plain("torch.isclose", _TORCH, 1e-5, 1e-8),
    _plain("torch.Tensor.allclose", ("self", *_TORCH[1:]), 1e-5, 1e-8),
    _plain("numpy.allclose", _NUMPY, 1e-5, 1e-8),
    _plain("numpy.isclose", _NUMPY, 1e-5, 1e-8),
    _plain("numpy.testing.assert_allclose", _NUMPY_TESTING, 1e-7, 0.0, equal_nan=True,
           returns=False),
    Kind("torch.testing.assert_close", ("actual", "expected"), _read_assert_close, _tight_plain,
         also=("torch.testing._comparison.assert_close",)),
    Kind("numpy.testing.assert_array_almost_equal", _ALMOST, _read_almost, _tight_almost),
    Kind(APPROX, ("self", "actual"), _read_approx, _tight_approx, returns=True),
)}  # fmt: skip


# -- the numbers ------------------------------------------------------------------------


def _as_tensor(x: Any, device: Any = None) -> Any:
    """``x`` as a plain torch tensor on ``device`` (a tensor as it is; a number, a list, a
    numpy array through numpy); raises for what has no numbers or is a tensor subclass."""
    import numpy
    import torch

    if isinstance(x, torch.Tensor):
        if type(x) not in (torch.Tensor, torch.nn.Parameter):
            raise TypeError(f"a tensor subclass ({type(x).__name__}) is left alone")
        t = x.detach()
    else:
        arr = numpy.asarray(x)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"no numbers in a {arr.dtype} array")
        t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    return t if device is None or t.device == device else t.to(device)


def _pair(call: Call) -> tuple[Any, Any]:
    """The call's two inputs as tensors of one shape and one dtype (``_wide``) on the
    actual's device; raises where the shapes do not match as the function has them."""
    import torch

    a = _as_tensor(call.actual)
    b = _as_tensor(call.expected, a.device)
    if not call.broadcast and a.shape != b.shape:
        raise ValueError(f"shapes differ: {tuple(a.shape)} and {tuple(b.shape)}")
    a, b = torch.broadcast_tensors(a, b)
    wide = _wide(a, b)
    return a.to(wide), b.to(wide)


def _wide(a: Any, b: Any) -> Any:
    """The dtype the numbers are computed in: float32 (complex64) where it holds both inputs
    exactly (floats of 32 bits or fewer, small integers), else float64 (complex128)."""
    import torch

    if a.is_complex() or b.is_complex():
        double = max(a.element_size(), b.element_size()) >= 16
        return torch.complex128 if double else torch.complex64
    exact = all(
        t.element_size() <= 2 or (t.is_floating_point() and t.element_size() <= 4) for t in (a, b)
    )
    return torch.float32 if exact else torch.float64


def numbers(call: Call) -> dict:
    """max_abs, max_rel, atol_needed, rtol_needed and nan_mismatch of one call, computed where
    its tensors are, with one transfer to the host (two where a NaN or an infinity is in
    either input: see the module docstring)."""
    import torch

    a, b = _pair(call)
    if a.numel() == 0:
        return {"max_abs": 0.0, "max_rel": 0.0, "atol_needed": 0.0, "rtol_needed": 0.0,
                "nan_mismatch": False}  # fmt: skip
    diff = torch.sub(a, b)
    err, size = (diff.abs() if diff.is_complex() else diff.abs_()), b.abs()
    found = _maxima(err, size, call)
    bad = False
    if not math.isfinite(found[0]):  # a NaN or an infinity: left out of the error, and
        finite = torch.isfinite(a) & torch.isfinite(b)  # a mismatch no tolerance passes
        same = a == b
        if call.equal_nan:
            same |= torch.isnan(a) & torch.isnan(b)
        err, size = torch.where(finite, err, 0.0), torch.where(finite, size, 0.0)
        *found, bad = _maxima(err, size, call, (~finite & ~same).any())
    max_abs, max_rel, atol_n, rtol_n = found
    if bad:
        atol_n = rtol_n = math.inf
    return {"max_abs": max_abs, "max_rel": max_rel, "atol_needed": max(0.0, atol_n),
            "rtol_needed": max(0.0, rtol_n), "nan_mismatch": bool(bad)}  # fmt: skip


def _maxima(err: Any, size: Any, call: Call, *more: Any) -> list[float]:
    """[max err, max err/|b| over |b| > 0, the atol needed, the rtol needed, *more] in one
    transfer; the needed values may be negative (none needed)."""
    import torch

    rtol, atol = call.rtol or 0.0, call.atol or 0.0
    # one scratch tensor for every step: a real library's tensors are a gigabyte each
    scratch = torch.div(err, size).nan_to_num_(nan=0.0, posinf=0.0)  # |b| = 0: left out
    maxima = [err.max(), scratch.max()]
    if call.rule == "max":  # pytest.approx: err <= max(rel*|b|, abs)
        maxima.append(torch.where(err > rtol * size, err, 0.0).max())
        rtol_needed = torch.where(err > atol, err / size, 0.0)  # x/0 = inf: no rel passes
    else:  # err <= atol + rtol*|b|
        maxima.append(torch.add(err, size, alpha=-rtol, out=scratch).max())
        rtol_needed = torch.sub(err, atol, out=scratch).div_(size)
        rtol_needed.nan_to_num_(nan=0.0, posinf=math.inf)
    maxima.append(rtol_needed.max())
    return torch.stack([m.to(err.dtype) for m in (*maxima, *more)]).tolist()


def _shape_dtype(call: Call) -> tuple[list[int] | None, str]:
    """The broadcast shape of the two inputs (None: none) and the actual's dtype's name."""
    import numpy  # torch.broadcast_shapes imports sympy: 0.35 s on a job's first call

    try:
        shapes = (_as_tensor(call.actual).shape, _as_tensor(call.expected).shape)
        shape = [int(n) for n in numpy.broadcast_shapes(*shapes)]
    except Exception:  # noqa: BLE001 - no shape to say
        shape = None
    dtype = getattr(call.actual, "dtype", None)
    name = str(dtype).removeprefix("torch.") if dtype is not None else type(call.actual).__name__
    return shape, name


def _failed(kind: Kind, result: Any) -> bool:
    """A returning kind failed where it returned False, or not all True (isclose)."""
    if not kind.returns:
        return False
    if hasattr(result, "all"):
        return not bool(result.all())
    return not result


def json_number(x: float | None) -> float | str | None:
    """``x`` as JSON may hold it: an infinity or NaN as its string."""
    if x is None or math.isfinite(x):
        return x
    return str(x)


# -- where a call was made --------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """Where a call is attributed: the case, the test line and the helper that made it."""

    case: str
    where: str
    helper: str = ""


class Places:
    """Which files are library code, and a file's path relative to the job's root."""

    def __init__(self) -> None:
        self.root = ""
        self.prefixes: tuple[str, ...] = ()
        self._library: dict[str, bool] = {}
        self._relative: dict[str, str] = {}

    def set_root(self, root: str) -> None:
        """A job begins: its root, and the library's folders as imported now."""
        self.root, self.prefixes = root, _library_prefixes()
        self._library, self._relative = {}, {}

    def library(self, filename: str) -> bool:
        known = self._library.get(filename)
        if known is None:
            path = os.path.abspath(filename)
            known = filename.startswith("<") or path.startswith(self.prefixes)
            known = known or os.path.realpath(path).startswith(self.prefixes)
            self._library[filename] = known
        return known

    def relative(self, filename: str) -> str:
        known = self._relative.get(filename)
        if known is None:
            known = _under(filename, self.root) if self.root else filename
            self._relative[filename] = known
        return known

    def line(self, frame: Any) -> str:
        return f"{self.relative(frame.f_code.co_filename)}:{frame.f_lineno}"


def _under(filename: str, root: str) -> str:
    """``filename`` relative to ``root`` where it lies below it (symlinks resolved if need
    be), else absolute."""
    for path, base in ((os.path.abspath(filename), os.path.abspath(root)),
                       (os.path.realpath(filename), os.path.realpath(root))):  # fmt: skip
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel
    return os.path.abspath(filename)


def _library_prefixes() -> tuple[str, ...]:
    """The folders of library code: the standard library, site-packages, the packages of
    torch, numpy, triton and pytest wherever they are installed, and this tool's engine."""
    paths = sysconfig.get_paths()
    found = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    try:
        found += [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # a virtualenv's old site module
        pass
    found += _package_folders()
    found.append(os.path.dirname(os.path.dirname(_HERE)))  # mutant_gate's engine
    prefixes = {os.path.join(os.path.abspath(p), "") for p in found if p}
    prefixes |= {os.path.join(os.path.realpath(p), "") for p in prefixes}
    return tuple(sorted(prefixes))


def _package_folders() -> list[str]:
    """The folders of torch, numpy, triton and pytest's packages, those imported."""
    folders = []
    for name in ("torch", "numpy", "triton", "pytest", "_pytest", "pluggy"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            folders.append(os.path.dirname(module.__file__))
    return folders


# -- the record -------------------------------------------------------------------------


class Recorder:
    """One job's records, the case running and the tightening in force (a warm runner's
    process serves many jobs: ``start`` begins each from nothing)."""

    def __init__(self) -> None:
        self.places = Places()
        self.entries: dict[tuple[str, str, str], dict] = {}
        self.dropped: set[tuple[str, str, str]] = set()
        self.check = ""
        self.item: Any = None
        self.test_codes: frozenset = frozenset()
        self.tighten: dict = {}
        self.lock = threading.Lock()

    def site(self) -> Site | None:
        """Where the call that reached the wrapper was made (None: by library code)."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__") == __name__:
            frame = frame.f_back
        if frame is None or self.places.library(frame.f_code.co_filename):
            return None
        case = self.item.nodeid if self.item is not None else self.check
        test = self._test_frame(frame)
        if test is None or test is frame:
            return Site(case, self.places.line(frame))
        helper = f"{self.places.line(frame)} {frame.f_code.co_name}"
        return Site(case, self.places.line(test), helper)

    def _test_frame(self, frame: Any) -> Any:
        """The running pytest case's own function's frame around ``frame``, if any."""
        if not self.test_codes:
            return None
        while frame is not None and frame.f_code not in self.test_codes:
            frame = frame.f_back
        return frame

    def enter_case(self, item: Any) -> None:
        self.item = item
        self.test_codes = _codes(getattr(item, "function", None))

    def leave_case(self) -> None:
        self.item, self.test_codes = None, frozenset()

    def note(self, site: Site, kind: Kind, call: Call, failed: bool, tightened: bool) -> None:
        """Add one call to its (case, where, fn) record (counted only, past ``LIMIT``)."""
        key = (site.case, site.where, kind.fn)
        if self._full(key):
            return
        try:
            stats = numbers(call)
        except Exception:  # noqa: BLE001 - no numbers for these inputs: said as stats False
            stats = None
        with self.lock:
            if self._full(key):
                return
            if key not in self.entries:
                self.entries[key] = _first(site, kind, call, tightened)
            _merge(self.entries[key], call, failed, stats)

    def _full(self, key: tuple[str, str, str]) -> bool:
        """Whether ``key`` is a new record past ``LIMIT`` (then counted as dropped)."""
        if key in self.entries or len(self.entries) < LIMIT:
            return False
        self.dropped.add(key)
        return True


def _codes(function: Any) -> frozenset:
    """The code objects of a test function and of what it wraps (a decorated test)."""
    if function is None:
        return frozenset()
    found = {getattr(function, "__code__", None)}
    try:
        found.add(getattr(inspect.unwrap(function), "__code__", None))
    except ValueError:  # a cycle of __wrapped__
        pass
    return frozenset(c for c in found if c is not None)


def _first(site: Site, kind: Kind, call: Call, tightened: bool) -> dict:
    """A record's fields from its first call."""
    shape, dtype = _shape_dtype(call)
    entry: dict = {"case": site.case, "where": site.where, "fn": kind.fn}
    if site.helper:
        entry["helper"] = site.helper
    entry.update(
        calls=0, failed=0, atol=call.atol, rtol=call.rtol, given=list(call.given),
        varied=False, shape=shape, dtype=dtype, stats=False,
    )  # fmt: skip
    if tightened:
        entry["tightened"] = True
    return entry


_MAXED = ("max_abs", "max_rel", "atol_needed", "rtol_needed")


def _merge(entry: dict, call: Call, failed: bool, stats: dict | None) -> None:
    """One more call in ``entry``: counts, whether the tolerances varied, the maxima."""
    entry["calls"] += 1
    entry["failed"] += int(failed)
    if (call.atol, call.rtol) != (entry["atol"], entry["rtol"]):
        entry["varied"] = True
    if stats is None:
        return
    if not entry["stats"]:
        entry.update(stats, stats=True)
        return
    for name in _MAXED:
        entry[name] = max(entry[name], stats[name])
    entry["nan_mismatch"] = entry["nan_mismatch"] or stats["nan_mismatch"]


_RECORDER = Recorder()
_ORIGINALS: dict[str, Callable] = {}


# -- the wrappers -----------------------------------------------------------------------


def _observe(kind: Kind, original: Callable, args: tuple, kwargs: dict) -> Any:
    """Call ``original`` as asked (or tightened at its line) and record the call."""
    __tracebackhide__ = True  # pytest shows the failure as the original raised it
    try:
        site = _RECORDER.site()
        call = kind.read(kind, args, kwargs) if site else None
        tol = _tightening(site, call) if site and call else None
    except Exception:  # noqa: BLE001 - arguments this reading does not know: not recorded
        site = call = tol = None
    if site is None or call is None:
        return original(*args, **kwargs)
    if tol is not None:
        call = replace(call, atol=tol["atol"], rtol=tol["rtol"], given=("atol", "rtol"))
    _LOCAL.busy = True
    try:
        result = kind.tight(kind, original, args, kwargs, tol) if tol else original(*args, **kwargs)
    except BaseException:
        _note(site, kind, call, None, True, tol is not None)
        raise
    finally:
        _LOCAL.busy = False
    _note(site, kind, call, result, False, tol is not None)
    return result


def _tightening(site: Site, call: Call) -> dict | None:
    """The tolerances ``Job.tighten`` puts in force at the call's line, if any: keyed
    ``"where|case"`` for one case's calls there, or ``"where"`` for every case's."""
    tighten = _RECORDER.tighten
    tol = (tighten.get(f"{site.where}|{site.case}") or tighten.get(site.where)) if tighten else None
    if tol is None:
        return None
    return {"atol": float(tol.get("atol", call.atol)), "rtol": float(tol.get("rtol", call.rtol))}


def _note(site: Site, kind: Kind, call: Call, result: Any, raised: bool, tightened: bool) -> None:
    """Record the call; never fails (an error here skips the record)."""
    busy = getattr(_LOCAL, "busy", False)
    _LOCAL.busy = True
    try:
        failed = raised or _failed(kind, result)
        _RECORDER.note(site, kind, call, failed, tightened)
    except Exception:  # noqa: BLE001 - the record is a courtesy, never a failure
        pass
    finally:
        _LOCAL.busy = busy


def _compiling() -> bool:
    """Whether torch.compile is tracing (the call is then left to it, unrecorded)."""
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    is_compiling = getattr(compiler, "is_compiling", None)
    return bool(is_compiling and is_compiling())


class Wrapper:
    """A closeness function behind its recorder: called as the original is, and shown as it
    is (pytest's assertion message names the function a failing ``assert`` called)."""

    def __init__(self, kind: Kind, original: Callable, name: tuple[str, str]) -> None:
        functools.update_wrapper(self, original)
        self.kind, self.original, self.name = kind, original, name
        setattr(self, _MARK, True)

    def __reduce__(self) -> tuple:
        """Pickled by its name, as the original is: where it is loaded, what is there."""
        return _named, self.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if getattr(_LOCAL, "busy", False) or _compiling():
            return self.original(*args, **kwargs)
        return _observe(self.kind, self.original, args, kwargs)

    def __repr__(self) -> str:
        return repr(self.original)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        """As a method (``Tensor.allclose``, an approx object's ``__eq__``): bound."""
        return self if obj is None else Bound(self, obj, owner)


def _owner(path: str) -> Any:
    """The module, or the class in one, that ``path`` names (imported if need be)."""
    import importlib

    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for name in parts[n:]:
            found = getattr(found, name)
        return found
    raise ImportError(f"no module for {path}")


def _named(path: str, attr: str) -> Any:
    return getattr(_owner(path), attr)


class Bound:
    """A ``Wrapper`` bound to an object, shown as the original's bound method."""

    def __init__(self, wrapper: Wrapper, obj: Any, owner: Any) -> None:
        self.wrapper, self.obj, self.owner = wrapper, obj, owner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        return self.wrapper(self.obj, *args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.wrapper.original.__get__(self.obj, self.owner))


def _patch(name: str, kind: Kind, wrappers: dict[int, Wrapper]) -> None:
    """``name`` ("module.attr") wrapped: one wrapper per original, whatever its names."""
    path, attr = name.rsplit(".", 1)
    owner = _owner(path)
    original = getattr(owner, attr)
    if getattr(original, _MARK, False):
        return
    _ORIGINALS.setdefault(kind.fn, original)
    wrapper = wrappers.get(id(original)) or Wrapper(kind, original, (path, attr))
    wrappers[id(original)] = wrapper
    setattr(owner, attr, wrapper)
    if kind.fn in ("torch.allclose", "torch.isclose"):
        _script_builtin(wrapper, attr)


def _names(kind: Kind) -> list[str]:
    """Where ``kind`` is patched: its names, or each approx class's ``__eq__``."""
    if kind.fn != APPROX:
        return [kind.fn, *kind.also]
    try:
        from _pytest.python_api import ApproxBase
    except ImportError:
        return []
    found, todo = [], [ApproxBase]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "__eq__" in cls.__dict__:
            found.append(f"{cls.__module__}.{cls.__qualname__}.__eq__")
    return found


def _script_builtin(wrapper: Wrapper, attr: str) -> None:
    """TorchScript resolves ``torch.allclose`` by the object's identity: the wrapper stands
    for the same aten op, so scripted code keeps compiling (and runs unrecorded)."""
    try:
        from torch.jit._builtins import _register_builtin

        _register_builtin(wrapper, "aten::" + attr)
    except Exception:  # noqa: BLE001 - no TorchScript here: nothing to keep
        pass


def install() -> None:
    """Wrap every closeness function (idempotent; one that cannot be imported is left out)."""
    wrappers: dict[int, Wrapper] = {}
    for kind in KINDS.values():
        for name in _names(kind):
            try:
                _patch(name, kind, wrappers)
            except (ImportError, AttributeError):
                continue


# -- what the runner calls --------------------------------------------------------------


def start(tighten: dict | None, root: str) -> None:
    """A job begins: install, no records, paths relative to ``root``, ``tighten`` in force."""
    install()
    reset()
    _RECORDER.places.set_root(root)
    set_tighten(tighten)


def places() -> Places:
    """The job's root and what is library code, as the records see them."""
    return _RECORDER.places


def set_tighten(tighten: dict | None) -> None:
    """``{where: {"atol": float, "rtol": float}}``: the tolerances calls there run with."""
    _RECORDER.tighten = dict(tighten or {})


def set_case(name: str) -> None:
    """The check now running (a non-pytest check's case; a pytest case names itself)."""
    _RECORDER.check = name
    _RECORDER.leave_case()


def reset() -> None:
    """Forget every record."""
    with _RECORDER.lock:
        _RECORDER.entries.clear()
        _RECORDER.dropped.clear()


def records() -> list[dict]:
    """The job's records, JSON-safe (see the module docstring)."""
    with _RECORDER.lock:
        entries = [dict(e) for e in _RECORDER.entries.values()]
    for entry in entries:
        for name in ("atol", "rtol", *_MAXED):
            if name in entry:
                entry[name] = json_number(entry[name])
    return entries


def dropped() -> int:
    """How many (case, where, fn) records were left out past ``LIMIT``."""
    return len(_RECORDER.dropped)


def finish() -> dict:
    """A job's end: its ``extra`` fields (``closeness``, ``closeness_dropped``, where any),
    and no tightening left in force."""
    set_tighten(None)
    found = records()
    extra: dict = {"closeness": found} if found else {}
    if dropped():
        extra["closeness_dropped"] = dropped()
    return extra


def tracker() -> Any:
    """A pytest plugin that names the running case (its node id and its function) for the
    whole of its setup, call and teardown."""
    import pytest

    class CaseTracker:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
            _RECORDER.enter_case(item)
            try:
                return (yield)
            finally:
                _RECORDER.leave_case()

    return CaseTracker()
