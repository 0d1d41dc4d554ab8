#!/usr/bin/env python
"""RNS-CKKS benchmark: shaper's own engine (``shaper.crypto.ckks``, 1 and 2 native threads) next
to Microsoft SEAL (through TenSEAL's ``tenseal.sealapi`` bindings), one run.

Parameters (defaults): N = 2^14, coefficient modulus chain [60, 53 x 6, 60] bits (the last prime
is the key-switching special prime, so a fresh ciphertext has 7 limbs; shaper picks the same
primes as SEAL), scale 2^53, 128-bit security (HE standard), 8192 real slots filled with uniform
random values in [-1, 1].

Columns: ``shaper 1T`` (native RNS kernels, ``shaper._native.set_threads(1)``, process pinned to
one CPU), ``shaper 2T`` (``set_threads(2)``, two CPUs; the same objects, only the pool changes),
``SEAL 1T`` (SEAL's evaluator is single-threaded for every operation timed here; pinned to one
CPU), then ``SEAL/shaper`` (SEAL 1T over shaper 1T: > 1 means shaper is faster or smaller) and
``1T/2T`` (shaper's two-thread speedup). OpenFHE (``openfhe``) is tried and reported as skipped,
with the import error, where it does not import.

Timing: every configuration is set up once (keys, ciphertexts), then each operation is warmed up
once per configuration and timed ``--reps`` times, the configurations taking turns sample by
sample (shaper 1T, shaper 2T, SEAL, shaper 1T, ...) so drifts of a shared machine hit all of them
alike. One sample is the mean over an inner loop long enough to take >= 100 ms; the table shows
the median sample, the JSON also the minimum (the quiet-machine figure) and every sample. Before
timing the script waits (``--wait-quiet``) for compilers and test runs (rustc, cargo, maturin,
pytest) to finish and for no other process to use more than 10% of a CPU, and records in the
JSON meta whether the machine was quiet (other processes' CPU use is watched per operation).

Rows (ms per operation unless stated):
  ntt_forward / _inverse  one limb-NTT (60-bit prime q_0, N = 2^14) in place, µs per call
                       (``params.context.ntt(a, [0])``, Python call included); SEAL: its NTT is not
                       reachable through TenSEAL's bindings ('-')
  encode               8192 doubles -> plaintext at the top level (SEAL: a Python list built
                       beforehand; shaper: a numpy array)
  encrypt              public-key encryption (both: over Q p, divided by p)
  encrypt_secret       secret-key (symmetric) encryption (SEAL: ``encrypt_symmetric``)
  add                  ciphertext + ciphertext (SEAL: ``add_inplace`` into an accumulator; shaper
                       has no in-place form: a new ciphertext each time)
  multiply_plain       ciphertext x plaintext (no rescale), out of place
  multiply             ciphertext x ciphertext, tensor product only (size-3 result)
  relinearize          size-3 -> size-2 key switch with the relinearization key
  rescale              drop the last 53-bit prime with rounding (SEAL: ``rescale_to_next``)
  mul_relin_rescale    the three above in a row (shaper: ``Evaluator.mul_rescale``)
  rotate_1             rotation by one slot
  rotate_23            rotations of one ciphertext by 23 steps (1 2 4 8 14 15 16 32 64 128 256
                       384 512 640 768 896 1024 2048 4096 -1 -2 -4 -8): shaper hoisted
                       (``rotate_many``: one decomposition), SEAL 23 ``rotate_vector`` calls (its
                       API has no hoisting); at smaller N the steps >= N/2 are left out and the
                       row is named by the count
  rotate_23_separate   shaper: 23 ``rotate`` calls (no hoisting); SEAL: the rotate_23 samples again
  conjugate            complex conjugation
  decrypt / decode     decryption of a fresh ciphertext / decoding to 8192 doubles (SEAL:
                       ``decode_double`` to a Python list; shaper: a numpy array)
  decrypt_decode       both
  keygen_secret_public secret key + public key
  keygen_relin         relinearization key
  keygen_galois_1      one Galois (rotation) key
  size_*_bytes         serialized sizes, uncompressed. shaper (``ckks.to_bytes``): keys store
                       their uniform polynomials as a 32-byte seed, so do fresh secret-key
                       ciphertexts (``size_ct_sk``); a fresh public-key ciphertext is full.
                       SEAL: its uncompressed format (compr_mode none) computed from its layout
                       and ``*_zstd`` as SEAL saves them (its default compression; TenSEAL's
                       bindings cannot choose another mode); SEAL's seeded public key,
                       key-switching keys and symmetric ciphertexts are not reachable through
                       TenSEAL's bindings, so every SEAL size is of the full (unseeded) object.
                       ``galois_24``: the 23 rotation keys + the conjugation key
  precision_*_bits     -log2 of the mean absolute slot error against numpy (real parts), and
                       ``*_worst_bits``: -log2 of the largest: fresh (encode + encrypt +
                       decrypt + decode) and after one multiply + relinearize + rescale

Usage:

  python benchmarks/ckks.py                       # all columns, table
  python benchmarks/ckks.py --json benchmarks/results/ckks.json
  python benchmarks/ckks.py --quick               # few short samples, a smoke run
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from meta import cpu_model, write_json

ROTATION_STEPS = [1, 2, 4, 8, 14, 15, 16, 32, 64, 128, 256, 384, 512, 640, 768, 896, 1024, 2048, 4096,
                  -1, -2, -4, -8]
DEFAULT_BITS = [60, 53, 53, 53, 53, 53, 53, 60]
MIN_SAMPLE_S = 0.1  # one timing sample runs the operation at least this long (inner loop)
SEED = 2024
US_ROWS = {"ntt_forward", "ntt_inverse"}  # timed in µs


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The two slot vectors every implementation encrypts (the same numbers for all)."""
    rng = np.random.default_rng(SEED)
    return rng.uniform(-1, 1, n // 2), rng.uniform(-1, 1, n // 2)


def _steps(n: int) -> list[int]:
    return [r for r in ROTATION_STEPS if abs(r) < n // 2]  # all 23 from N = 2^14 up


def _precision(got, want: np.ndarray) -> tuple[float, float]:
    """(-log2 mean |error|, -log2 max |error|) over the slots (real parts)."""
    err = np.abs(np.asarray(got, dtype=np.float64) - want)
    return -math.log2(float(err.mean())), -math.log2(float(err.max()))


@dataclass
class Column:
    """One configuration: timed operations (callables) and untimed rows (sizes, precision)."""

    name: str
    label: str
    threads: int
    cpus: set[int]
    ops: dict[str, Callable[[], object]]
    static: dict[str, float]
    check: Callable[[], None]  # correctness of the objects the timed operations produced
    native_threads: int | None = None  # shaper: the native pool size to set before each sample
    samples: dict[str, list[float]] = field(default_factory=dict)  # ms

    def enter(self) -> None:
        _pin(self.cpus)
        if self.native_threads is not None:
            import shaper._native as nat

            if nat.threads() != self.native_threads:
                nat.set_threads(self.native_threads)
            _pin(self.cpus)  # the new pool's threads too


def _pin(cpus: set[int]) -> None:
    """Every thread of this process onto ``cpus`` (``sched_setaffinity(0)`` moves only the
    calling thread; threads started later inherit the creating thread's mask)."""
    if not hasattr(os, "sched_setaffinity"):
        return
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that just exited
            pass


# -- quiet machine -------------------------------------------------------------------------------
BUSY_EXES = {"rustc", "cargo", "maturin", "pytest", "py.test"}


def busy_processes() -> list[str]:
    """Command lines of other processes that load the CPUs in bursts (compilers, test runs)."""
    out = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            continue
        if not argv:
            continue
        exe = os.path.basename(argv[0])
        is_python = exe.startswith("python")
        if exe in BUSY_EXES or (is_python and ("pytest" in argv[1:3] or any(
                os.path.basename(a) in BUSY_EXES for a in argv[1:2]))):
            out.append(f"{pid} " + " ".join(argv)[:120])
    return out


def cpu_ticks() -> dict[int, tuple[int, str]]:
    """utime + stime (clock ticks) and name of every other process (from /proc/PID/stat)."""
    out = {}
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(pid)] = (int(fields[11]) + int(fields[12]), name)
    return out


def cpu_hogs(before: dict, after: dict, seconds: float, share: float = 0.1) -> list[str]:
    """Other processes that used more than ``share`` of a CPU between two ``cpu_ticks``."""
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out = []
    for pid, (ticks, name) in after.items():
        spent = ticks - before.get(pid, (ticks, name))[0]
        used = spent / hz / max(seconds, 1e-3)
        if used > share and spent >= 5:  # 5 ticks: not one scheduler blip in a short window
            out.append(f"{pid} {name} ({used:.0%} of a CPU)")
    return out


def machine_busy(window: float = 2.0) -> list[str]:
    """Compilers/test runs by name, and any other process using > 10% of a CPU over ``window``."""
    t0, before = time.monotonic(), cpu_ticks()
    time.sleep(window)
    return busy_processes() + cpu_hogs(before, cpu_ticks(), time.monotonic() - t0)


def wait_quiet(seconds: float, settle: int = 4) -> list[str]:
    """Waits up to ``seconds`` for machine_busy() to be empty ``settle`` times in a row (about
    8 s: a build that pauses between steps is not taken for a quiet machine); returns what was
    busy at the last check (empty: quiet)."""
    deadline = time.monotonic() + seconds
    busy, calm, told = machine_busy(), 0, False
    while time.monotonic() < deadline:
        calm = 0 if busy else calm + 1
        if calm >= settle:
            break
        if busy and not told:
            print(f"waiting up to {seconds:.0f} s for a quiet machine: {busy}", file=sys.stderr, flush=True)
            told = True
        busy = machine_busy()
    return busy


def parallel_capacity(cpus: list[int], seconds: float = 0.5) -> float | None:
    """Throughput of one spinning process per CPU of ``cpus[:2]`` over that of one alone (2.0:
    two real CPUs; 1.0: the second CPU adds nothing, e.g. two vCPUs sharing one core)."""
    if len(cpus) < 2 or not hasattr(os, "sched_setaffinity"):
        return None
    code = ("import os, sys, time\n"
            "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
            "t = time.perf_counter(); x = 0\n"
            f"while time.perf_counter() - t < {seconds}: x += 1\n"
            "print(x)\n")

    def spin(which: list[int]) -> int:
        procs = [subprocess.Popen([sys.executable, "-c", code, str(c)], stdout=subprocess.PIPE, text=True)
                 for c in which]
        return sum(int(p.communicate()[0]) for p in procs)

    return statistics.median(spin(cpus[:2]) / spin(cpus[:1]) for _ in range(3))


# -- timing --------------------------------------------------------------------------------------
def time_interleaved(columns: list[Column], reps: int, min_sample_s: float = MIN_SAMPLE_S,
                     busy_seen: set[str] | None = None) -> None:
    """Fills ``column.samples[op]`` (ms per call) for every op; columns take turns per sample."""
    ops = list(dict.fromkeys(op for col in columns for op in col.ops))
    for op in ops:
        cols = [c for c in columns if op in c.ops]
        if busy_seen is not None:
            busy_seen.update(busy_processes())
            t_op, ticks = time.monotonic(), cpu_ticks()
        print(f"  {op} ...", file=sys.stderr, flush=True)
        inner = {}
        for col in cols:
            col.enter()
            fn = col.ops[op]
            fn()  # warm-up
            t0 = time.perf_counter()
            fn()
            once = time.perf_counter() - t0
            inner[col.name] = max(1, math.ceil(min_sample_s / max(once, 1e-7)))
        for _ in range(reps):
            for col in cols:
                col.enter()
                fn, k = col.ops[op], inner[col.name]
                t0 = time.perf_counter()
                for _ in range(k):
                    fn()
                col.samples.setdefault(op, []).append((time.perf_counter() - t0) / k * 1e3)
        if busy_seen is not None:
            busy_seen.update(f"{hog} during {op}" for hog in cpu_hogs(ticks, cpu_ticks(), time.monotonic() - t_op))


# -- shaper (shaper.crypto.ckks) ------------------------------------------------------------------
def _near(dec: Callable, bad: list[str]) -> Callable:
    """A result check that records, in ``bad``, results off by more than ``tol`` (a sanity bound:
    a wrong result is off by ~1; precision is a row of its own)."""
    def near(what: str, ct: Any, want: np.ndarray, tol: float = 1e-3) -> None:
        err = float(np.abs(dec(ct) - want).max())
        if not err < tol:
            bad.append(f"{what}: max error {err:.3g}")
    return near


def shaper_available() -> str | None:
    """None when shaper's CKKS runs on the native kernels here, else why not."""
    try:
        import shaper._native as nat  # noqa: F401
        from shaper.crypto import ckks
    except ImportError as exc:
        return f"shaper or its native extension does not import: {exc}"
    params = ckks.Parameters.from_literal(1024, [27], 27, 20, insecure=True)
    if type(params.context).__module__ != "shaper._native":
        return f"the RNS kernels are the numpy reference ({type(params.context).__name__}), not native"
    return None


def shaper_setup(n: int, bits: list[int], scale_bits: int) -> tuple[dict, dict, Callable[[], None]]:
    """shaper's timed operations, untimed rows and correctness check (see the module doc)."""
    from shaper.crypto import ckks

    params = ckks.Parameters.from_literal(n, bits[:-1], bits[-1], scale_bits)
    ctx = params.context
    steps = _steps(n)
    x, y = _inputs(n)
    ops: dict[str, Callable[[], object]] = {}
    static: dict[str, float] = {}

    rng = np.random.default_rng(SEED)
    fwd = rng.integers(0, params.primes[0], (1, n), dtype=np.uint64)
    inv = rng.integers(0, params.primes[0], (1, n), dtype=np.uint64)
    ops["ntt_forward"] = lambda: ctx.ntt(fwd, [0])
    ops["ntt_inverse"] = lambda: ctx.intt(inv, [0])

    keys = ckks.KeySet(params, rotations=steps, conjugation=True)
    enc = ckks.Encoder(params)
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    px, py = enc.encode(x), enc.encode(y)
    cx, cy = ckks.encrypt(keys.public, px), ckks.encrypt(keys.public, py)
    c3 = ev.mul(cx, cy, relinearize=False)
    c2 = ev.relinearize(c3)
    out: dict[str, object] = {}

    def keep(name, fn):
        def run():
            out[name] = fn()
        return run

    ops["encode"] = lambda: enc.encode(x)
    ops["encrypt"] = keep("ct", lambda: ckks.encrypt(keys.public, px))
    ops["encrypt_secret"] = keep("ct_sk", lambda: ckks.encrypt(keys.secret, px))
    ops["add"] = keep("add", lambda: ev.add(cx, cy))
    ops["multiply_plain"] = keep("mul_plain", lambda: ev.mul_plain(cx, py))
    ops["multiply"] = keep("mul", lambda: ev.mul(cx, cy, relinearize=False))
    ops["relinearize"] = keep("relin", lambda: ev.relinearize(c3))
    ops["rescale"] = keep("rescale", lambda: ev.rescale(c2))
    ops["mul_relin_rescale"] = keep("mrr", lambda: ev.mul_rescale(cx, cy))
    ops["rotate_1"] = keep("rot1", lambda: ev.rotate(cx, 1))
    ops[f"rotate_{len(steps)}"] = keep("rots", lambda: ev.rotate_many(cx, steps))
    ops[f"rotate_{len(steps)}_separate"] = keep("rots_sep", lambda: {s: ev.rotate(cx, s) for s in steps})
    ops["conjugate"] = keep("conj", lambda: ev.conjugate(cx))
    pt = ckks.decrypt(keys.secret, cx)
    ops["decrypt"] = lambda: ckks.decrypt(keys.secret, cx)
    ops["decode"] = lambda: enc.decode(pt)
    ops["decrypt_decode"] = lambda: enc.decode(ckks.decrypt(keys.secret, cx))
    ops["keygen_secret_public"] = lambda: ckks.public_key(ckks.SecretKey.generate(params))
    ops["keygen_relin"] = lambda: ckks.relin_key(keys.secret)
    g1 = ckks.galois_element(params, 1)
    ops["keygen_galois_1"] = lambda: ckks.galois_key(keys.secret, g1)

    def dec(ct):
        return enc.decode(ckks.decrypt(keys.secret, ct))

    # precision (a fresh encryption, and the product of two) and sizes, untimed
    static["precision_fresh_bits"], static["precision_fresh_worst_bits"] = _precision(dec(cx), x)
    static["precision_mul_bits"], static["precision_mul_worst_bits"] = _precision(dec(ev.mul_rescale(cx, cy)), x * y)
    static["size_pk_bytes"] = len(ckks.to_bytes(keys.public))
    static["size_relin_bytes"] = len(ckks.to_bytes(keys.relin))
    static["size_galois_1_bytes"] = len(ckks.to_bytes(keys.galois[g1]))
    static[f"size_galois_{len(keys.galois)}_bytes"] = sum(len(ckks.to_bytes(k)) for k in keys.galois.values())
    static["size_ct_bytes"] = len(ckks.to_bytes(cx))
    static["size_ct_sk_bytes"] = len(ckks.to_bytes(ckks.encrypt(keys.secret, px)))

    def check() -> None:
        bad: list[str] = []
        near = _near(dec, bad)

        near("encrypt", out["ct"], x)
        near("encrypt_secret", out["ct_sk"], x)
        near("add", out["add"], x + y)
        near("multiply_plain", ev.rescale(out["mul_plain"]), x * y)
        near("multiply", ev.rescale(ev.relinearize(out["mul"])), x * y)
        near("relinearize", ev.rescale(out["relin"]), x * y)
        near("rescale", out["rescale"], x * y)
        near("mul_relin_rescale", out["mrr"], x * y)
        near("rotate_1", out["rot1"], np.roll(x, -1))
        for s in steps:
            near(f"rotate_many {s}", out["rots"][s], np.roll(x, -s))
            if not np.array_equal(out["rots"][s].data, out["rots_sep"][s].data):
                bad.append(f"rotate_many({s}) differs from rotate({s})")
        near("conjugate", out["conj"], x)
        if bad:
            raise AssertionError("shaper CKKS results wrong: " + "; ".join(bad))

    return ops, static, check


# -- SEAL (tenseal.sealapi) ----------------------------------------------------------------------
def seal_available() -> str | None:
    """None when SEAL can run here (tenseal installed, CKKS context builds), else why not."""
    try:
        import tenseal.sealapi as seal
    except ImportError:
        return "tenseal is not installed (pip install tenseal)"
    try:
        parms = seal.EncryptionParameters(seal.SCHEME_TYPE.CKKS)
        parms.set_poly_modulus_degree(4096)
        parms.set_coeff_modulus(seal.CoeffModulus.Create(4096, [40, 20, 40]))
        ctx = seal.SEALContext(parms, True, seal.SEC_LEVEL_TYPE.TC128)
        if not ctx.parameters_set():
            return f"SEAL rejects a CKKS context: {ctx.parameters_error_message()}"
    except Exception as exc:  # noqa: BLE001 (a broken build of the bindings, whatever it raises)
        return f"tenseal.sealapi does not work: {exc!r}"
    return None


def seal_galois_elt(step: int, n: int) -> int:
    """SEAL's Galois element for a left rotation by ``step`` slots (generator 3; 0: conjugation).

    ``KeyGenerator.create_galois_keys`` takes a list of Galois *elements* when every entry is
    >= 0 (pybind picks the ``vector<uint32_t>`` overload first), so pass these, not steps."""
    if step == 0:
        return 2 * n - 1
    if not -n // 2 < step < n // 2:
        raise ValueError(f"rotation step {step} out of range for N = {n}")
    return pow(3, step if step > 0 else n // 2 + step, 2 * n)


def _seal_context(n: int, bits: list[int]):
    import tenseal.sealapi as seal

    parms = seal.EncryptionParameters(seal.SCHEME_TYPE.CKKS)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus(seal.CoeffModulus.Create(n, bits))
    ctx = seal.SEALContext(parms, True, seal.SEC_LEVEL_TYPE.TC128)
    if not ctx.parameters_set():
        raise ValueError(f"SEAL rejects N = {n}, bits = {bits}: {ctx.parameters_error_message()}")
    return parms, ctx


def _saved_size(obj) -> int:
    """Bytes of ``obj.save`` (SEAL's default compression, zstd)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "obj.seal")
        obj.save(path)
        return os.path.getsize(path)


# Uncompressed (compr_mode none) SEAL serialisation: a 16-byte SEALHeader; a Ciphertext adds
# parms_id (32) + is_ntt_form (1) + size, N, limbs (3 x 8) + scale (8) + correction_factor (8)
# + its DynArray (16-byte header + 8-byte count + 8 bytes per coefficient): 113 + 8 * words.
# A PublicKey is a Ciphertext at the key level. KSwitchKeys (relin, Galois): header (16) +
# parms_id (32) + outer count (8) + per outer slot a count (8) + its keys, each a PublicKey
# with its own header. GaloisKeys have N outer slots (index (g - 1) / 2), RelinKeys one.
def _ct_bytes_none(size: int, limbs: int, n: int) -> int:
    return 113 + 8 * size * limbs * n


def _kswitch_bytes_none(n: int, data_limbs: int, keys: int, outer: int) -> int:
    key_limbs = data_limbs + 1
    return 16 + 32 + 8 + 8 * outer + keys * data_limbs * _ct_bytes_none(2, key_limbs, n)


def seal_setup(n: int, bits: list[int], scale_bits: int) -> tuple[dict, dict, Callable[[], None]]:
    """SEAL's timed operations, untimed rows and correctness check (see the module doc)."""
    import tenseal.sealapi as seal

    _, ctx = _seal_context(n, bits)
    scale = 2.0**scale_bits
    data_limbs = len(bits) - 1  # the last prime is the special (key-switching) prime
    x, y = _inputs(n)
    xl, yl = x.tolist(), y.tolist()
    steps = _steps(n)
    ops: dict[str, Callable[[], object]] = {}
    static: dict[str, float] = {}

    def keygen():
        kg_ = seal.KeyGenerator(ctx)
        pk_ = seal.PublicKey()
        kg_.create_public_key(pk_)

    ops["keygen_secret_public"] = keygen
    kg = seal.KeyGenerator(ctx)
    sk = kg.secret_key()
    pk = seal.PublicKey()
    kg.create_public_key(pk)
    rlk = seal.RelinKeys()
    kg.create_relin_keys(rlk)
    rlk_t = seal.RelinKeys()
    ops["keygen_relin"] = lambda: kg.create_relin_keys(rlk_t)
    one = seal.GaloisKeys()
    ops["keygen_galois_1"] = lambda: kg.create_galois_keys([seal_galois_elt(1, n)], one)
    gk = seal.GaloisKeys()
    kg.create_galois_keys([seal_galois_elt(r, n) for r in steps + [0]], gk)

    encoder = seal.CKKSEncoder(ctx)
    encryptor = seal.Encryptor(ctx, pk)
    encryptor.set_secret_key(sk)
    decryptor = seal.Decryptor(ctx, sk)
    ev = seal.Evaluator(ctx)
    px, py, pt_t = seal.Plaintext(), seal.Plaintext(), seal.Plaintext()
    encoder.encode(xl, scale, px)
    encoder.encode(yl, scale, py)
    ops["encode"] = lambda: encoder.encode(xl, scale, pt_t)
    cx, cy, ce, cs = seal.Ciphertext(), seal.Ciphertext(), seal.Ciphertext(), seal.Ciphertext()
    encryptor.encrypt(px, cx)
    encryptor.encrypt(py, cy)
    ops["encrypt"] = lambda: encryptor.encrypt(px, ce)
    ops["encrypt_secret"] = lambda: encryptor.encrypt_symmetric(px, cs)

    acc = seal.Ciphertext()
    ev.add(cx, cy, acc)
    ops["add"] = lambda: ev.add_inplace(acc, cy)
    cp = seal.Ciphertext()
    ops["multiply_plain"] = lambda: ev.multiply_plain(cx, py, cp)
    c3 = seal.Ciphertext()
    ev.multiply(cx, cy, c3)
    c3_t = seal.Ciphertext()
    ops["multiply"] = lambda: ev.multiply(cx, cy, c3_t)
    c2 = seal.Ciphertext()
    ev.relinearize(c3, rlk, c2)
    c2_t = seal.Ciphertext()
    ops["relinearize"] = lambda: ev.relinearize(c3, rlk, c2_t)
    cr = seal.Ciphertext()
    ops["rescale"] = lambda: ev.rescale_to_next(c2, cr)

    cm = seal.Ciphertext()

    def mul_relin_rescale():
        ev.multiply(cx, cy, cm)
        ev.relinearize_inplace(cm, rlk)
        ev.rescale_to_next_inplace(cm)

    ops["mul_relin_rescale"] = mul_relin_rescale
    rot = seal.Ciphertext()
    ops["rotate_1"] = lambda: ev.rotate_vector(cx, 1, gk, rot)
    rots = [seal.Ciphertext() for _ in steps]

    def rotate_all():
        for step, dst in zip(steps, rots):
            ev.rotate_vector(cx, step, gk, dst)

    ops[f"rotate_{len(steps)}"] = rotate_all
    conj = seal.Ciphertext()
    ops["conjugate"] = lambda: ev.complex_conjugate(cx, gk, conj)

    pt = seal.Plaintext()
    decryptor.decrypt(cx, pt)
    pt_d = seal.Plaintext()
    ops["decrypt"] = lambda: decryptor.decrypt(cx, pt_d)
    ops["decode"] = lambda: encoder.decode_double(pt)

    def dec(ct):
        p = seal.Plaintext()
        decryptor.decrypt(ct, p)
        return np.array(encoder.decode_double(p))

    ops["decrypt_decode"] = lambda: dec(cx)

    static["precision_fresh_bits"], static["precision_fresh_worst_bits"] = _precision(dec(cx), x)
    mul_relin_rescale()
    static["precision_mul_bits"], static["precision_mul_worst_bits"] = _precision(dec(cm), x * y)
    static["size_pk_bytes"] = _ct_bytes_none(2, data_limbs + 1, n)
    static["size_pk_zstd_bytes"] = _saved_size(pk)
    static["size_relin_bytes"] = _kswitch_bytes_none(n, data_limbs, keys=1, outer=1)
    static["size_relin_zstd_bytes"] = _saved_size(rlk)
    kg.create_galois_keys([seal_galois_elt(1, n)], one)
    static["size_galois_1_bytes"] = _kswitch_bytes_none(n, data_limbs, keys=1, outer=n)
    static["size_galois_1_zstd_bytes"] = _saved_size(one)
    nkeys = len(steps) + 1  # the rotations + conjugation
    static[f"size_galois_{nkeys}_bytes"] = _kswitch_bytes_none(n, data_limbs, keys=nkeys, outer=n)
    static[f"size_galois_{nkeys}_zstd_bytes"] = _saved_size(gk)
    static["size_ct_bytes"] = _ct_bytes_none(2, data_limbs, n)
    static["size_ct_zstd_bytes"] = _saved_size(cx)
    encryptor.encrypt_symmetric(px, cs)
    static["size_ct_sk_bytes"] = _ct_bytes_none(2, data_limbs, n)  # TenSEAL: not seeded
    static["size_ct_sk_zstd_bytes"] = _saved_size(cs)

    def check() -> None:
        bad: list[str] = []
        near = _near(dec, bad)

        near("encrypt", ce, x)
        near("encrypt_secret", cs, x)
        near("rescale", cr, x * y)
        near("mul_relin_rescale", cm, x * y)
        near("rotate_1", rot, np.roll(x, -1))
        for step, dst in zip(steps, rots):
            near(f"rotate_vector {step}", dst, np.roll(x, -step))
        near("conjugate", conj, x)
        if bad:
            raise AssertionError("SEAL results wrong: " + "; ".join(bad))

    return ops, static, check


def seal_rows(n: int = 2**14, bits: list[int] | None = None, scale_bits: int = 53,
              reps: int = 7, samples: dict[str, list[float]] | None = None) -> dict[str, float]:
    """SEAL's CKKS rows alone: ms per operation (median), sizes in bytes, precision in bits (see
    the module doc). ``samples``, when given, receives every timing sample (ms) per operation."""
    ops, static, check = seal_setup(n, list(DEFAULT_BITS if bits is None else bits), scale_bits)
    col = Column("seal", "SEAL 1T", 1, set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(),
                 ops, static, check)
    time_interleaved([col], reps)
    check()
    if samples is not None:
        samples.update(col.samples)
    return {**{op: statistics.median(v) for op, v in col.samples.items()}, **static}


def openfhe_available() -> str | None:
    try:
        import openfhe  # noqa: F401
    except Exception as exc:  # noqa: BLE001 (an ImportError, or a broken wheel's own error)
        return f"import openfhe failed: {type(exc).__name__}: {exc}"
    return "imports, but no OpenFHE column is written yet"


# -- table and JSON ------------------------------------------------------------------------------
def _unit(op: str) -> str:
    if op.endswith("_bytes"):
        return "bytes"
    if op.endswith("_bits"):
        return "bits"
    return "us" if op in US_ROWS else "ms"


def _value(col: Column, op: str) -> float | None:
    """The column's figure for ``op`` in its row unit: median sample, or the untimed value."""
    if op in col.samples:
        v = statistics.median(col.samples[op])
        return v * 1e3 if _unit(op) == "us" else v
    return col.static.get(op)


def _fmt(op: str, v: float | None) -> str:
    if v is None:
        return "-"
    unit = _unit(op)
    if unit == "bytes":
        return f"{v / 2**20:.3f} MiB"
    if unit == "bits":
        return f"{v:.1f} bits"
    if unit == "us":
        return f"{v:.1f} µs"
    return f"{v:.3f} ms" if v < 100 else f"{v:.1f} ms"


def _ratio(op: str, num: float | None, den: float | None) -> float | None:
    if num is None or den is None or not den or _unit(op) == "bits":
        return None
    return num / den


def table(columns: list[Column], title: str, notes: list[str]) -> str:
    """Markdown: one row per operation, one column per configuration, then SEAL/shaper 1T and
    shaper 1T/2T (missing cells: '-')."""
    ops = list(dict.fromkeys(op for col in columns for op in list(col.ops) + list(col.static)))
    by = {c.name: c for c in columns}
    ratios = []
    if "seal" in by and "shaper-1t" in by:
        ratios.append(("SEAL/shaper", "seal", "shaper-1t"))
    if "shaper-1t" in by and "shaper-2t" in by:
        ratios.append(("shaper 1T/2T", "shaper-1t", "shaper-2t"))
    lines = [f"**{title}**", "",
             "| operation | " + " | ".join(c.label for c in columns) + "".join(f" | {r[0]}" for r in ratios) + " |",
             "|---|" + "---:|" * (len(columns) + len(ratios))]
    for op in ops:
        vals = {c.name: _value(c, op) for c in columns}
        cells = [_fmt(op, vals[c.name]) for c in columns]
        for _, num, den in ratios:
            r = _ratio(op, vals[num], vals[den]) if not (den == "shaper-2t" and op not in by[den].samples) else None
            cells.append("-" if r is None else f"{r:.2f}x")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])


def _versions() -> dict:
    """What the shared machine block (benchmarks/meta.py) does not say: TenSEAL's version and
    which build of the native extension ran (its file, digest and build time)."""
    out: dict = {}
    try:
        out["tenseal"] = __import__("tenseal").__version__
    except (ImportError, AttributeError):
        pass
    try:
        import shaper._native as nat

        path = nat.__file__
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()[:16]
        out["shaper_native"] = {"path": os.path.relpath(path), "sha256_16": digest,
                                "mtime": datetime.datetime.fromtimestamp(os.path.getmtime(path)).isoformat(timespec="seconds")}
    except (ImportError, OSError):
        pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logn", type=int, default=14, help="log2 of the ring degree N")
    ap.add_argument("--bits", type=int, nargs="+", default=DEFAULT_BITS,
                    help="coefficient modulus chain (bits), the special prime last")
    ap.add_argument("--scale-bits", type=int, default=53)
    ap.add_argument("--reps", type=int, default=9, help="timing samples per operation and column (median shown)")
    ap.add_argument("--shaper-threads", type=int, nargs="+", default=[1, 2],
                    help="native thread counts of the shaper columns (each pinned to as many CPUs)")
    ap.add_argument("--impl", nargs="+", default=["shaper", "seal", "openfhe"], choices=["shaper", "seal", "openfhe"])
    ap.add_argument("--wait-quiet", type=float, default=300,
                    help="seconds to wait for compilers/test runs to finish before timing (0: do not wait)")
    ap.add_argument("--quick", action="store_true", help="3 short samples per operation, no waiting (smoke run)")
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = ap.parse_args()
    min_sample_s = MIN_SAMPLE_S
    if args.quick:
        args.reps, args.wait_quiet, min_sample_s = min(args.reps, 3), 0, 0.02

    n = 1 << args.logn
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    columns: list[Column] = []
    skipped: dict[str, str] = {}
    threads_before = None
    print(f"CKKS: N = 2^{args.logn}, chain {args.bits}, scale 2^{args.scale_bits}, {args.reps} reps",
          file=sys.stderr, flush=True)
    if "shaper" in args.impl:
        why = shaper_available()
        if why:
            skipped["shaper"] = why
        else:
            import shaper._native as nat

            threads_before = nat.threads()
            nat.set_threads(1)
            _pin({cpus[0]})
            print("shaper: keys and ciphertexts ...", file=sys.stderr, flush=True)
            ops, static, check = shaper_setup(n, args.bits, args.scale_bits)
            for t in args.shaper_threads:
                if t > len(cpus):
                    skipped[f"shaper-{t}t"] = f"{t} threads need {t} CPUs, this process has {len(cpus)}"
                    continue
                columns.append(Column(f"shaper-{t}t", f"shaper {t}T", t, set(cpus[:t]), ops, static, check,
                                      native_threads=t))
    if "seal" in args.impl:
        why = seal_available()
        if why:
            skipped["seal"] = why
        else:
            _pin({cpus[0]})
            print("seal: keys and ciphertexts ...", file=sys.stderr, flush=True)
            ops, static, check = seal_setup(n, args.bits, args.scale_bits)
            columns.append(Column("seal", "SEAL 1T", 1, {cpus[0]}, ops, static, check))
    if "openfhe" in args.impl:
        skipped["openfhe"] = openfhe_available() or "not run"
    for impl, why in skipped.items():
        print(f"[skip] {impl}: {why}", file=sys.stderr)
    if not columns:
        return 1

    still_busy = wait_quiet(args.wait_quiet)
    capacity = parallel_capacity(cpus)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    busy_seen: set[str] = set(still_busy)
    t_start = time.time()
    print("timing (columns interleaved) ...", file=sys.stderr, flush=True)
    time_interleaved(columns, args.reps, min_sample_s, busy_seen)
    for col in columns:  # SEAL has no hoisting: its separate rotations are its rotate_23
        rot = f"rotate_{len(_steps(n))}"
        if rot in col.samples and f"{rot}_separate" not in col.ops:
            col.samples[f"{rot}_separate"] = list(col.samples[rot])
    busy_seen.update(busy_processes())
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    for col in {id(c.check): c for c in columns}.values():
        col.enter()
        col.check()
    if threads_before is not None:
        import shaper._native as nat

        nat.set_threads(threads_before)
    _pin(set(cpus))

    quiet = not busy_seen
    notes = [f"median of {args.reps} samples per cell (each >= {min_sample_s * 1e3:.0f} ms of calls), columns "
             "interleaved sample by sample; ratios > 1: shaper faster/smaller",
             f"{cpu_model()}, {len(cpus)} CPUs; 1T columns pinned to one CPU, 2T to two"
             + ("" if capacity is None else f"; two spinning processes on two CPUs do {capacity:.2f}x the work of "
                "one (2.00: two real cores)"),
             "rotate_23: shaper hoisted (rotate_many), SEAL 23 separate rotate_vector calls; "
             "rotate_23_separate: shaper's 23 separate rotate calls (SEAL column: its rotate_23 again)",
             "sizes uncompressed; shaper keys and secret-key ciphertexts seeded, SEAL's not (TenSEAL cannot)",
             "precision: -log2 mean |error| over the 8192 slots, *_worst: -log2 max |error|"]
    notes += [f"skipped {impl}: {why}" for impl, why in skipped.items()]
    if not quiet:
        names = sorted({os.path.basename(e.split()[1]) for e in busy_seen if len(e.split()) > 1})
        notes.append(f"machine NOT quiet during the run ({len(busy_seen)} observations, JSON meta.quiet): "
                     + ", ".join(names))
    print(table(columns, f"CKKS, N = 2^{args.logn}, chain {args.bits}, scale 2^{args.scale_bits}", notes))

    if args.json:
        meta = {"versions": _versions(),
                "n": n, "bits": args.bits, "scale_bits": args.scale_bits, "slots": n // 2,
                "rotation_steps": _steps(n), "reps": args.reps, "quick": args.quick,
                "min_sample_ms": min_sample_s * 1e3,
                "statistic": "value = median over reps of the mean over an inner loop of >= min_sample_ms; "
                             "min and samples (same unit) per timed row; columns interleaved sample by sample",
                "columns": {c.name: {"label": c.label, "threads": c.threads, "cpus": sorted(c.cpus)} for c in columns},
                "shaper": "shaper.crypto.ckks on the native RNS kernels (shaper._native.RnsContext); "
                          "threads = shaper._native.set_threads",
                "seal": "Microsoft SEAL via tenseal.sealapi, single-threaded",
                "skipped": skipped,
                "two_cpu_throughput": None if capacity is None else round(capacity, 3),
                "quiet": {"quiet": quiet, "waited_up_to_s": args.wait_quiet, "busy_processes_seen": sorted(busy_seen),
                          "loadavg_before": load_before, "loadavg_after": load_after,
                          "timing_seconds": round(time.time() - t_start, 1)},
                "notes": notes}
        rows, ratios = [], []
        static_done: set[int] = set()
        for col in columns:
            for op, s in col.samples.items():
                k = 1e3 if _unit(op) == "us" else 1.0
                rows.append({"operation": op, "implementation": col.name, "threads": col.threads,
                             "value": round(statistics.median(s) * k, 4), "unit": _unit(op),
                             "min": round(min(s) * k, 4), "samples": [round(v * k, 4) for v in s]})
            if id(col.static) not in static_done:  # shaper 1T and 2T share the untimed rows
                static_done.add(id(col.static))
                impl = col.name.split("-")[0]
                for op, v in col.static.items():
                    rows.append({"operation": op, "implementation": impl, "value": round(v, 4), "unit": _unit(op)})
        by = {c.name: c for c in columns}
        for op in dict.fromkeys(r["operation"] for r in rows):
            entry = {"operation": op}
            if "seal" in by and "shaper-1t" in by:
                r = _ratio(op, _value(by["seal"], op), _value(by["shaper-1t"], op))
                if r is not None:
                    entry["seal_over_shaper_1t"] = round(r, 3)
            if "shaper-1t" in by and "shaper-2t" in by and op in by["shaper-2t"].samples:
                entry["shaper_1t_over_2t"] = round(_value(by["shaper-1t"], op) / _value(by["shaper-2t"], op), 3)
            if len(entry) > 1:
                ratios.append(entry)
        write_json(args.json, {"meta": meta, "rows": rows, "ratios": ratios})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
