"""Parity by execution: the batched executor (engine/harness/batched.py) against Triton's own
loop, on the examples and on kernels with divergent control flow, in a subprocess with
TRITON_INTERPRET=1 (the interpreter is chosen at import). Outputs bit-identical (torch.equal),
prints in the same order, and every launch that falls back recorded with its reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent("""
    import contextlib, io, json, os, sys
    import torch
    import triton
    import triton.language as tl
    sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
    from mutant_gate.engine.harness import batched, shims
    shims.install()  # the harness's GPU-query shims: the examples ask for a device at import
    import layer_norm, matmul, rms_norm_libdevice, softmax, vector_add


    @triton.jit
    def early_return(X, Y, n_rows, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        if row >= n_rows:
            return
        cols = tl.arange(0, BLOCK)
        x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(Y + row * n_cols + cols, x * 2.0 + tl.sum(x, axis=0), mask=cols < n_cols)


    @triton.jit
    def loaded_bound(X, Counts, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        n = tl.load(Counts + pid)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(n):
            acc += tl.load(X + i * BLOCK + tl.arange(0, BLOCK))
        tl.store(Y + pid * BLOCK + tl.arange(0, BLOCK), acc)


    @triton.jit
    def wide_loads(H, I, D, Y, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        keep = cols < n
        h = tl.load(H + pid * n + cols, mask=keep, other=-1.0)
        i = tl.load(I + pid * n + cols - 5, mask=keep & (cols >= 5), other=7)
        d = tl.load(D + pid * n + cols, mask=keep, other=0.5)
        tl.store(Y + pid * BLOCK + cols, h.to(tl.float32) + i.to(tl.float32) + d.to(tl.float32))


    @triton.jit
    def first_program(X, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + offs)
        if pid == 0:
            x = x + 100.0
        tl.store(Y + offs, x)


    @triton.jit
    def data_while(X, Counts, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        n = tl.load(Counts + pid)
        i = 0
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        while i < n:
            acc = acc * 0.5 + tl.load(X + i * BLOCK + tl.arange(0, BLOCK))
            i += 1
        tl.store(Y + pid * BLOCK + tl.arange(0, BLOCK), acc)


    @triton.jit
    def branch_else(X, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + offs)
        if tl.sum(x, axis=0) > 0:
            y = x * 2.0
            tl.store(Y + offs, y)
        else:
            y = -x
            tl.atomic_add(Y + offs, y)
        tl.store(Y + offs, y + 1.0, mask=offs % 2 == 0)


    @triton.jit
    def branch_in_loop(X, Lens, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        n = tl.load(Lens + pid)
        acc = 0.0
        for i in range(0, n):
            v = tl.load(X + pid * BLOCK + i)
            if v > 0 and i % 2 == 0:
                acc += v
            elif v > 0 or i == 1:
                acc -= 2 * v
            else:
                tl.device_print("neg", v)
        tl.store(Y + pid, acc)


    @triton.jit
    def _odd_rows_doubled(x, pid):
        if pid % 2 == 1:
            return x
        x = x * 2.0
        if pid % 3 == 0:
            x = x + 1.0
        return x


    @triton.jit
    def helper_branch(X, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(Y + offs, _odd_rows_doubled(tl.load(X + offs), pid * 2))


    @triton.jit
    def helper_returns(X, Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(Y + offs, _odd_rows_doubled(tl.load(X + offs), pid))


    @triton.jit
    def return_in_loop(Y, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        for i in range(0, pid + 1):
            if i == 3:
                return
            tl.store(Y + pid * BLOCK + i, i + 1.0)


    @triton.jit
    def counter(Count, Old):
        pid = tl.program_id(0)
        old = tl.atomic_add(Count, 1)
        tl.store(Old + pid, old)


    @triton.jit
    def float_atomics(X, Acc, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = tl.load(X + pid * BLOCK + offs)
        tl.atomic_add(Acc + offs, x)
        tl.atomic_add(Acc + offs, x * x)


    @triton.jit
    def neighbour(X, Y):
        pid = tl.program_id(0)
        tl.store(Y + pid, tl.load(X + pid) + 1.0)
        prev = tl.load(Y + tl.maximum(pid - 1, 0))
        tl.store(X + pid, prev)


    @triton.jit
    def ignored_rows(X, Y, L, n_cols, IGNORE: tl.constexpr, HAS: tl.constexpr,
                     BLOCK: tl.constexpr):
        # a loss's ignored rows: inside a constexpr if, a body (a loop of stores, a name
        # the rest use) and then a return, for the programs whose label is ignored
        pid = tl.program_id(0)
        scale = 2.0
        if HAS:
            label = tl.load(L + pid)
            if label == IGNORE:
                scale = 0.0
                for i in range(0, n_cols, BLOCK):
                    offs = i + tl.arange(0, BLOCK)
                    tl.store(Y + pid * n_cols + offs, offs * scale, mask=offs < n_cols)
                return
        for i in range(0, n_cols, BLOCK):
            offs = i + tl.arange(0, BLOCK)
            m = offs < n_cols
            tl.store(Y + pid * n_cols + offs, tl.load(X + pid * n_cols + offs, mask=m) * scale,
                     mask=m)


    @triton.jit
    def late_neighbour(X, Y, C, K):
        # programs from K on read what the program before them wrote: a chunk that holds
        # them falls back; with small chunks the ones before stand and the loop resumes
        pid = tl.program_id(0)
        tl.atomic_add(C, 1)
        tl.store(Y + pid, tl.load(X + pid) + 1.0)
        src = tl.where(pid >= K, pid - 1, pid)
        got = tl.load(Y + src) * 2.0
        tl.store(X + pid, got)
        tl.device_print("g", got)


    @triton.jit
    def cas(Lock, Out):
        pid = tl.program_id(0)
        old = tl.atomic_cas(Lock, 0, pid + 1)
        tl.store(Out + pid, old)


    @triton.jit
    def shout(X, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        x = tl.load(X + pid * BLOCK + tl.arange(0, BLOCK))
        tl.device_print("x", x)
        tl.device_print("s", tl.sum(x, axis=0))


    @triton.jit
    def _pair_max(a, ai, b, bi):
        take = a >= b
        return tl.where(take, a, b), tl.where(take, ai, bi)


    @triton.jit
    def block_ops(X, Y, Z, M: tl.constexpr, N: tl.constexpr):
        pid = tl.program_id(0)
        r = tl.arange(0, M)[:, None]
        c = tl.arange(0, N)[None, :]
        x = tl.load(X + pid * M * N + r * N + c)
        t = tl.trans(x)
        d = tl.dot(x, t)
        s0 = tl.sum(x, axis=0)
        m1 = tl.max(x, axis=1)
        am = tl.argmax(x, axis=1)
        cs = tl.cumsum(x, axis=1)
        v, i = tl.reduce((x, c + r * 0), 1, _pair_max)
        lo, hi = tl.split(tl.reshape(x, (M, N // 2, 2)))
        j = tl.join(hi, lo)
        tl.store(Y + pid * M * N + r * N + c, cs + tl.dot(d, x) * 0.5 + s0[None, :])
        k = tl.arange(0, M)
        tl.store(Z + pid * 4 * M + k, m1 + am.to(tl.float32))
        tl.store(Z + pid * 4 * M + M + k, v + i.to(tl.float32))
        tl.store(Z + pid * 4 * M + 2 * M + k, tl.sum(tl.reshape(j, (M, N)), axis=1))
        tl.store(Z + pid * 4 * M + 3 * M + k, tl.sum(x, axis=None) + k * 0.0)


    @triton.jit
    def grid_2d(X, Y, N: tl.constexpr):
        i = tl.program_id(0)
        j = tl.program_id(1)
        offs = tl.arange(0, N)
        x = tl.load(X + (i * tl.num_programs(1) + j) * N + offs)
        tl.store(Y + (i * tl.num_programs(1) + j) * N + offs, x * (i + 1) - j)


    @triton.jit
    def rows_backward(dY, X, W, RSTD, dX, dW, stride, n_rows, n_cols, rows_per_program,
                      AFFINE: tl.constexpr, BLOCK: tl.constexpr):
        # Liger's rms norm backward: on a CPU one program loops over every row
        row_block = tl.program_id(0).to(tl.int64)
        row_start = row_block * rows_per_program
        row_end = min((row_block + 1) * rows_per_program, n_rows)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        if AFFINE:  # without it, the sum is never set: its update must not run
            dW_row = tl.zeros((BLOCK,), dtype=tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0)
        for row_idx in range(row_start, row_end):
            dy = tl.load(dY + row_idx * stride + cols, mask=mask, other=0.0)
            x = tl.load(X + row_idx * stride + cols, mask=mask, other=0.0)
            rstd = tl.load(RSTD + row_idx)
            x = x.to(tl.float32)
            m = dy * w
            dx = rstd * m
            dx += rstd * (-(1 / n_cols) * rstd * rstd * tl.sum(m * x, axis=0) * x)
            if AFFINE:
                dW_row += dy * (x * rstd)
            tl.store(dX + row_idx * stride + cols, dx.to(dX.dtype.element_ty), mask=mask)
        if AFFINE:
            tl.store(dW + row_block * n_cols + cols, dW_row, mask=mask)


    @triton.jit
    def half_sums(X16, XB, Out, n_rows, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc32 = tl.zeros([BLOCK], dtype=tl.float32)
        acc16 = tl.zeros([BLOCK], dtype=tl.float16)
        accb = tl.zeros([BLOCK], dtype=tl.bfloat16)
        total = 0.0
        for r in tl.range(0, n_rows):
            x16 = tl.load(X16 + r * BLOCK + cols)
            xb = tl.load(XB + r * BLOCK + cols)
            acc32 += x16  # fp16 into an fp32 sum
            acc16 = acc16 + x16 * x16  # an fp16 sum, the assignment's form
            accb += xb  # a bf16 sum
            total += tl.sum(x16, axis=0)  # a Python float, then an fp16 scalar
        tl.store(Out + cols, acc32)
        tl.store(Out + BLOCK + cols, acc16.to(tl.float32))
        tl.store(Out + 2 * BLOCK + cols, accb.to(tl.float32))
        tl.store(Out + 3 * BLOCK, total.to(tl.float32))


    @triton.jit
    def prefix_rows(X, n_rows, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        for r in range(1, n_rows):
            prev = tl.load(X + (r - 1) * BLOCK + cols)  # what iteration r - 1 wrote
            tl.store(X + r * BLOCK + cols, tl.load(X + r * BLOCK + cols) + prev)


    @triton.jit
    def not_additive(X, Out, n_rows, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32) + 1.0
        for r in range(n_rows):
            acc = acc * 0.5 + tl.load(X + r * BLOCK + cols)  # carried, not a sum
        total = 0.0
        for r in range(n_rows):
            x = tl.load(X + r * BLOCK + cols)
            if total > 1.0:  # the sum read in a condition
                x = x * 2.0
            total += tl.sum(x, axis=0)
        tl.store(Out + cols, acc + total)


    @triton.jit
    def no_rows(X, Out, n_rows, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32) + 3.0
        last = tl.zeros([BLOCK], dtype=tl.float32) - 1.0
        for r in range(n_rows):
            x = tl.load(X + r * BLOCK + cols)
            last = x
            acc += x
        tl.store(Out + cols, acc + last)


    @triton.jit
    def after_the_loop(X, Out, n_rows, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        z = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(2, n_rows, 3):
            x = tl.load(X + r * BLOCK + cols)
            y = x * 2.0
            k = r * 2
            if BLOCK > 4:
                z = x + 1.0
        tl.store(Out + cols, y)
        tl.store(Out + BLOCK + cols, z)
        tl.store(Out + 2 * BLOCK + cols, x + k + r)


    def cases():
        g = torch.Generator().manual_seed(0)
        rnd = lambda *s: torch.randn(*s, generator=g)
        x1, y1 = rnd(5000), rnd(5000)
        xl, w, b = rnd(96, 300) - 2.3, torch.rand(300, generator=g), torch.rand(300, generator=g)
        xs = rnd(37, 181)
        xs16 = rnd(16, 100)
        a, bm = rnd(70, 48).half(), rnd(48, 90).half()
        xr, wr = rnd(40, 200), torch.rand(200, generator=g)
        xe = rnd(11, 40)
        xb = rnd(6, 16, 8)
        x2 = rnd(3, 4, 32)

        def early():
            y = torch.zeros_like(xe)
            early_return[(16,)](xe, y, 11, 40, BLOCK=64)
            return y

        xc = rnd(4, 32)
        counts = torch.tensor([1, 3, 0, 2], dtype=torch.int32)

        def while_loop():
            y = torch.zeros(4, 32)
            data_while[(4,)](xc, counts, y, BLOCK=32)
            return y

        def else_branch():
            y = torch.zeros_like(xf)
            branch_else[(8,)](xf, y, BLOCK=32)
            return y

        xi = rnd(6, 16)

        def in_loop():
            y = torch.zeros(6)
            lens = torch.tensor([16, 0, 5, 9, 1, 12], dtype=torch.int32)
            branch_in_loop[(6,)](xi, lens, y, BLOCK=16)
            return y

        def in_helper():
            y = torch.zeros_like(xf)
            helper_branch[(8,)](xf, y, BLOCK=32)
            return y

        def helper_return():
            y = torch.zeros_like(xf)
            helper_returns[(8,)](xf, y, BLOCK=32)
            return y

        def loop_return():
            y = torch.zeros(5, 8)
            return_in_loop[(5,)](y, BLOCK=8)
            return y

        def bound():
            counts = torch.tensor([1, 3, 0, 2], dtype=torch.int32)
            y = torch.zeros(4, 32)
            loaded_bound[(4,)](xc, counts, y, BLOCK=32)
            return y

        xf = rnd(8, 32)
        wh, wi = rnd(64 * 100).half(), torch.arange(64 * 100, dtype=torch.int32)
        wd = rnd(64 * 100).double()

        def wide():  # 8192 lanes a load: numpy's gather (batched_memory.numpy_gather)
            y = torch.zeros(64 * 128)
            wide_loads[(64,)](wh, wi, wd, y, 100, BLOCK=128)
            return y

        def first():
            y = torch.empty_like(xf)
            first_program[(8,)](xf, y, BLOCK=32)
            return y

        def count():
            c, old = torch.zeros(1, dtype=torch.int32), torch.zeros(50, dtype=torch.int32)
            counter[(50,)](c, old)
            return torch.cat([c, old])

        xa = rnd(12, 16)

        def fatomics():
            acc = torch.zeros(16)
            float_atomics[(12,)](xa, acc, BLOCK=16)
            return acc

        xn = rnd(20)

        def neigh():
            x, y = xn.clone(), torch.zeros(20)
            neighbour[(20,)](x, y)
            return torch.cat([x, y])

        xi = rnd(9, 20)

        def ignored():
            labels = torch.tensor([0, -100, 3, -100, -100, 5, 1, 2, -100], dtype=torch.int64)
            outs = []
            for has, lab in ((True, labels), (False, labels), (True, torch.zeros(9).long())):
                y = torch.full((9, 20), 7.0)
                ignored_rows[(9,)](xi, y, lab, 20, IGNORE=-100, HAS=has, BLOCK=8)
                outs.append(y.flatten())
            return torch.cat(outs)

        xl40 = rnd(40)

        def late():
            x, y, c = xl40.clone(), torch.zeros(40), torch.zeros(1, dtype=torch.int32)
            late_neighbour[(40,)](x, y, c, 20)
            return torch.cat([x, y, c.float()])

        def lock():
            lk, out = torch.zeros(1, dtype=torch.int32), torch.zeros(9, dtype=torch.int32)
            cas[(9,)](lk, out)
            return torch.cat([lk, out])

        xp = rnd(3, 4)

        def prints():
            shout[(3,)](xp, BLOCK=4)
            return torch.zeros(1)

        def ops():
            y, z = torch.zeros(6, 16, 8), torch.zeros(6, 4 * 16)
            block_ops[(6,)](xb, y, z, M=16, N=8)
            return torch.cat([y.flatten(), z.flatten()])

        def two_d():
            y = torch.zeros_like(x2)
            grid_2d[(3, 4)](x2, y, N=32)
            return y

        dyb, xxb = rnd(300, 100), rnd(300, 100)
        wwb, rstdb = torch.rand(100, generator=g), torch.rand(300, generator=g)

        def backward():
            n, c, dy, xx, ww, rstd = 300, 100, dyb, xxb, wwb, rstdb
            dx, dw, dx2 = torch.zeros(n, c), torch.zeros(1, c), torch.zeros(n, c)
            rows_backward[(1,)](dy, xx, ww, rstd, dx, dw, c, n, c, n, AFFINE=True, BLOCK=128)
            rows_backward[(1,)](dy, xx, ww, rstd, dx2, dw, c, n, c, n, AFFINE=False, BLOCK=128)
            return torch.cat([dx.flatten(), dw.flatten(), dx2.flatten()])

        x16, xbf = rnd(200, 32).half(), rnd(200, 32).bfloat16()

        def halves():
            out = torch.zeros(4 * 32)
            half_sums[(1,)](x16, xbf, out, 200, BLOCK=32)
            return out

        xpre = rnd(50, 16)

        def prefix():
            xx = xpre.clone()
            prefix_rows[(1,)](xx, 50, BLOCK=16)
            return xx

        x40 = rnd(40, 16)

        def carried_otherwise():
            out = torch.zeros(16)
            not_additive[(1,)](x40, out, 40, BLOCK=16)
            return out

        def zero_rows():
            out = torch.zeros(16)
            no_rows[(1,)](x40, out, 0, BLOCK=16)
            return out

        def last_values():
            out = torch.zeros(3 * 16)
            after_the_loop[(1,)](x40, out, 40, BLOCK=16)
            return out

        def gelu():
            y = torch.empty_like(xs16)
            rms_norm_libdevice._gelu_tanh[(3,)](xs16, y, xs16.numel(), BLOCK=256)
            return y

        return {
            "vector_add": lambda: vector_add.add(x1, y1),
            "layer_norm": lambda: layer_norm.layer_norm(xl, (300,), w, b, BLOCK_SIZE=128),
            "softmax": lambda: softmax.softmax(xs),
            "softmax_one_row_each": lambda: softmax.softmax(xs16),
            "matmul": lambda: matmul.matmul(a, bm),
            "rms_norm_libdevice": lambda: torch.cat(
                [t.flatten() for t in rms_norm_libdevice.rms_norm(xr, wr)]
            ),
            "gelu_tanh_libdevice": gelu,
            "early_return": early,
            "wide_loads": wide,
            "loaded_bound": bound,
            "if_pid_0": first,
            "data_while": while_loop,
            "branch_else": else_branch,
            "branch_in_loop": in_loop,
            "return_in_loop": loop_return,
            "branch_in_helper": in_helper,
            "return_in_helper": helper_return,
            "atomic_counter": count,
            "float_atomics_twice": fatomics,
            "reads_other_programs": neigh,
            "atomic_cas": lock,
            "late_talk": late,
            "ignored_rows": ignored,
            "device_print": prints,
            "block_ops": ops,
            "grid_2d": two_d,
            "loop_rows_backward": backward,
            "loop_half_sums": halves,
            "loop_reads_last_iteration": prefix,
            "loop_carried_otherwise": carried_otherwise,
            "loop_zero_iterations": zero_rows,
            "loop_names_after": last_values,
        }


    def run(case):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            out = case()
        return out, buf.getvalue()


    results = {}
    for name, case in cases().items():
        batched.uninstall()
        ref, ref_out = run(case)
        batched.install("batched")
        batched.clear()
        got, got_out = run(case)
        results[name] = {
            "equal": bool(torch.equal(ref, got)),
            "stdout_equal": ref_out == got_out,
            "stdout_lines": len(ref_out.splitlines()),
            "launches": batched.launches(),
        }
    print("RESULTS " + json.dumps(results))
""")


def _run_worker(tmp_path: Path, env_extra: dict | None = None) -> dict:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "TRITON_INTERPRET": "1", **(env_extra or {})}
    env.pop("MUTANT_GATE_INTERPRETER", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS "))
    return json.loads(line[len("RESULTS ") :])


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _run_worker(tmp_path_factory.mktemp("batched"))


#: kernel -> the executor its launches must have had, and the reason where it fell back
EXPECTED = {
    "vector_add": ("batched", None),
    "layer_norm": ("batched", None),
    "softmax": ("batched", None),
    "softmax_one_row_each": ("batched", None),
    "matmul": ("batched", None),
    "rms_norm_libdevice": ("batched", None),
    "gelu_tanh_libdevice": ("batched", None),
    "early_return": ("batched", None),
    "wide_loads": ("batched", None),
    "loaded_bound": ("batched", None),
    "if_pid_0": ("batched", None),
    "data_while": ("batched", None),
    "branch_else": ("batched", None),
    "branch_in_loop": ("batched", None),
    "return_in_loop": ("triton", "a loop bound or index differs between programs"),
    "branch_in_helper": ("batched", None),
    "return_in_helper": ("triton", "a branch or loop condition differs between programs"),
    "atomic_counter": ("batched", None),
    "float_atomics_twice": (
        "triton",
        "programs of one chunk store to the same element in different operations",
    ),
    "reads_other_programs": ("triton", "a program reads what another program of its chunk writes"),
    "atomic_cas": ("triton", "atomic_cas runs program by program"),
    "late_talk": ("triton", "a program reads what another program of its chunk writes"),
    "ignored_rows": ("batched", None),
    "device_print": ("batched", None),
    "block_ops": ("batched", None),
    "grid_2d": ("batched", None),
    "loop_rows_backward": ("batched", None),
    "loop_half_sums": ("batched", None),
    "loop_reads_last_iteration": (
        "triton",
        "an iteration of a single program's loop reads what another iteration writes",
    ),
    "loop_carried_otherwise": ("batched", None),
    "loop_zero_iterations": ("batched", None),
    "loop_names_after": ("batched", None),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_outputs_match_tritons_loop(results: dict, name: str) -> None:
    r = results[name]
    assert r["equal"], f"{name}: outputs differ from Triton's loop"
    assert r["stdout_equal"], f"{name}: prints differ from Triton's loop"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_executor_and_reason_recorded(results: dict, name: str) -> None:
    executor, reason = EXPECTED[name]
    launches = results[name]["launches"]
    assert launches, f"{name}: no launch recorded"
    assert {x["executor"] for x in launches} == {executor}, launches
    assert {x["reason"] for x in launches} == {reason}, launches
    masked = {kind for x in launches for kind in x.get("masked") or ()}
    assert masked == MASKED.get(name, set()), launches


LOOP, BRANCH = "a loop whose bounds differ between programs", "a branch whose condition differs"
ITERATIONS = "a single program's loop, its iterations together"
#: kernel -> the divergent flow its batched launches ran under masks
MASKED = {
    "softmax": {LOOP},
    "softmax_one_row_each": {LOOP},
    "gelu_tanh_libdevice": {LOOP},
    "loaded_bound": {LOOP},
    "early_return": {"an early return some programs take"},
    "ignored_rows": {"an early return some programs take"},
    "if_pid_0": {BRANCH + " between programs"},
    "branch_else": {BRANCH + " between programs"},
    "branch_in_loop": {LOOP, BRANCH + " between programs"},
    "branch_in_helper": {BRANCH + " between programs"},
    "data_while": {"a while loop whose condition differs between programs"},
    "loop_rows_backward": {ITERATIONS},
    "loop_half_sums": {ITERATIONS},
    "loop_names_after": {ITERATIONS},
}


@pytest.mark.slow
def test_prints_keep_program_order(results: dict) -> None:
    assert results["device_print"]["stdout_lines"] == 6


@pytest.mark.slow
def test_small_chunks_give_the_same_outputs(tmp_path: Path) -> None:
    results = _run_worker(tmp_path, {"MUTANT_GATE_BATCH_ELEMENTS": "1024"})
    for name in ("layer_norm", "vector_add", "atomic_counter", "early_return",
                 "loop_rows_backward", "loop_half_sums", "loop_names_after"):  # fmt: skip
        assert results[name]["equal"], name
        assert all(x["executor"] == "batched" for x in results[name]["launches"]), name
    assert max(x["chunks"] for x in results["layer_norm"]["launches"]) > 1
    # a later chunk's programs talk: the first chunk's 8 stand (their writes, atomics, prints
    # and checks), its own are put back, and Triton's loop resumes at its first program
    late = results["late_talk"]
    assert late["equal"] and late["stdout_equal"] and late["stdout_lines"] == 40
    assert [x.get("batched_programs") for x in late["launches"]] == [8], late["launches"]


def test_install_rejects_an_unknown_mode() -> None:
    code = (
        "from mutant_gate.engine.harness import batched\n"
        "try:\n    batched.install('fast')\nexcept ValueError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "expected one of batched, triton" in proc.stdout


HOOKS = textwrap.dedent("""
    import json, os, sys
    import torch
    sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
    from mutant_gate.engine.harness import batched, bounds
    import layer_norm

    x, w, b = torch.randn(24, 200), torch.rand(200), torch.rand(200)
    run = lambda: layer_norm.layer_norm(x, (200,), w, b)
    ref = run()
    batched.install("triton")
    once = run()
    batched.install("batched")
    bounds.install()
    checked = run()  # the harness's own hooks: batched
    import triton.runtime.interpreter as interp
    before = interp.InterpreterBuilder.create_masked_load
    def foreign(self, *args):
        return before(self, *args)
    interp.InterpreterBuilder.create_masked_load = foreign
    hooked = run()  # another tool's: Triton's loop
    print("RESULTS " + json.dumps({
        "triton_equal": bool(torch.equal(ref, once)),
        "checked_equal": bool(torch.equal(ref, checked)),
        "hooked_equal": bool(torch.equal(ref, hooked)),
        "launches": batched.launches(),
    }))
""")


@pytest.mark.slow
def test_patched_once_loop_and_another_tools_hooks(tmp_path: Path) -> None:
    script = tmp_path / "hooks.py"
    script.write_text(HOOKS)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(script), str(ROOT)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS "))
    r = json.loads(line[len("RESULTS ") :])
    assert r["triton_equal"] and r["checked_equal"] and r["hooked_equal"]
    first, checked, hooked = r["launches"]
    assert (first["executor"], first["reason"]) == ("triton", "interpreter=triton")
    assert (checked["executor"], checked["reason"]) == ("batched", None)
    assert hooked["executor"] == "triton"
    assert hooked["reason"].startswith("memory hooks of another tool need Triton's loop")
    assert "InterpreterBuilder.create_masked_load" in hooked["reason"]


def test_numpys_gather_gives_tritons_where_it_applies_and_leaves_the_rest() -> None:
    """A batched load's gather (``Memory.numpy_gather``) against Triton's own
    (``_native.load``) on the same lanes: where it applies, the same bits; where not (lanes
    in two buffers, between elements, too few, a bool), None, and Triton's runs."""
    import numpy as np
    import torch

    from mutant_gate.engine.harness import batched_memory as bm

    f32 = torch.randn(64 * 100 + 3)
    i16 = torch.arange(64 * 100, dtype=torch.int16)
    f64 = torch.randn(64 * 100, dtype=torch.float64)
    tensors = (f32, i16, f64)
    memory = bm.Memory([(t.data_ptr(), t.numel() * t.element_size()) for t in tensors])
    rows = np.arange(64, dtype=np.uint64)[:, None]
    cols = np.arange(128, dtype=np.uint64)[None, :]
    keep = np.broadcast_to(cols < 100, (64, 128))

    def lanes(t: torch.Tensor, shift: int = 0) -> np.ndarray:
        size = np.uint64(t.element_size())
        return np.ascontiguousarray(np.uint64(t.data_ptr() + shift) + (rows * 100 + cols) * size)

    def same(p, m, dtype, other=0) -> np.ndarray | None:
        o = np.full(p.shape, other, dtype=dtype)
        ours = memory.numpy_gather(p, np.ascontiguousarray(m), o, np.dtype(dtype))
        if ours is not None:
            theirs = bm._native.load(p, np.ascontiguousarray(m), o, np.dtype(dtype))
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs, equal_nan=True)
        return ours

    # one buffer each, the masked lanes past its end or below its start
    assert same(lanes(f32), keep, np.float32, other=-1.0) is not None
    assert same(lanes(i16), keep, np.int16, other=7) is not None
    below = np.ascontiguousarray(keep & (cols >= 5))
    assert same(lanes(f64) - np.uint64(5 * 8), below, np.float64) is not None
    inside = np.ascontiguousarray(np.ones((64, 128), bool) & (rows < 63))  # every lane kept
    assert same(lanes(f32), inside, np.float32) is not None
    # not for numpy: a load reaching past its buffer, between elements, small, bool
    assert same(lanes(i16), np.ones((64, 128), bool), np.int16) is None
    assert same(lanes(f32, shift=2), keep, np.float32) is None
    assert same(lanes(f32)[:8], keep[:8], np.float32) is None
    assert same(lanes(i16), keep, np.bool_) is None
    assert same(lanes(f32), np.zeros((64, 128), bool), np.float32) is None  # nothing kept


def test_numpys_scatter_writes_tritons_bits_where_it_applies_and_leaves_the_rest() -> None:
    """A batched store's scatter (``Memory.numpy_scatter``) against Triton's own
    (``_native.store``) on two copies of one buffer: where it applies, the same bytes after;
    where not (an element written twice, lanes in two buffers, between elements, too few),
    False and nothing written."""
    import numpy as np
    import torch

    from mutant_gate.engine.harness import batched_memory as bm

    rows = np.arange(64, dtype=np.uint64)[:, None]
    cols = np.arange(128, dtype=np.uint64)[None, :]
    keep = np.ascontiguousarray(np.broadcast_to(cols < 100, (64, 128)))
    every = np.ones((64, 128), dtype=bool)

    def same(dtype: torch.dtype, m: np.ndarray, order=None, shift=0, width=100, known=False):
        ours, theirs = (torch.zeros(64 * 128 + 7, dtype=dtype) for _ in "ab")
        other = torch.ones(16, dtype=dtype)  # a second buffer, never written
        size = np.uint64(ours.element_size())
        elements = rows * width + (cols if order is None else order)
        values = torch.randn(64, 128).to(dtype).numpy()
        done = []
        for t in (ours, theirs):
            memory = bm.Memory([(t.data_ptr(), t.numel() * t.element_size()),
                                (other.data_ptr(), 16 * other.element_size())])  # fmt: skip
            p = np.ascontiguousarray(np.uint64(t.data_ptr() + shift) + elements * size)
            p = np.where(m, p, np.uint64(0))  # dropped lanes point nowhere
            if t is ours:
                # known: the buffer a write's bounds found its kept lanes in, handed on
                found = int(np.searchsorted(memory.bases, t.data_ptr(), side="right")) - 1
                done.append(memory.numpy_scatter(p, values, m, found if known else None))
            else:
                bm._native.store(p, values, m)
        if done[0]:
            assert torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8))
        else:
            assert not ours.view(torch.uint8).any()
        return done[0]

    assert same(torch.float32, keep)
    assert same(torch.float16, keep)
    assert same(torch.int64, every, width=128)
    assert same(torch.float32, np.ascontiguousarray(keep & (rows < 63)))
    assert same(torch.bool, keep)
    assert same(torch.float32, keep, known=True)
    # not for numpy: an element written twice, lanes out of order, between elements
    assert not same(torch.float32, keep, order=cols // 2)
    assert not same(torch.float32, keep, order=(127 - cols) % 100)
    assert not same(torch.float32, keep, shift=2)
    assert not same(torch.float32, keep, shift=2, known=True)


def test_the_quick_proof_reads_apart_programs_and_leaves_the_rest_to_the_maps() -> None:
    """``_apart``, a chunk's quick proof: programs that write their own row and read
    anything but another's written row are apart; a read of another program's row, or
    rows that interleave, go to the exact maps, which raise only for the real conflict."""
    import numpy as np
    import torch

    from mutant_gate.engine.harness import batched_memory as bm
    from mutant_gate.engine.harness import batched_ops as ops

    x, y = torch.zeros(8 * 32), torch.zeros(8 * 32)
    memory = bm.Memory([(t.data_ptr(), t.numel() * 4) for t in (x, y)])
    rows = np.arange(8, dtype=np.uint64)[:, None]
    cols = np.arange(32, dtype=np.uint64)[None, :]
    keep = np.ones((8, 32), dtype=bool)

    def at(t: torch.Tensor, elements: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.uint64(t.data_ptr()) + elements.astype(np.uint64) * 4)

    def chunk(writes: list, reads: list) -> tuple[bool, bool]:
        """(quick proof, the exact maps raised)."""
        w = [bm._Access(p, keep, 4, None) for p in writes]
        r = [bm._Access(p, keep, 4, None) for p in reads]
        for access in w:
            memory._buffers(access)  # as a store does: its buffer and ranges
        quick = bm._apart(r, w)
        memory.reads, memory.writes = r, w
        try:
            memory.check_chunk()
        except ops.Divergence:
            return quick, True
        return quick, False

    own_rows = at(y, rows * 32 + cols)
    assert chunk([own_rows], [at(x, rows * 32 + cols), own_rows]) == (True, False)
    # program p reads row p + 1 of what the others write: a real conflict
    assert chunk([own_rows], [at(y, ((rows + 1) % 8) * 32 + cols)]) == (False, True)
    # interleaved columns (program p writes p, p + 8, ...): hulls overlap, no conflict
    woven = at(y, cols * 8 + rows)
    assert chunk([woven], [at(x, rows * 32 + cols)]) == (False, False)
    # a read the same in every program of a written element
    same = bm._Access(np.ascontiguousarray(at(y, cols)[0]), np.ones(32, bool), 4, bm.MULTI)
    written = bm._Access(own_rows, keep, 4, None)
    memory._buffers(written)
    assert bm._apart([], [written]) is True
    assert bm._apart([same], [written]) is False
    # writes into two buffers (a row of y, one element of x a program): apart in each
    assert chunk([own_rows, at(x, rows + cols * 0)], [own_rows]) == (True, False)
    # ... but program p + 1 reading the x element program p wrote is not
    assert chunk([own_rows, at(x, rows + cols * 0)], [at(x, (rows + 1) % 8 + cols * 0)]) == (
        False,
        True,
    )
