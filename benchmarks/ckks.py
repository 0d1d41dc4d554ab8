#!/usr/bin/env python
"""RNS-CKKS benchmark: Microsoft SEAL (through TenSEAL's ``tenseal.sealapi`` bindings), one run.

SEAL half for now; the shaper column comes next to it later. Parameters (defaults): N = 2^14,
coefficient modulus chain [60, 53 x 6, 60] bits (the last prime is SEAL's key-switching special
prime, so a fresh ciphertext has 7 limbs), scale 2^53, 128-bit security (HE standard, TC128),
8192 real slots filled with uniform random values in [-1, 1].

SEAL's evaluator is single-threaded for every operation timed here; the process is pinned to
``--threads`` CPUs (default 1). Each operation is warmed
up once, then timed ``--reps`` times; one sample is the mean over an inner loop long enough to
take >= 100 ms, and the table shows the median sample (ms per operation). Out-of-place forms
are timed where an in-place one would change its own input (multiply_plain, multiply,
relinearize, rescale, rotate: they include SEAL's copy of the input into the destination,
a few percent at most); add is ``add_inplace`` into an accumulator. The JSON carries every
sample and the minimum too: on a shared machine the minimum is the quiet-machine figure.

Rows (ms per operation unless stated):
  encode               CKKSEncoder.encode of 8192 doubles (the Python list is built beforehand)
  encrypt              public-key encryption (Encryptor with the PublicKey)
  add                  ciphertext + ciphertext
  multiply_plain       ciphertext x plaintext (no rescale)
  multiply             ciphertext x ciphertext, tensor product only (size-3 result)
  relinearize          size-3 -> size-2 key switch with the relinearization key
  rescale              rescale_to_next (drops one 53-bit prime)
  mul_relin_rescale    the three above in a row
  rotate_1             rotate_vector by one slot
  rotate_23            23 rotate_vector calls on one ciphertext (steps 1 2 4 8 14 15 16 32 64 128
                       256 384 512 640 768 896 1024 2048 4096 -1 -2 -4 -8; SEAL's API has no
                       hoisted rotation, so each call decomposes the ciphertext again; at
                       smaller N the steps >= N/2 are left out and the row is named by the count)
  conjugate            complex_conjugate
  decrypt / decode     Decryptor.decrypt of a fresh ciphertext / decode_double to a Python list
  decrypt_decode       both
  keygen_secret_public KeyGenerator (secret key) + create_public_key
  keygen_relin         create_relin_keys
  keygen_galois_1      create_galois_keys for one Galois element
  size_*_bytes         serialized sizes: ``*_zstd`` as SEAL saves them (its default compression,
                       zstd; TenSEAL's bindings cannot choose another mode) and uncompressed
                       (compr_mode none: SEAL's format computed from its layout, checked against
                       the zstd stream decompressed); SEAL's seeded (half-size) public key,
                       key-switching keys and symmetric ciphertexts are not reachable through
                       TenSEAL's bindings, so every size is of the full (unseeded) object
  precision_*_bits     -log2 of the max slot error against numpy: fresh (encode + encrypt +
                       decrypt + decode) and after one multiply + relinearize + rescale

Usage:

  python benchmarks/ckks.py                       # SEAL rows, table
  python benchmarks/ckks.py --reps 9 --json benchmarks/results/ckks.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

ROTATION_STEPS = [1, 2, 4, 8, 14, 15, 16, 32, 64, 128, 256, 384, 512, 640, 768, 896, 1024, 2048, 4096,
                  -1, -2, -4, -8]
DEFAULT_BITS = [60, 53, 53, 53, 53, 53, 53, 60]
MIN_SAMPLE_S = 0.1  # one timing sample runs the operation at least this long (inner loop)


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


def _time_ms(fn, reps: int, samples_out: list | None = None) -> float:
    """Median over ``reps`` samples of ms per call; each sample loops >= MIN_SAMPLE_S.
    Every sample is appended to ``samples_out`` when given."""
    t0 = time.perf_counter()
    fn()  # warm-up, also sizes the inner loop
    once = time.perf_counter() - t0
    inner = max(1, int(MIN_SAMPLE_S / max(once, 1e-6)))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e3)
    if samples_out is not None:
        samples_out.extend(samples)
    return statistics.median(samples)


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


def seal_rows(n: int = 2**14, bits: list[int] | None = None, scale_bits: int = 53,
              reps: int = 7, samples: dict[str, list[float]] | None = None) -> dict[str, float]:
    """SEAL's CKKS rows: ms per operation (median), sizes in bytes, precision in bits (see the
    module doc). ``samples``, when given, receives every timing sample (ms) per operation."""
    import tenseal.sealapi as seal

    bits = list(DEFAULT_BITS if bits is None else bits)
    _, ctx = _seal_context(n, bits)
    slots = n // 2
    scale = 2.0**scale_bits
    data_limbs = len(bits) - 1  # the last prime is the special (key-switching) prime
    rng = np.random.default_rng(2024)
    x = rng.uniform(-1, 1, slots)
    y = rng.uniform(-1, 1, slots)
    xl, yl = x.tolist(), y.tolist()
    steps = [r for r in ROTATION_STEPS if abs(r) < slots]  # all 23 from N = 2^14 up
    out: dict[str, float] = {}

    def timed(op: str, fn, reps_: int = reps) -> None:
        out[op] = _time_ms(fn, reps_, None if samples is None else samples.setdefault(op, []))

    def keygen():
        kg_ = seal.KeyGenerator(ctx)
        pk_ = seal.PublicKey()
        kg_.create_public_key(pk_)

    timed("keygen_secret_public", keygen)
    kg = seal.KeyGenerator(ctx)
    sk = kg.secret_key()
    pk = seal.PublicKey()
    kg.create_public_key(pk)
    rlk = seal.RelinKeys()
    timed("keygen_relin", lambda: kg.create_relin_keys(rlk))
    one = seal.GaloisKeys()
    timed("keygen_galois_1", lambda: kg.create_galois_keys([seal_galois_elt(1, n)], one))
    gk = seal.GaloisKeys()
    kg.create_galois_keys([seal_galois_elt(r, n) for r in steps + [0]], gk)

    encoder = seal.CKKSEncoder(ctx)
    encryptor = seal.Encryptor(ctx, pk)
    decryptor = seal.Decryptor(ctx, sk)
    ev = seal.Evaluator(ctx)
    px, py = seal.Plaintext(), seal.Plaintext()
    timed("encode", lambda: encoder.encode(xl, scale, px))
    encoder.encode(yl, scale, py)
    cx, cy = seal.Ciphertext(), seal.Ciphertext()
    timed("encrypt", lambda: encryptor.encrypt(px, cx))
    encryptor.encrypt(py, cy)

    acc = seal.Ciphertext()
    ev.add(cx, cy, acc)
    timed("add", lambda: ev.add_inplace(acc, cy))
    cp = seal.Ciphertext()
    timed("multiply_plain", lambda: ev.multiply_plain(cx, py, cp))
    c3 = seal.Ciphertext()
    timed("multiply", lambda: ev.multiply(cx, cy, c3))
    c2 = seal.Ciphertext()
    timed("relinearize", lambda: ev.relinearize(c3, rlk, c2))
    cr = seal.Ciphertext()
    timed("rescale", lambda: ev.rescale_to_next(c2, cr))

    cm = seal.Ciphertext()

    def mul_relin_rescale():
        ev.multiply(cx, cy, cm)
        ev.relinearize_inplace(cm, rlk)
        ev.rescale_to_next_inplace(cm)

    timed("mul_relin_rescale", mul_relin_rescale)
    rot = seal.Ciphertext()
    timed("rotate_1", lambda: ev.rotate_vector(cx, 1, gk, rot))
    rots = [seal.Ciphertext() for _ in steps]

    def rotate_all():
        for step, dst in zip(steps, rots):
            ev.rotate_vector(cx, step, gk, dst)

    timed(f"rotate_{len(steps)}", rotate_all)
    conj = seal.Ciphertext()
    timed("conjugate", lambda: ev.complex_conjugate(cx, gk, conj))

    pt = seal.Plaintext()
    timed("decrypt", lambda: decryptor.decrypt(cx, pt))
    timed("decode", lambda: encoder.decode_double(pt))

    def decrypt_decode():
        decryptor.decrypt(cx, pt)
        return encoder.decode_double(pt)

    timed("decrypt_decode", decrypt_decode)

    # correctness and precision (also guards every timed result above)
    fresh = np.array(decrypt_decode())
    err_fresh = float(np.abs(fresh - x).max())
    mul_relin_rescale()
    decryptor.decrypt(cm, pt)
    err_mul = float(np.abs(np.array(encoder.decode_double(pt)) - x * y).max())
    for step, dst in zip(steps, rots):
        decryptor.decrypt(dst, pt)
        err = float(np.abs(np.array(encoder.decode_double(pt)) - np.roll(x, -step)).max())
        if err > 1e-3:  # a sanity bound (a wrong rotation is off by ~1); precision is a row
            raise AssertionError(f"SEAL rotation by {step}: max error {err}")
    if max(err_fresh, err_mul) > 1e-3:
        raise AssertionError(f"SEAL precision off: fresh {err_fresh}, after multiply {err_mul}")
    out["precision_fresh_bits"] = -float(np.log2(err_fresh))
    out["precision_mul_bits"] = -float(np.log2(err_mul))

    out["size_pk_bytes"] = _ct_bytes_none(2, data_limbs + 1, n)
    out["size_pk_zstd_bytes"] = _saved_size(pk)
    out["size_relin_bytes"] = _kswitch_bytes_none(n, data_limbs, keys=1, outer=1)
    out["size_relin_zstd_bytes"] = _saved_size(rlk)
    out["size_galois_1_bytes"] = _kswitch_bytes_none(n, data_limbs, keys=1, outer=n)
    out["size_galois_1_zstd_bytes"] = _saved_size(one)
    nkeys = len(steps) + 1  # the rotations + conjugation
    out[f"size_galois_{nkeys}_bytes"] = _kswitch_bytes_none(n, data_limbs, keys=nkeys, outer=n)
    out[f"size_galois_{nkeys}_zstd_bytes"] = _saved_size(gk)
    out["size_ct_bytes"] = _ct_bytes_none(2, data_limbs, n)
    out["size_ct_zstd_bytes"] = _saved_size(cx)
    return out


# -- table and JSON ------------------------------------------------------------------------------
def _unit(op: str) -> str:
    return "bytes" if op.endswith("_bytes") else "bits" if op.endswith("_bits") else "ms"


def _fmt(op: str, v: float | None) -> str:
    if v is None:
        return f"{'-':>14s}"
    unit = _unit(op)
    if unit == "bytes":
        return f"{v / 2**20:10.3f} MiB"
    if unit == "bits":
        return f"{v:9.1f} bits"
    return f"{v:11.3f} ms"


def print_table(columns: dict[str, dict[str, float]], title: str) -> None:
    """One row per operation, one column per implementation (missing cells: '-')."""
    ops = list(dict.fromkeys(op for col in columns.values() for op in col))
    print(f"\n== {title} ==")
    print(f"{'operation':26s} " + " ".join(f"{name:>14s}" for name in columns))
    for op in ops:
        print(f"{op:26s} " + " ".join(_fmt(op, col.get(op)) for col in columns.values()))


def _machine() -> dict:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), model)
    except OSError:
        pass
    return {"machine": model, "cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logn", type=int, default=14, help="log2 of the ring degree N")
    ap.add_argument("--bits", type=int, nargs="+", default=DEFAULT_BITS, help="coefficient modulus chain (bits)")
    ap.add_argument("--scale-bits", type=int, default=53)
    ap.add_argument("--reps", type=int, default=7, help="timing samples per operation (median shown)")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPUs the process may use (affinity); SEAL runs single-threaded either way")
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = ap.parse_args()

    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[: max(1, args.threads)]))

    n = 1 << args.logn
    columns: dict[str, dict[str, float]] = {}
    samples: dict[str, dict[str, list[float]]] = {}
    why = seal_available()
    if why:
        print(f"[skip] seal: {why}", file=sys.stderr)
    else:
        print(f"seal: N = 2^{args.logn}, chain {args.bits}, scale 2^{args.scale_bits}, {args.reps} reps ...",
              file=sys.stderr, flush=True)
        columns["seal"] = seal_rows(n, args.bits, args.scale_bits, args.reps, samples.setdefault("seal", {}))
    if not columns:
        return 1
    print_table(columns, f"CKKS, N = 2^{args.logn}, chain {args.bits}, scale 2^{args.scale_bits}, "
                         f"{args.threads} thread(s): median ms/op")
    if args.json:
        import tenseal

        meta = {**_machine(), "threads": args.threads, "reps": args.reps, "n": n, "bits": args.bits,
                "scale_bits": args.scale_bits, "slots": n // 2, "rotation_steps": ROTATION_STEPS,
                "statistic": "value (ms) = median over reps of the mean over an inner loop of >= 100 ms; min_ms and samples_ms per timed row",
                "seal": f"Microsoft SEAL via tenseal {tenseal.__version__} (tenseal.sealapi), single-threaded"}
        rows = []
        for impl, col in columns.items():
            for op, v in col.items():
                row = {"operation": op, "implementation": impl, "value": round(v, 4), "unit": _unit(op)}
                if samples.get(impl, {}).get(op):  # timed rows: the spread on a shared machine
                    row["min_ms"] = round(min(samples[impl][op]), 4)
                    row["samples_ms"] = [round(x, 4) for x in samples[impl][op]]
                rows.append(row)
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
