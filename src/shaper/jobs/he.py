"""``shaper demo-he``: a tour of the additive-HE engine on a SHAPER-style workload.

Party B encrypts a weight vector under its own key; party A, holding a sparse 0/1 feature matrix
(one-hot style, as in the SHAPER workload), computes X @ Enc(w) without seeing w, adds its
per-row offsets, and packs the results so B decrypts few ciphertexts. Every result is checked
against numpy, and the timings are printed per operation.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..crypto import ou, pack, paillier
from ..crypto.prg import default_prg
from ..kernels import get_kernel, workers
from .report import write_json


def _synthetic(rows: int, cols: int, density: float) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    prg = default_prg()  # demo data; any generator would do
    nnz = max(1, int(rows * cols * density))
    r = (prg.uint64(nnz) % rows).astype(np.int64)
    c = (prg.uint64(nnz) % cols).astype(np.int64)
    X = sp.csr_matrix((np.ones(nnz, dtype=np.int64), (r, c)), shape=(rows, cols))
    X.data[:] = 1  # duplicates summed above: back to 0/1
    w = (prg.uint64(cols) % 2001).astype(np.int64) - 1000
    offsets = (prg.uint64(rows) % 101).astype(np.int64) - 50
    return X, w, offsets


def run(key_bits: int = 2048, scheme: str = "paillier", rows: int = 2000, cols: int = 300,
        density: float = 0.01, json_path: str | None = None, console: Console | None = None) -> dict[str, Any]:
    console = console or Console()
    console.print(f"[bold]shaper {__version__}[/bold] additive-HE demo: {scheme} {key_bits}-bit, "
                  f"kernel {get_kernel().name} on {workers()} worker(s)")
    timings: list[tuple[str, float, int]] = []

    def step(label: str, count: int, fn):
        with console.status(f"{label} ({count} values) ..."):
            t0 = time.perf_counter()
            result = fn()
            seconds = time.perf_counter() - t0
        timings.append((label, seconds, count))
        console.print(f"  [green]✓[/green] {label}: {seconds:.2f} s")
        return result

    module = paillier if scheme == "paillier" else ou
    pk, sk = step("B generates its key pair", 1, lambda: module.keygen(key_bits))
    X, w, offsets = _synthetic(rows, cols, density)
    expected = X @ w + offsets

    enc_w = step("B encrypts its weights (key-owner path)", cols, lambda: sk.encrypt(w))
    enc_z = step(f"A: X @ Enc(w), sparse {X.shape[0]}x{X.shape[1]}, {X.nnz} non-zeros", X.nnz, lambda: X @ enc_w)
    enc_z = step("A adds its offsets (ciphertext + plaintext)", rows, lambda: enc_z + offsets)
    enc_z = step("A re-randomises before sending (first use builds its table)", rows,
                 lambda: enc_z.rerandomize())
    bound_bits = int(np.abs(expected).max()).bit_length() + 1
    packed = step(f"A packs {bound_bits}-bit results", rows, lambda: pack(enc_z, bound_bits))
    wire_bytes = len(packed.to_bytes())
    plain_bytes = len(enc_z.to_bytes())
    out = step(f"B decrypts {packed.ciphertext_count} packed ciphertexts", rows, lambda: sk.decrypt(packed))
    correct = bool(np.array_equal(out, expected))

    table = Table(title="per-operation cost", show_lines=False)
    table.add_column("step")
    table.add_column("seconds", justify="right")
    table.add_column("µs per value", justify="right")
    for label, seconds, count in timings:
        table.add_row(label, f"{seconds:.3f}", f"{seconds / count * 1e6:.1f}")
    console.print(table)
    console.print(f"traffic A->B: {wire_bytes / 1024:.1f} KiB packed ({packed.layout.slots} values per "
                  f"ciphertext) instead of {plain_bytes / 1024:.1f} KiB unpacked")
    total = sum(seconds for _, seconds, _ in timings)
    console.print(f"result equals numpy's X @ w + offsets: [bold]{'yes' if correct else 'NO'}[/bold]"
                  f"  (total {total:.1f} s)")

    summary = {
        "scheme": scheme, "key_bits": key_bits, "rows": rows, "cols": cols, "nnz": int(X.nnz),
        "correct": correct, "workers": workers(), "seconds": round(sum(t for _, t, _ in timings), 3), "packed_bytes": wire_bytes, "unpacked_bytes": plain_bytes,
        "slots_per_ciphertext": packed.layout.slots,
        "steps": [{"step": label, "seconds": round(s, 4), "count": c} for label, s, c in timings],
    }
    if json_path:
        console.print(f"wrote the figures to {write_json(json_path, summary)}")
    if not correct:
        raise SystemExit("demo result mismatch")
    return summary
