"""Multi-core kernel: big batches are split over worker processes.

Each worker (``python -m shaper.kernels._worker``) runs the single-core gmpy2 kernel and keeps
its own fixed-base tables (built on first use from the spec, then cached), so only exponents,
multipliers and results cross the process boundary, in the typed format of
:mod:`shaper.kernels.wire` (never pickle). Small batches, and cheap element-wise products whose
transfer would cost as much as the work, run in the calling process. Results are bit-identical
to the single-core kernel: all randomness is drawn by the caller, never inside a worker.

Workers are plain child processes started with the same interpreter: they never import the
caller's ``__main__`` (no ``if __name__ == "__main__"`` guard is needed), and they are safe to
use from threaded programs. Secret operands (e.g. CRT decryption moduli) are passed to them
over pipes; nothing leaves the machine. A worker that dies makes the call raise
:class:`~shaper.errors.KernelError` and is restarted on the next call.
"""

from __future__ import annotations

import atexit
import os
import selectors
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import KernelError
from . import wire
from .base import FixedBaseSpec, significant_windows
from .gmp import GmpKernel, choose_window, local_kernel

# Below this much estimated work (µs) a call runs in the calling process.
PARALLEL_MIN_US = 20_000.0
# Chunks per worker (dynamic scheduling evens out unequal cores) and the least work per chunk.
CHUNKS_PER_WORKER = 4
MIN_CHUNK_US = 8_000.0


def _mulmod_us(modulus_bits: int) -> float:
    """Rough cost of one modular product from Python on one core (µs)."""
    return 1.9 * (max(modulus_bits, 256) / 2048.0) ** 1.6


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        package_root = Path(__file__).resolve().parents[2]
        if package_root.name not in ("site-packages", "dist-packages"):
            # Running from a source tree: let the worker import the same copy of shaper.
            env["PYTHONPATH"] = str(package_root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["SHAPER_WORKERS"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shaper.kernels._worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, payload: bytes) -> None:
        assert self.proc.stdin is not None
        wire.write_frame(self.proc.stdin, payload)

    def receive(self) -> bytes | None:
        assert self.proc.stdout is not None
        return wire.read_frame(self.proc.stdout)

    def close(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


class _Pool:
    def __init__(self) -> None:
        self._workers: list[_Worker] = []
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _ensure(self, count: int) -> list[_Worker]:
        if self._pid != os.getpid():  # forked child: the parent's pipes are not ours
            self._workers = []
            self._pid = os.getpid()
        alive = []
        for w in self._workers:
            if w.alive():
                alive.append(w)
            else:
                w.close()  # reap it and release its pipes
        self._workers = alive
        while len(self._workers) < count:
            self._workers.append(_Worker())
        return self._workers[:count]

    def _kill_all(self) -> None:
        for w in self._workers:
            w.close(kill=True)
        self._workers = []

    def reset(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                for w in self._workers:
                    w.close()
            self._workers = []

    def map(self, workers: int, tasks: list[tuple[str, tuple]]) -> list:
        """Run every ``(method, args)`` task; results in task order.

        Chunks are handed out dynamically: each worker gets one, and whichever finishes first
        takes the next, so a slower (busier) core does less of the work. A worker reads its
        whole request before replying, so pipe buffers cannot deadlock.
        """
        # Encode everything first: a bad argument is the caller's error, not a dead worker.
        payloads = [wire.encode((method, tuple(args))) for method, args in tasks]
        with self._lock:
            procs = self._ensure(min(workers, len(tasks)))
            replies: list = [None] * len(tasks)
            selector = selectors.DefaultSelector()
            try:
                pending = iter(range(len(tasks)))
                busy: dict[_Worker, int] = {}

                def dispatch(worker: _Worker) -> None:
                    index = next(pending, None)
                    if index is not None:
                        worker.send(payloads[index])
                        busy[worker] = index

                for w in procs:
                    selector.register(w.proc.stdout, selectors.EVENT_READ, w)  # type: ignore[arg-type]
                    dispatch(w)
                while busy:
                    for key, _ in selector.select():
                        worker = key.data
                        if worker not in busy:
                            continue
                        frame = worker.receive()
                        if frame is None:
                            raise wire.WireError("worker exited")
                        replies[busy.pop(worker)] = wire.decode(frame)
                        dispatch(worker)
            except (OSError, wire.WireError) as exc:
                self._kill_all()
                raise KernelError(
                    f"a kernel worker process died while running {tasks[0][0]!r} "
                    f"(out of memory or killed: {exc}); the workers will restart on the next call"
                ) from exc
            except BaseException:
                # Interrupted with requests in flight (Ctrl-C, MemoryError, ...): their replies
                # must never be read as answers to a later call, so the workers go.
                self._kill_all()
                raise
            finally:
                selector.close()
        return [wire.unwrap(reply, KernelError) for reply in replies]


_POOL = _Pool()
atexit.register(_POOL.reset)


def _split(count: int, parts: int) -> list[tuple[int, int]]:
    parts = max(1, min(parts, count))
    bounds = np.linspace(0, count, parts + 1).astype(int).tolist()
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i] < bounds[i + 1]]


class ParallelKernel:
    """The gmpy2 kernel spread over ``workers`` processes.

    The chunking here is independent of where chunks run: ``pool`` is anything with this
    module's ``map(workers, tasks)`` contract (the default is the local process pool; the Ray
    executor of :mod:`shaper.kernels.cluster` passes its own), and ``local`` is the kernel that
    runs small batches and cheap products in the calling process.
    """

    name = "gmpy2-parallel"
    chunks_per_worker = CHUNKS_PER_WORKER
    min_chunk_us = MIN_CHUNK_US

    def __init__(self, workers: int, min_us: float = PARALLEL_MIN_US, *, pool: Any = None, local: Any = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self.min_us = min_us
        self.pool = _POOL if pool is None else pool
        self.local: GmpKernel = local_kernel() if local is None else local

    def _parallel(self, estimated_us: float, count: int) -> bool:
        return self.workers > 1 and count >= 2 and estimated_us >= self.min_us

    def _parts(self, estimated_us: float, count: int) -> int:
        """How many chunks to cut a batch into: several per worker when there is enough work."""
        by_work = int(estimated_us // self.min_chunk_us)
        return max(1, min(count, max(self.workers, min(self.workers * self.chunks_per_worker, by_work))))

    # -- kernel API: every call goes through gather() ----------------------------------------
    def powmod(self, bases: Sequence, exponents: Sequence, modulus) -> list:
        return self.gather([("powmod", (bases, exponents, modulus))])[0]

    def powmod_same_exponent(self, bases: Sequence, exponent, modulus) -> list:
        return self.gather([("powmod_same_exponent", (bases, exponent, modulus))])[0]

    def fixed_base_powmod(self, specs: Sequence[FixedBaseSpec], exponents: Sequence[np.ndarray],
                          multipliers: Sequence | None, modulus) -> list:
        return self.gather([("fixed_base_powmod", (specs, exponents, multipliers, modulus))])[0]

    def mulmod(self, a: Sequence, b: Sequence, modulus) -> list:
        return self.local.mulmod(a, b, modulus)

    def invert(self, values: Sequence, modulus) -> list:
        return self.gather([("invert", (values, modulus))])[0]

    def prod_rows(self, values: Sequence, indices: np.ndarray, indptr: np.ndarray, modulus) -> list:
        return self.gather([("prod_rows", (values, indices, indptr, modulus))])[0]

    def horner(self, columns: Sequence[Sequence], shift_bits: int, modulus) -> list:
        return self.gather([("horner", (columns, shift_bits, modulus))])[0]

    def horner_multiexp(self, bases, exponents, shift_bits: int, modulus) -> list:
        return self.gather([("horner_multiexp", (bases, exponents, shift_bits, modulus))])[0]

    def gather(self, calls: Sequence[tuple[str, tuple]]) -> list:
        """Run independent kernel calls together: the chunks of all of them share the workers
        (e.g. both CRT halves of a decryption), with one synchronisation at the end."""
        planned = [(method, args, getattr(self, "_plan_" + method)(*args)) for method, args in calls]
        tasks = [(method, chunk) for method, _, chunks in planned if chunks for chunk in chunks]
        try:
            remote = iter(self.pool.map(self.workers, tasks)) if tasks else iter(())
        except wire.WireError:
            # Arguments the wire format does not carry (e.g. negative numbers): compute here, with
            # exactly the single-core kernel's semantics.
            return [getattr(self.local, method)(*args) for method, args in calls]
        except ZeroDivisionError:
            # Re-run in this process so the error names the index within the whole batch.
            return [getattr(self.local, method)(*args) for method, args in calls]
        out = []
        for method, args, chunks in planned:
            if chunks is None:
                out.append(getattr(self.local, method)(*args))
            else:
                merged: list = []
                for _ in chunks:
                    merged.extend(next(remote))
                out.append(merged)
        return out

    # -- planning: chunk argument tuples, or None to compute in this process -----------------
    def _plan_powmod(self, bases, exponents, modulus):
        count = len(bases)
        exp_bits = max((int(e).bit_length() for e in exponents), default=0)
        cost = count * exp_bits * 1.2 * _mulmod_us(int(modulus).bit_length())
        if not self._parallel(cost, count):
            return None
        b, e = list(bases), list(exponents)
        return [(b[s:t], e[s:t], modulus) for s, t in _split(count, self._parts(cost, count))]

    def _plan_powmod_same_exponent(self, bases, exponent, modulus):
        count = len(bases)
        cost = count * int(exponent).bit_length() * 1.2 * _mulmod_us(int(modulus).bit_length())
        if not self._parallel(cost, count):
            return None
        b = list(bases)
        return [(b[s:t], exponent, modulus) for s, t in _split(count, self._parts(cost, count))]

    def _plan_fixed_base_powmod(self, specs, exponents, multipliers, modulus):
        count = int(exponents[0].shape[0]) if len(exponents) else 0
        mod_bits = int(modulus).bit_length()
        windows = 0
        for spec, exps in zip(specs, exponents):
            windows += significant_windows(exps, choose_window(spec.exponent_bits, mod_bits))
        cost = count * windows * _mulmod_us(mod_bits)
        if not self._parallel(cost, count):
            return None
        mult = None if multipliers is None else list(multipliers)
        return [(list(specs), [e[s:t] for e in exponents], None if mult is None else mult[s:t], modulus)
                for s, t in _split(count, self._parts(cost, count))]

    def _plan_horner(self, columns, shift_bits, modulus):
        count = len(columns[0]) if len(columns) else 0
        cost = count * max(len(columns) - 1, 0) * int(shift_bits) * 1.2 * _mulmod_us(int(modulus).bit_length())
        if not self._parallel(cost, count):
            return None
        cols = [list(c) for c in columns]
        return [([c[s:t] for c in cols], shift_bits, modulus) for s, t in _split(count, self._parts(cost, count))]

    def _plan_horner_multiexp(self, bases, exponents, shift_bits, modulus):
        groups = len(bases[0][0]) if bases and bases[0] else 0
        slots = len(bases[0]) if bases else 0
        cost = groups * slots * (int(shift_bits) + 64) * 1.1 * _mulmod_us(int(modulus).bit_length())
        if not self._parallel(cost, groups):
            return None
        rows = [[list(col) for col in per_base] for per_base in bases]
        exps = [[list(col) for col in per_base] for per_base in exponents]
        return [([[c[s:t] for c in per_base] for per_base in rows], [[c[s:t] for c in per_base] for per_base in exps],
                 shift_bits, modulus) for s, t in _split(groups, self._parts(cost, groups))]

    def _plan_mulmod(self, a, b, modulus):
        return None  # a product costs about as much as moving its operands to a worker and back

    def _plan_invert(self, values, modulus):
        count = len(values)
        cost = count * 12 * _mulmod_us(int(modulus).bit_length())
        if not self._parallel(cost, count):
            return None
        v = list(values)
        return [(v[s:t], modulus) for s, t in _split(count, self._parts(cost, count))]

    def _plan_prod_rows(self, values, indices, indptr, modulus):
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        rows = len(indptr) - 1
        nnz = int(indptr[-1] - indptr[0]) if rows > 0 else 0
        cost = nnz * _mulmod_us(int(modulus).bit_length())
        if not self._parallel(cost, rows):
            return None
        vals = values if isinstance(values, list) else list(values)
        # Split rows so each chunk has about the same number of non-zeros, and ship each
        # chunk only the values its rows reference.
        targets = np.linspace(indptr[0], indptr[-1], self._parts(cost, rows) + 1)
        cuts = np.searchsorted(indptr, targets[1:-1]).tolist()
        bounds = sorted(set([0] + [min(max(c, 0), rows) for c in cuts] + [rows]))
        chunks = []
        for r0, r1 in zip(bounds[:-1], bounds[1:]):
            lo, hi = int(indptr[r0]), int(indptr[r1])
            used, local_idx = np.unique(indices[lo:hi], return_inverse=True)
            sub_vals = [vals[i] for i in used.tolist()]
            chunks.append((sub_vals, local_idx.astype(np.int64), indptr[r0:r1 + 1] - lo, modulus))
        return chunks


def shutdown_pool() -> None:
    """Stop the worker processes (they restart on the next parallel call)."""
    _POOL.reset()
