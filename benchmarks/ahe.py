#!/usr/bin/env python
"""Additive-HE engine benchmark: shaper (native kernel and gmpy2 kernel) next to python-paillier
and SecretFlow HEU, one run.

Each (implementation, key size, cores) configuration runs in its own child process whose CPU
affinity is limited to the first ``cores`` CPUs (shaper also gets ``cores`` workers: threads of
the native kernel, processes of the gmpy2 kernel; HEU uses its own thread pool; python-paillier
is single-threaded, so it runs at 1 core only). Every operation is warmed up (keys generated,
fixed-base tables built in every worker) and then timed ``--repeats`` times on a batch. All
configurations run once per round, interleaved, for ``--rounds`` rounds, so slow drifts of a
shared machine hit every implementation alike. The table shows the best (minimum) time per
operation, as ``timeit`` recommends for noisy machines, with the same statistic for every
implementation; the JSON also carries the median.

Implementations (``--impl``; the default is shaper, shaper-gmpy2, phe, heu):
  shaper            shaper on the kernel ``SHAPER_NATIVE=auto`` picks: the native AVX-512 IFMA
                    kernel where the CPU has it, else gmpy2 (the output then says so)
  shaper-gmpy2      shaper on the older gmpy2 kernel (``SHAPER_NATIVE=off``)
  shaper-portable   shaper on the native 64-bit-limb engine (``SHAPER_NATIVE=portable``; slow,
                    not run by default)
  phe               python-paillier
  heu               SecretFlow HEU (ZPaillier and OU)
Each child records the kernel that actually ran (``shaper.kernels.get_kernel().name``); the
table prints it and the JSON meta lists it per configuration.

Rows (2048 and 3072 bits by default):
  enc_public        encryption with the public key (shaper: DJN, fixed-base table mod n^2)
  enc_public_fast   public-key encryption with ``constant_time=False`` (shaper: wide-window table
                    read by index, the trade-off HEU's own table makes; native kernel only)
  enc_owner         encryption by the key owner (shaper: CRT, tables mod p^2, q^2)
  dec               decryption (CRT)
  pack_per_value    shaper packing cost per value (64-bit values, σ = 40 headroom)
  dec_packed_value  shaper decryption cost per value when reading packed ciphertexts
  ccadd / pcadd     ciphertext + ciphertext / + plaintext, per element in a batch
  pcmult64          ciphertext x random 64-bit scalar (HEU: 63-bit, its int64 limit)
  ou_enc / ou_dec   Okamoto-Uchiyama (shaper vs HEU OU)

Columns per (key size, cores): native (shaper), gmpy2 (shaper-gmpy2), python-paillier, HEU
(and portable when run), then the ratios gmpy2/native, phe/native, heu/native (> 1: native is
faster). Below each block, since HEU has no key-owner (CRT) encryption, ``heu enc_public /
shaper enc_owner`` compares HEU's only encryption with shaper's key-owner one and ``heu
enc_public / shaper enc_public_fast`` with shaper's public-key encryption at HEU's trade-off
(neither constant time); after all blocks,
the 2-cores-vs-1 speedups of each shaper kernel.

Plaintexts are random 62-bit integers. Usage:

  python benchmarks/ahe.py                       # 2048 and 3072 bits, 1 and 2 cores
  python benchmarks/ahe.py --bits 2048 --json out.json
  python benchmarks/ahe.py --impl shaper shaper-gmpy2 shaper-portable --bits 2048
  python benchmarks/ahe.py --quick               # small batches, for a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time

from meta import cores as available_cores, write_json

# Per-op batch sizes at 2048 bits (scaled down for 3072 and --quick).
BATCH = {
    "enc_public": 400, "enc_public_fast": 400, "enc_owner": 400, "dec": 128, "pack_per_value": 4000, "dec_packed_value": 4000,
    "ccadd": 4000, "pcadd": 4000, "pcmult64": 300, "ou_enc": 4000, "ou_dec": 1000,
}
PHE_BATCH = {"enc_public": 30, "dec": 60, "ccadd": 2000, "pcadd": 1000, "pcmult64": 150}


def _timeit(fn, repeats: int, count: int) -> list[float]:
    """µs per operation of each of ``repeats`` timed runs (after one warm-up run)."""
    fn()  # warm-up: lazy imports, tables, worker start-up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) / count * 1e6)
    return samples


def _values(count: int) -> list[int]:
    return [secrets.randbits(62) for _ in range(count)]


def _scale(batch: int, bits: int, quick: bool) -> int:
    if bits >= 3072:
        batch = max(8, batch // 3)
    if quick:
        batch = max(4, batch // 10)
    return batch


# -- implementations ---------------------------------------------------------------------------
def run_shaper(bits: int, cores: int, repeats: int, quick: bool) -> dict:
    import numpy as np

    import shaper.kernels as kernels
    from shaper.crypto import ou, pack, paillier

    kernels.set_workers(cores)
    out: dict = {"kernel": kernels.get_kernel().name}  # the kernel SHAPER_NATIVE resolved to
    pk, sk = paillier.keygen(bits)

    def batch(name):
        return _scale(BATCH[name], bits, quick)

    n = batch("enc_public")
    x = np.array(_values(n), dtype=np.int64)
    pk.encrypt(x)  # builds the fixed-base table in every worker
    out["enc_public"] = _timeit(lambda: pk.encrypt(x), repeats, n)
    pk.encrypt(x, constant_time=False)  # builds the index-read table
    out["enc_public_fast"] = _timeit(lambda: pk.encrypt(x, constant_time=False), repeats, n)
    sk.encrypt(x)
    out["enc_owner"] = _timeit(lambda: sk.encrypt(x), repeats, n)

    nd = batch("dec")
    e = pk.encrypt(x[:nd])
    assert np.array_equal(sk.decrypt(e), x[:nd])
    out["dec"] = _timeit(lambda: sk.decrypt(e), repeats, nd)

    npk = batch("pack_per_value")
    xp = np.array(_values(npk), dtype=np.int64)  # its own batch (larger than x)
    ep = pk.encrypt(xp)
    packed = pack(ep, 64)
    out["pack_per_value"] = _timeit(lambda: pack(ep, 64), repeats, npk)
    assert np.array_equal(sk.decrypt(packed), xp)
    out["dec_packed_value"] = _timeit(lambda: sk.decrypt(packed), repeats, npk)
    out["slots_per_ciphertext"] = packed.layout.slots
    assert kernels.get_kernel().name == out["kernel"]  # no silent fallback mid-run

    na = batch("ccadd")
    big = pk.encrypt(np.array(_values(na), dtype=np.int64))
    plain = np.array(_values(na), dtype=np.int64)
    out["ccadd"] = _timeit(lambda: big + big, repeats, na)
    out["pcadd"] = _timeit(lambda: big + plain, repeats, na)

    nm = batch("pcmult64")
    scalars = np.array([secrets.randbits(64) for _ in range(nm)], dtype=object)
    em = big[:nm]
    em * scalars
    out["pcmult64"] = _timeit(lambda: em * scalars, repeats, nm)

    opk, osk = ou.keygen(bits)
    no = batch("ou_enc")
    xo = np.array(_values(no), dtype=np.int64)
    oe = opk.encrypt(xo)
    out["ou_enc"] = _timeit(lambda: opk.encrypt(xo), repeats, no)
    nod = batch("ou_dec")
    oed = oe[:nod]
    osk.decrypt(oed)
    out["ou_dec"] = _timeit(lambda: osk.decrypt(oed), repeats, nod)
    assert np.array_equal(osk.decrypt(oed), xo[:nod])
    return out


def run_phe(bits: int, cores: int, repeats: int, quick: bool) -> dict:
    import phe

    pk, sk = phe.generate_paillier_keypair(n_length=bits)
    out = {}

    def batch(name):
        return _scale(PHE_BATCH[name], bits, quick)

    n = batch("enc_public")
    xs = _values(n)
    out["enc_public"] = _timeit(lambda: [pk.encrypt(v) for v in xs], repeats, n)
    nd = batch("dec")
    cts = [pk.encrypt(v) for v in _values(nd)]
    out["dec"] = _timeit(lambda: [sk.decrypt(c) for c in cts], repeats, nd)
    na = batch("ccadd")
    many = [pk.encrypt(v) for v in _values(min(na, 200))] * (na // min(na, 200))
    out["ccadd"] = _timeit(lambda: [a + b for a, b in zip(many, many)], repeats, len(many))
    npa = batch("pcadd")
    plains = _values(npa)
    out["pcadd"] = _timeit(lambda: [a + k for a, k in zip(many[:npa], plains)], repeats, npa)
    nm = batch("pcmult64")
    scalars = [secrets.randbits(64) for _ in range(nm)]
    out["pcmult64"] = _timeit(lambda: [a * k for a, k in zip(many[:nm], scalars)], repeats, nm)
    return out


def run_heu(bits: int, cores: int, repeats: int, quick: bool) -> dict:
    import numpy as np
    from heu import numpy as hnp
    from heu import phe

    out = {}

    def batch(name):
        return _scale(BATCH[name], bits, quick)

    kit = hnp.setup(phe.SchemaType.ZPaillier, bits)
    enc, dec, ev = kit.encryptor(), kit.decryptor(), kit.evaluator()
    bigint = phe.BigintEncoderParams()
    n = batch("enc_public")
    pt = kit.array(np.array(_values(n), dtype=np.int64), bigint)
    enc.encrypt(pt)
    out["enc_public"] = _timeit(lambda: enc.encrypt(pt), repeats, n)
    nd = batch("dec")
    ct = enc.encrypt(kit.array(np.array(_values(nd), dtype=np.int64), bigint))
    out["dec"] = _timeit(lambda: dec.decrypt(ct), repeats, nd)
    na = batch("ccadd")
    big = enc.encrypt(kit.array(np.array(_values(na), dtype=np.int64), bigint))
    plain = kit.array(np.array(_values(na), dtype=np.int64), bigint)
    out["ccadd"] = _timeit(lambda: ev.add(big, big), repeats, na)
    out["pcadd"] = _timeit(lambda: ev.add(big, plain), repeats, na)
    nm = batch("pcmult64")
    scal = kit.array(np.array([secrets.randbits(63) for _ in range(nm)], dtype=np.int64), bigint)
    small = enc.encrypt(kit.array(np.array(_values(nm), dtype=np.int64), bigint))
    out["pcmult64"] = _timeit(lambda: ev.mul(small, scal), repeats, nm)

    okit = hnp.setup(phe.SchemaType.OU, bits)
    oenc, odec = okit.encryptor(), okit.decryptor()
    no = batch("ou_enc")
    opt = okit.array(np.array(_values(no), dtype=np.int64), bigint)
    out["ou_enc"] = _timeit(lambda: oenc.encrypt(opt), repeats, no)
    nod = batch("ou_dec")
    oct_small = oenc.encrypt(okit.array(np.array(_values(nod), dtype=np.int64), bigint))
    out["ou_dec"] = _timeit(lambda: odec.decrypt(oct_small), repeats, nod)
    return out


RUNNERS = {"shaper": run_shaper, "shaper-gmpy2": run_shaper, "shaper-portable": run_shaper,
           "phe": run_phe, "heu": run_heu}
# SHAPER_NATIVE of each shaper implementation (set in the child before shaper is imported).
NATIVE_MODE = {"shaper": "auto", "shaper-gmpy2": "off", "shaper-portable": "portable"}
MODULE = {"shaper": "shaper", "shaper-gmpy2": "shaper", "shaper-portable": "shaper", "phe": "phe", "heu": "heu"}
DEFAULT_IMPLS = ["shaper", "shaper-gmpy2", "phe", "heu"]


def child(impl: str, bits: int, cores: int, repeats: int, quick: bool) -> None:
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[:cores]))
    os.environ["SHAPER_WORKERS"] = str(cores)
    if impl in NATIVE_MODE:
        assert "shaper" not in sys.modules, "SHAPER_NATIVE must be set before shaper is imported"
        os.environ["SHAPER_NATIVE"] = NATIVE_MODE[impl]
    result = RUNNERS[impl](bits, cores, repeats, quick)
    if impl == "shaper-gmpy2":
        assert result["kernel"].startswith("gmpy2"), result["kernel"]
    print("RESULT " + json.dumps(result), flush=True)


def available(impl: str) -> str | None:
    """None when ``impl`` can run here, else why not."""
    try:
        __import__(MODULE[impl])
    except ImportError:
        return "not installed (pip install 'shaper-ppml[bench]')"
    if impl == "shaper-portable":
        from shaper.kernels import native

        if not native.available():
            return "the native extension shaper._native is not built"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bits", type=int, nargs="+", default=[2048, 3072])
    ap.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--impl", nargs="+", default=DEFAULT_IMPLS, choices=list(RUNNERS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds over all configurations")
    ap.add_argument("--quick", action="store_true", help="small batches (smoke test)")
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    ap.add_argument("--child", nargs=3, metavar=("IMPL", "BITS", "CORES"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]), args.repeats, args.quick)
        return 0

    ncpu = available_cores()
    configs = []
    for bits in args.bits:
        for impl in args.impl:
            why = available(impl)
            if why:
                print(f"[skip] {impl}: {why}", file=sys.stderr)
                continue
            for cores in args.cores:
                if cores <= ncpu and not (impl == "phe" and cores > 1):
                    configs.append((impl, bits, cores))
    samples: dict[tuple, dict[str, list[float]]] = {}
    extras: dict[tuple, dict] = {}
    for round_ in range(args.rounds):
        for impl, bits, cores in configs:
            cmd = [sys.executable, __file__, "--child", impl, str(bits), str(cores),
                   "--repeats", str(args.repeats)] + (["--quick"] if args.quick else [])
            print(f"round {round_ + 1}/{args.rounds}: {impl} {bits}-bit on {cores} core(s) ...",
                  file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if proc.returncode or line is None:
                print(f"[fail] {impl} {bits} {cores}: {proc.stderr[-2000:]}", file=sys.stderr)
                continue
            for op, value in json.loads(line[len("RESULT "):]).items():
                if isinstance(value, list):
                    samples.setdefault((impl, bits, cores), {}).setdefault(op, []).extend(value)
                else:
                    extras.setdefault((impl, bits, cores), {})[op] = value

    rows = []
    results: dict[tuple, dict] = {}
    for key, ops in samples.items():
        impl, bits, cores = key
        for op, values in ops.items():
            best, median = min(values), statistics.median(values)
            results.setdefault(key, {})[op] = best
            rows.append({"operation": op, "implementation": impl, "key_bits": bits, "cores": cores,
                         "us_per_op": round(best, 3), "median_us_per_op": round(median, 3),
                         "ops_per_s": round(1e6 / best, 1), "samples": len(values)})
        results[key].update(extras.get(key, {}))

    _print_table(rows, results)
    if args.json:
        meta = {"repeats": args.repeats, "rounds": args.rounds, "quick": args.quick,
                "statistic": "us_per_op = minimum over rounds x repeats; median_us_per_op also given",
                "network": "none (local)", "kernels": _kernels(extras)}
        write_json(args.json, {"meta": meta, "rows": rows})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


# Table columns (implementation, header) and ratio columns (implementation over shaper).
COLUMNS = [("shaper", "native"), ("shaper-portable", "portable"), ("shaper-gmpy2", "gmpy2"),
           ("phe", "python-paillier"), ("heu", "HEU")]
RATIOS = ["shaper-portable", "shaper-gmpy2", "phe", "heu"]
SHORT = {"shaper-portable": "portable", "shaper-gmpy2": "gmpy2", "phe": "phe", "heu": "heu"}
OPTIONAL = {"shaper-portable"}  # columns shown only when that implementation ran


def _kernels(extras: dict) -> list[dict]:
    """Kernel each shaper configuration actually ran on (for the JSON meta)."""
    return [{"implementation": impl, "key_bits": bits, "cores": cores, "kernel": extra["kernel"]}
            for (impl, bits, cores), extra in sorted(extras.items()) if "kernel" in extra]


def _is_native(kernel: str | None) -> bool:
    return kernel is None or kernel.startswith("native")


def _print_table(rows: list[dict], results: dict) -> None:
    ops = list(dict.fromkeys(r["operation"] for r in rows))
    configs = sorted({(r["key_bits"], r["cores"]) for r in rows})
    ran = {r["implementation"] for r in rows}
    columns = [(impl, head) for impl, head in COLUMNS if impl not in OPTIONAL or impl in ran]
    ratios = [impl for impl in RATIOS if impl not in OPTIONAL or impl in ran]

    def cell(v):
        return f"{v:9.1f} {1e6 / v:>9,.0f}/s" if v is not None else f"{'-':>20s}"

    for bits, cores in configs:
        kernel = results.get(("shaper", bits, cores), {}).get("kernel")
        base = "native" if _is_native(kernel) else "auto"  # never call a gmpy2 run "native"
        heads = [(impl, f"{SHORT[impl]}/{base}") for impl in ratios]
        widths = {impl: max(11, len(head) + 1) for impl, head in heads}
        print(f"\n== {bits}-bit keys, {cores} core(s): µs/op and ops/s, best of all runs ==")
        used = [f"{impl}={results[(impl, bits, cores)]['kernel']}" for impl, _ in COLUMNS
                if "kernel" in results.get((impl, bits, cores), {})]
        if used:
            print("kernels: " + ", ".join(used))
        if not _is_native(kernel):
            print(f"note: shaper (SHAPER_NATIVE=auto) ran on the {kernel} kernel (no AVX-512 IFMA on this CPU), "
                  "so its column is labelled 'shaper (auto)', not native")
        labels = [head if impl != "shaper" or base == "native" else "shaper (auto)" for impl, head in columns]
        print(f"{'operation':18s} " + " ".join(f"{h:>20s}" for h in labels) + " "
              + " ".join(f"{h:>{widths[impl]}s}" for impl, h in heads))
        for op in ops:
            vals = {impl: results.get((impl, bits, cores), {}).get(op) for impl, _ in columns}
            if all(v is None for v in vals.values()):
                continue

            def ratio(other):
                s_, o, w = vals["shaper"], vals[other], widths[other]
                return f"{o / s_:{w - 1}.2f}x" if s_ and o else f"{'-':>{w}s}"

            print(f"{op:18s} " + " ".join(cell(vals[impl]) for impl, _ in columns) + " "
                  + " ".join(ratio(impl) for impl in ratios))
        res = results.get(("shaper", bits, cores)) or results.get(("shaper-gmpy2", bits, cores))
        if res and "slots_per_ciphertext" in res:
            print(f"(packing: {res['slots_per_ciphertext']} slots of 64+40+2 bits per ciphertext)")
        _print_owner_vs_heu(results, bits, cores)
    for impl in ("shaper", "shaper-portable", "shaper-gmpy2"):
        _print_speedups(results, impl, sorted({b for b, _ in configs}))


def _print_owner_vs_heu(results: dict, bits: int, cores: int) -> None:
    """HEU has no key-owner (CRT) encryption: compare its public-key encryption with shaper's
    key-owner encryption, the one a key owner would use."""
    heu = results.get(("heu", bits, cores), {}).get("enc_public")
    for impl in ("shaper", "shaper-gmpy2"):
        own = results.get((impl, bits, cores), {}).get("enc_owner")
        if heu and own:
            print(f"heu enc_public / {impl} enc_owner: {heu / own:.2f}x (HEU has no key-owner encryption)")
    fast = results.get(("shaper", bits, cores), {}).get("enc_public_fast")
    if heu and fast:
        print(f"heu enc_public / shaper enc_public_fast: {heu / fast:.2f}x "
              "(both index-read fixed-base tables, neither constant time)")


def _print_speedups(results: dict, impl: str, bit_sizes: list[int]) -> None:
    for bits in bit_sizes:
        one, two = results.get((impl, bits, 1)), results.get((impl, bits, 2))
        if one and two:
            speedups = ", ".join(f"{op} {one[op] / two[op]:.2f}x" for op in
                                 ("enc_public", "enc_owner", "dec", "pcmult64", "pack_per_value") if op in one)
            print(f"{impl} {bits}-bit, 2 cores vs 1 ({two.get('kernel', '?')}): {speedups}")


if __name__ == "__main__":
    sys.exit(main())
