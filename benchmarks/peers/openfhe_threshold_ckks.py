"""OpenFHE's n-out-of-n threshold CKKS, measured for benchmarks/threshold_ckks.py.

Runs under the Python that has OpenFHE's wheel (``openfhe==1.6.1.0.22.4`` ships a cpython-3.10
binary only), never imports shaper, and prints one JSON object on stdout. All n parties are
simulated in this one process, one after the other, so a party's time is the time of its own
calls; what a party would send is the serialised size (binary) of the objects it hands on.

Protocol (OpenFHE's, the "local noise" way: every party samples its own secret share and
errors, so the joint key's error is a sum of n Gaussians):

* joint public key: party 0 ``KeyGen``, party i ``MultipartyKeyGen(pk_{i-1})`` in a chain;
* relinearisation key: party 0 ``KeySwitchGen(s_0, s_0)``, party i ``MultiKeySwitchGen(s_i, s_i,
  .)``, summed (``MultiAddEvalKeys``); then every party ``MultiMultEvalKey`` on the sum and the
  results are summed (``MultiAddEvalMultKeys``);
* rotation keys: party 0 ``EvalAtIndexKeyGen``, party i ``MultiEvalAtIndexKeyGen``, summed
  (``MultiAddEvalAutomorphismKeys``);
* decryption: ``MultipartyDecryptLead`` (party 0), ``MultipartyDecryptMain`` (the others),
  ``MultipartyDecryptFusion``.

Parameters: N = 2^14, multiplicative depth 6, first modulus 60 bits, scaling moduli 53 bits,
FIXEDMANUAL, 7 key-switching digits (one per q prime, as shaper's key switching), 8192 slots
(the CNN's chain in shaper: 60 + 6 x 53, p 60). OpenFHE rejects these at HEStd_128_classic (its
log PQ estimate rounds up past 438 bits), so the security level is left unset at the same N and q.

    /work/venv-openfhe/bin/python benchmarks/peers/openfhe_threshold_ckks.py --parties 2,4,8
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time

import numpy as np
import openfhe as fhe

ROTATIONS = [1, 2, 4, 8, 14, 15, 16, 32, 64, 128, 256, 384, 512, 640, 768, 896, 1024, 2048, 4096, -1, -2, -4, -8]


def context(ring_dim: int, depth: int, scale_bits: int, first_bits: int, digits: int | None) -> fhe.CryptoContext:
    params = fhe.CCParamsCKKSRNS()
    # OpenFHE's generator refuses this chain at N = 2^14 under HEStd_128_classic: its estimate of
    # log PQ adds a bit for alternating moduli and rounds P up to two 60-bit primes (> 438 bits),
    # though q (378 bits) and N are the ones shaper uses at 128 bits; so the level is not set
    params.SetSecurityLevel(fhe.SecurityLevel.HEStd_NotSet)
    params.SetRingDim(ring_dim)
    params.SetMultiplicativeDepth(depth)
    params.SetScalingModSize(scale_bits)
    params.SetFirstModSize(first_bits)
    params.SetScalingTechnique(fhe.ScalingTechnique.FIXEDMANUAL)
    params.SetBatchSize(ring_dim // 2)
    if digits:
        params.SetNumLargeDigits(digits)
    cc = fhe.GenCryptoContext(params)
    for feature in (fhe.PKE, fhe.KEYSWITCH, fhe.LEVELEDSHE, fhe.ADVANCEDSHE, fhe.MULTIPARTY):
        cc.Enable(feature)
    return cc


def size(obj) -> int:
    out = fhe.Serialize(obj, fhe.BINARY)
    return len(out)


class Clock:
    """Seconds per party and per phase (each party's own calls only)."""

    def __init__(self, parties: int) -> None:
        self.per_party = [{} for _ in range(parties)]

    def __call__(self, party: int, phase: str, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        d = self.per_party[party]
        d[phase] = d.get(phase, 0.0) + time.perf_counter() - t0
        return out


def run(n: int, cc: fhe.CryptoContext, rotations: list[int], repeat: int, rng: np.random.Generator) -> dict:
    clock = Clock(n)
    t_all = time.perf_counter()
    # joint public key, a chain through the parties
    kps = [clock(0, "public key", cc.KeyGen)]
    for i in range(1, n):
        kps.append(clock(i, "public key", cc.MultipartyKeyGen, kps[-1].publicKey))
    pk = kps[-1].publicKey
    tag = pk.GetKeyTag()
    t_pk = time.perf_counter() - t_all

    # relinearisation key: two rounds
    t0 = time.perf_counter()
    base = clock(0, "relinearisation key", cc.KeySwitchGen, kps[0].secretKey, kps[0].secretKey)
    joint = base
    share_bytes = size(base)
    for i in range(1, n):
        part = clock(i, "relinearisation key", cc.MultiKeySwitchGen, kps[i].secretKey, kps[i].secretKey, base)
        joint = clock(i, "relinearisation key", cc.MultiAddEvalKeys, joint, part, kps[i].publicKey.GetKeyTag())
    mult = [clock(i, "relinearisation key", cc.MultiMultEvalKey, kps[i].secretKey, joint, tag) for i in range(n)]
    relin = mult[0]
    for i in range(1, n):
        relin = clock(i, "relinearisation key", cc.MultiAddEvalMultKeys, mult[i], relin, tag)
    cc.InsertEvalMultKey([relin])
    t_rlk = time.perf_counter() - t0
    relin_round2_bytes = size(mult[0])

    # rotation keys
    t_rot, rot_bytes = None, None
    if rotations:
        t0 = time.perf_counter()
        clock(0, "rotation keys", cc.EvalAtIndexKeyGen, kps[0].secretKey, rotations)
        first = cc.GetEvalAutomorphismKeyMap(kps[0].secretKey.GetKeyTag())
        rot_bytes = size(first)
        acc = first
        for i in range(1, n):
            t = kps[i].publicKey.GetKeyTag()
            part = clock(i, "rotation keys", cc.MultiEvalAtIndexKeyGen, kps[i].secretKey, first, rotations, t)
            acc = clock(i, "rotation keys", cc.MultiAddEvalAutomorphismKeys, acc, part, t)
        cc.InsertEvalAutomorphismKey(acc)
        t_rot = time.perf_counter() - t0

    # decryption: a fresh ciphertext and one at the last level, and a rotated product (keys check)
    slots = cc.GetRingDimension() // 2
    x = rng.uniform(-1.0, 1.0, slots)
    ct = cc.Encrypt(pk, cc.MakeCKKSPackedPlaintext(x.tolist()))
    low = cc.Compress(ct, 1)  # keeps one tower: level 0
    dec: dict = {}
    for label, c in (("fresh", ct), ("level 0", low)):
        lead, main, fusion, err = [], [], [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            parts = [cc.MultipartyDecryptLead([c], kps[0].secretKey)[0]]
            lead.append(time.perf_counter() - t0)
            for i in range(1, n):
                t0 = time.perf_counter()
                parts.append(cc.MultipartyDecryptMain([c], kps[i].secretKey)[0])
                main.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            pt = cc.MultipartyDecryptFusion(parts)
            fusion.append(time.perf_counter() - t0)
            pt.SetLength(slots)
            got = np.array(pt.GetRealPackedValue())
            err = float(np.max(np.abs(got - x)))
        dec[label] = {"lead ms": 1e3 * statistics.median(lead), "main ms": 1e3 * statistics.median(main) if main else None,
                      "fusion ms": 1e3 * statistics.median(fusion), "max slot error": err,
                      "precision bits": -math.log2(err) if err > 0 else None,
                      "partial decryption bytes": size(parts[-1]), "ciphertext bytes": size(c)}
    # the keys work: x^2 and a rotation
    sq = cc.Rescale(cc.EvalMult(ct, ct))
    checks = {"relinearisation": (sq, x * x)}
    if rotations:
        checks["rotation"] = (cc.EvalRotate(ct, rotations[0]), np.roll(x, -rotations[0]))
    check_err = {}
    for label, (c, want) in checks.items():
        parts = [cc.MultipartyDecryptLead([c], kps[0].secretKey)[0]] + \
                [cc.MultipartyDecryptMain([c], kps[i].secretKey)[0] for i in range(1, n)]
        pt = cc.MultipartyDecryptFusion(parts)
        pt.SetLength(slots)
        check_err[label] = float(np.max(np.abs(np.array(pt.GetRealPackedValue()) - want)))
    ok = all(e < 1e-3 for e in check_err.values())
    fhe.ClearEvalMultKeys()  # the next row starts from no keys
    cc.ClearEvalAutomorphismKeys()
    return {"parties": n, "joint public key s": t_pk, "relinearisation key s": t_rlk, "rotation keys s": t_rot,
            "rotation keys": len(rotations), "per party s": clock.per_party,
            "max party s": max(sum(d.values()) for d in clock.per_party),
            "bytes": {"public key share": size(kps[0].publicKey), "relinearisation share (round 1)": share_bytes,
                      "relinearisation share (round 2)": relin_round2_bytes, "rotation key shares": rot_bytes,
                      "joint public key": size(pk), "joint relinearisation key": size(relin)},
            "decryption": dec, "check errors": check_err, "ok": ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parties", default="2,4,8")
    ap.add_argument("--ring-dim", type=int, default=1 << 14)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--scale-bits", type=int, default=53)
    ap.add_argument("--first-bits", type=int, default=60)
    ap.add_argument("--digits", type=int, default=7,
                    help="key-switching digits (dnum); 7 = one per q prime, as shaper; 0: OpenFHE's default")
    ap.add_argument("--rotations", type=int, default=len(ROTATIONS), help="how many of the CNN's 23 steps")
    ap.add_argument("--rotation-parties", default="2,4", help="party counts that also make the rotation keys")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    cc = context(args.ring_dim, args.depth, args.scale_bits, args.first_bits, args.digits or None)
    rot_parties = {int(p) for p in args.rotation_parties.split(",") if p}
    rng = np.random.default_rng(18)
    rows = []
    for n in (int(p) for p in args.parties.split(",")):
        rotations = ROTATIONS[:args.rotations] if n in rot_parties else []
        rows.append(run(n, cc, rotations, args.repeat, rng))
    modulus = cc.GetModulus()
    out = {"library": "openfhe-python", "version": getattr(fhe, "__version__", None) or "1.6.1.0.22.4",
           "python": platform.python_version(), "ring dimension": cc.GetRingDimension(),
           "log2 q": math.log2(modulus), "depth": args.depth, "scale bits": args.scale_bits,
           "first modulus bits": args.first_bits, "scaling": "FIXEDMANUAL", "security": "HEStd_NotSet (OpenFHE's estimate of log PQ for this chain exceeds its 128-bit bound at N = 2^14)",
           "key-switching digits": args.digits or "default",
           "note": "all parties simulated one after another in one process (one core): per-party seconds "
                   "are each party's own calls, bytes are serialised (binary) sizes of what a party hands on",
           "rows": rows}
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
