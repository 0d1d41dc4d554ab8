#!/usr/bin/env python
"""Encrypted MNIST CNN inference (GMPFHE's application, ``shaper.ml.cnn``): shaper's own CKKS
next to Microsoft SEAL on the same network, the same packing and the same parameters, and the
two-party threshold version, in one run.

The network is E2DM's conv 5x4x4 stride 2 -> x^2 -> FC 845->64 -> x^2 -> FC 64->10 with the
bundled trained weights (``shaper.ml.cnn.bundled()``), one image per ciphertext (N = 2^14, 8192
slots), the packing plan of ``shaper.ml.cnn.plan`` (24 ciphertext products, 34 rotations of
which 19 hoisted, 5 relinearisations, depth 5, 28 rotation keys). Parameters:
``shaper.ml.cnn.params.cnn_parameters()``: q = 60 + 6 x 53 bits, special prime 60 bits, scale 2^53,
128-bit HE standard.

Sections:

1. plaintext accuracy of the bundled model (numpy forward pass) on the 10,000 MNIST test
   images and on the encrypted subset (the first ``--images`` test images);
2. shaper, single key, one process: image and model encrypted, model in the clear (image
   encrypted), image in the clear (model encrypted). Per-image evaluation is timed with 1 native
   thread (``shaper._native.set_threads(1)``, process pinned to one CPU) and 2 threads (two CPUs),
   image by image; encryption per image (encode + public-key encryption, ``encrypt_images``'
   body), model encryption (``encrypt_model``: pack, encode at the traced levels, encrypt the 25
   vectors), decryption + decoding per image; serialised sizes (``ckks.to_bytes``);
3. SEAL (``tenseal.sealapi``, single-threaded, pinned to one CPU), image and model encrypted:
   ``plan.forward`` run over a SEAL backend (:class:`SealBackend`, the methods of
   ``plan.CkksBackend``), so the network, the packing, the levels and scales (``plan.trace`` over
   SEAL's own primes: every weight encrypted at the level it is consumed at, at the scale of the
   prime the next rescale drops) and the lazy relinearisation (products summed as 3-component
   ciphertexts, relinearised once per layer: 5 relinearisations) are the same. SEAL's API has no
   hoisted rotations: ``rotate_many`` is separate ``rotate_vector`` calls. The same 28 Galois
   keys (elements of the plan's rotation steps). Sizes: SEAL's uncompressed layout;
4. threshold CKKS, 2 parties as processes over loopback TLS (``shaper.net.launch``), party i
   pinned to CPU i with 1 native thread: joint key generation with the plan's 28 rotation keys
   (``method`` "local" and "exact"), then ``jobs.infer_job`` (party 0 the client; every party evaluates;
   party 1 the model owner; image and model encrypted): per-image evaluation and encryption at
   the client (from the job's progress events), joint decryption of the batch to the client,
   bytes each party sent, accuracy and agreement with the plaintext model;
5. ratios: SEAL / shaper (1 thread, median per-image evaluation), GMPFHE's published figures
   (1,007 ms per image evaluation, 209 ms encryption, 0.04 s decryption, 2 parties) / shaper,
   and the acceptance target (<= 300 ms per image, one thread).

Timing: single-key evaluation is timed image by image with the configurations taking turns per
image (shaper 1T, shaper 2T, SEAL, shaper 1T, ...) so drifts of the machine hit them alike; one
untimed warm-up image per configuration first. Reported per configuration: median over images
(the headline), min and mean; the JSON also has every sample. Before timing the script waits
(``--wait-quiet``) for compilers, test runs and any other process using > 10% of a CPU, and
records which were seen during the single-key sections (JSON ``meta.quiet``).

    python benchmarks/cnn.py                          # 100 images, writes benchmarks/results/cnn.json
    python benchmarks/cnn.py --images 20 --out /tmp/cnn.json
    python benchmarks/cnn.py --quick                  # 4 images, local threshold keys only

The script exits 1 if an encrypted prediction differs from the plaintext model's or a
threshold run failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

from meta import cpu_model, load_sibling, write_json
from shaper.crypto import ckks
from shaper.jobs import cnn as jobs
from shaper.jobs.fhe import engine_for
from shaper.ml import cnn
from shaper.ml.cnn import mnist
from shaper.ml.cnn import plan as P
from shaper.ml.cnn.inference import encode_model, encrypt_model
from shaper.ml.cnn.params import CNN_BUDGET, CNN_CHAIN, cnn_parameters
from shaper.net import NetConfig, launch
from shaper.protocols import threshold_ckks as tc




bench = load_sibling("ckks")

#: GMPFHE (Zhu, Ding, Huang), the CNN benchmark: per-image evaluation, encryption (ms), and the
#: 2-party LAN decryption (s)
PAPER = {"eval_ms": 1007.0, "encrypt_ms": 209.0, "decrypt_s": 0.04,
         "source": "GMPFHE (Zhu, Ding, Huang), MNIST CNN of CDKS/E2DM, 2-party setting"}
TARGET_EVAL_MS = 300.0  # acceptance: per-image evaluation, one thread
SEAL_BITS = [60, 53, 53, 53, 53, 53, 53, 60]
MODES = {"image+model": ("image", "model"), "model in the clear": ("image",), "image in the clear": ("model",)}


QUIET_SHARE = 0.1  # an image round is quiet when other processes used less than this share of a CPU


def stats_ms(seconds: list[float], quiet: list[bool] | None = None) -> dict:
    """Median, min, mean (ms) and every sample; with ``quiet`` (one flag per sample) also the
    median over the quiet samples."""
    ms = [1e3 * s for s in seconds]
    out = {"median_ms": round(statistics.median(ms), 3), "min_ms": round(min(ms), 3),
           "mean_ms": round(statistics.fmean(ms), 3), "count": len(ms), "samples_ms": [round(v, 3) for v in ms]}
    if quiet is not None:
        calm = [v for v, q in zip(ms, quiet) if q]
        out["quiet_count"] = len(calm)
        out["quiet_median_ms"] = round(statistics.median(calm), 3) if calm else None
    return out


class OtherCpu:
    """CPU time of every other process on the machine (all CPUs, /proc/stat minus this process's
    own utime + stime) over a window, as a share of one CPU: catches short-lived processes too
    (a test run started and finished within the window)."""

    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    @staticmethod
    def _busy() -> int | None:
        try:
            with open("/proc/stat") as fh:
                v = [int(f) for f in fh.readline().split()[1:9]]
            with open("/proc/self/stat") as fh:
                stat = fh.read()
        except OSError:
            return None
        mine = stat[stat.rindex(")") + 2:].split()
        return v[0] + v[1] + v[2] + v[5] + v[6] + v[7] - int(mine[11]) - int(mine[12])

    def __init__(self) -> None:
        self.t, self.busy = time.monotonic(), self._busy()

    def share(self) -> float | None:
        busy = self._busy()
        if busy is None or self.busy is None:
            return None
        return (busy - self.busy) / self.hz / max(time.monotonic() - self.t, 1e-3)


# -- configurations ------------------------------------------------------------------------------

class Config:
    """Where and with how many native threads a timed step runs."""

    def __init__(self, name: str, cpus: set[int], native_threads: int | None) -> None:
        self.name, self.cpus, self.native_threads = name, cpus, native_threads

    def enter(self) -> None:
        bench._pin(self.cpus)
        if self.native_threads is not None:
            import shaper._native as nat

            if nat.threads() != self.native_threads:
                nat.set_threads(self.native_threads)
            bench._pin(self.cpus)  # the new pool's threads too


class Watch:
    """Other processes' CPU use and compilers/test runs seen while a section ran."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __enter__(self) -> Watch:
        self.seen.update(bench.busy_processes())
        self.t, self.ticks = time.monotonic(), bench.cpu_ticks()
        return self

    def section(self, name: str) -> Watch:
        self.name = name
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seen.update(bench.busy_processes())
        self.seen.update(f"{hog} during {self.name}"
                         for hog in bench.cpu_hogs(self.ticks, bench.cpu_ticks(), time.monotonic() - self.t))


# -- SEAL ------------------------------------------------------------------------------------------

class Seal:
    """SEAL's context, keys and tools for the CNN (tenseal.sealapi)."""

    def __init__(self, rotation_steps: tuple[int, ...], bits: list[int] = SEAL_BITS, scale_bits: int = 53) -> None:
        import tenseal.sealapi as seal

        self.seal = seal
        self.n = 1 << 14
        self.parms, self.ctx = bench._seal_context(self.n, bits)
        self.primes = [m.value() for m in self.parms.coeff_modulus()]
        self.scale = 2.0 ** scale_bits
        # chain index l = our level l (primes q_0..q_l)
        self.parms_ids: dict[int, Any] = {}
        data = self.ctx.first_context_data()
        while data is not None:
            self.parms_ids[data.chain_index()] = data.parms_id()
            data = data.next_context_data()
        t = time.perf_counter()
        kg = seal.KeyGenerator(self.ctx)
        self.sk = kg.secret_key()
        self.pk = seal.PublicKey()
        kg.create_public_key(self.pk)
        self.rlk = seal.RelinKeys()
        kg.create_relin_keys(self.rlk)
        self.gk = seal.GaloisKeys()
        kg.create_galois_keys([bench.seal_galois_elt(s, self.n) for s in rotation_steps], self.gk)
        self.keygen_seconds = time.perf_counter() - t
        self.encoder = seal.CKKSEncoder(self.ctx)
        self.encryptor = seal.Encryptor(self.ctx, self.pk)
        self.decryptor = seal.Decryptor(self.ctx, self.sk)
        self.ev = seal.Evaluator(self.ctx)
        # the plan's levels and scales over SEAL's own primes (the same as shaper's when they agree)
        self.params = ckks.Parameters.from_primes(self.n, self.primes[:-1], self.primes[-1], self.scale)
        self.trace = P.trace(self.params)

    def encode(self, values: list[float], level: int, scale: float) -> Any:
        pt = self.seal.Plaintext()
        self.encoder.encode(values, self.parms_ids[level], scale, pt)
        return pt

    def encrypt(self, pt: Any) -> Any:
        ct = self.seal.Ciphertext()
        self.encryptor.encrypt(pt, ct)
        return ct

    def encrypt_model(self, model: Any) -> dict[str, Any]:
        """The 25 packed vectors encrypted at their traced levels and scales."""
        out = {}
        for name, v in P.pack_model(model).items():
            level, scale = self.trace.specs[name]
            out[name] = self.encrypt(self.encode(v.tolist(), level, scale))
        return out

    def decrypt(self, ct: Any) -> np.ndarray:
        pt = self.seal.Plaintext()
        self.decryptor.decrypt(ct, pt)
        return np.array(self.encoder.decode_double(pt))

    def ct_bytes(self, ct: Any) -> int:
        """Uncompressed serialised size (SEAL's layout, compr_mode none)."""
        return bench._ct_bytes_none(ct.size(), ct.coeff_modulus_size(), self.n)


class SealBackend:
    """``plan.forward`` on SEAL ciphertexts: the methods of ``plan.CkksBackend`` (image and model
    encrypted). Products stay 3-component until ``finish`` relinearises and rescales once."""

    def __init__(self, s: Seal, weights: dict[str, Any]) -> None:
        self.s, self.ev, self.Ciphertext = s, s.ev, s.seal.Ciphertext
        self.weights = dict(weights)

    def rotate(self, x: Any, step: int) -> Any:
        out = self.Ciphertext()
        self.ev.rotate_vector(x, step, self.s.gk, out)
        return out

    def rotate_many(self, x: Any, steps: Any) -> dict[int, Any]:
        return {s: self.rotate(x, s) for s in steps}  # SEAL's API has no hoisting

    def mul(self, x: Any, name: str) -> Any:
        w, out = self.weights[name], self.Ciphertext()
        if isinstance(w, self.s.seal.Plaintext):
            self.ev.multiply_plain(x, w, out)
        else:
            self.ev.multiply(x, w, out)
        return out

    def add(self, x: Any, y: Any) -> Any:
        out = self.Ciphertext()
        self.ev.add(x, y, out)
        return out

    def add_weight(self, x: Any, name: str) -> Any:
        w, out = self.weights[name], self.Ciphertext()
        if isinstance(w, self.s.seal.Plaintext):
            self.ev.add_plain(x, w, out)
        else:
            self.ev.add(x, w, out)
        return out

    def finish(self, x: Any) -> Any:
        out = self.Ciphertext()
        if x.size() > 2:
            self.ev.relinearize(x, self.s.rlk, out)
        else:
            out = x
        self.ev.rescale_to_next_inplace(out)
        return out

    def square(self, x: Any) -> Any:
        out = self.Ciphertext()
        self.ev.square(x, out)
        self.ev.relinearize_inplace(out, self.s.rlk)
        self.ev.rescale_to_next_inplace(out)
        return out


# -- single key --------------------------------------------------------------------------------------

def single_key(model: Any, images: np.ndarray, plain_logits: np.ndarray, cpus: list[int], *, clear_images: int,
               seal_ok: str | None, watch: Watch) -> dict:
    """Sections 2 and 3 (see the module docstring)."""
    import shaper._native as nat

    params = cnn_parameters()
    trace = P.trace(params)
    one = Config("shaper 1T", {cpus[0]}, 1)
    two = Config("shaper 2T", set(cpus[:2]), 2) if len(cpus) >= 2 else None
    seal_cfg = Config("SEAL 1T", {cpus[0]}, None)
    one.enter()
    plain_pred = np.argmax(plain_logits, axis=1)
    out: dict = {"shaper": {}, "seal": None}

    print("shaper: keys ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    keys = ckks.KeySet(params, rotations=trace.rotation_steps)
    keygen_s = time.perf_counter() - t
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    encoder = ckks.Encoder(params)
    image_level, image_scale = trace.specs["image"]
    packed = P.pack_images(images)

    s = None
    if seal_ok is None:
        seal_cfg.enter()
        print("SEAL: keys ...", file=sys.stderr, flush=True)
        s = Seal(trace.rotation_steps)

    for mode, encrypt in MODES.items():
        count = len(images) if mode == "image+model" else min(clear_images, len(images))
        if count == 0:
            continue
        print(f"shaper {mode}: {count} images ...", file=sys.stderr, flush=True)
        row: dict = {"encrypt": list(encrypt), "images": count}
        configs = [c for c in (one, two) if c is not None]
        with watch.section(f"shaper {mode} setup"):
            one.enter()
            t = time.perf_counter()
            weights = encrypt_model(keys.public, model, params, trace) if "model" in encrypt else \
                encode_model(model, params, trace)
            row["model_encrypt_ms" if "model" in encrypt else "model_encode_ms"] = 1e3 * (time.perf_counter() - t)
            enc_s: dict[str, list[float]] = {c.name: [] for c in configs}
            inputs: list[Any] = []
            for k in range(count):
                for c in configs:
                    c.enter()
                    if "image" in encrypt:
                        t = time.perf_counter()
                        ct = ckks.encrypt(keys.public, encoder.encode(packed[k], level=image_level, scale=image_scale))
                        enc_s[c.name].append(time.perf_counter() - t)
                        if c is one:
                            inputs.append(ct)
                if "image" not in encrypt:
                    inputs.append(packed[k])
        backend = P.CkksBackend(ev, weights, trace)
        seal_here = s is not None and mode == "image+model"
        seal_row: dict = {}
        if seal_here:
            with watch.section("SEAL setup"):
                seal_cfg.enter()
                t = time.perf_counter()
                seal_weights = s.encrypt_model(model)
                seal_row["model_encrypt_ms"] = 1e3 * (time.perf_counter() - t)
                seal_backend = SealBackend(s, seal_weights)
                lists = [v.tolist() for v in packed[:count]]  # the binding takes Python lists
                seal_inputs, seal_enc = [], []
                for k in range(count):
                    t = time.perf_counter()
                    seal_inputs.append(s.encrypt(s.encode(lists[k], *s.trace.specs["image"])))
                    seal_enc.append(time.perf_counter() - t)
        # warm-up (untimed), then every image under each configuration in turn
        for c in configs:
            c.enter()
            P.forward(backend, inputs[0])
        if seal_here:
            seal_cfg.enter()
            P.forward(seal_backend, seal_inputs[0])
        eval_s: dict[str, list[float]] = {c.name: [] for c in configs}
        seal_eval: list[float] = []
        outputs, seal_outputs, same_threads = [], [], True
        shares: list[float | None] = []
        with watch.section(f"evaluation {mode}"):
            for k in range(count):
                other = OtherCpu()
                first = None
                for c in configs:
                    c.enter()
                    t = time.perf_counter()
                    y = P.forward(backend, inputs[k])
                    eval_s[c.name].append(time.perf_counter() - t)
                    if first is None:
                        first = y
                    elif not np.array_equal(first.data, y.data):
                        same_threads = False
                outputs.append(first)
                if seal_here:
                    seal_cfg.enter()
                    t = time.perf_counter()
                    seal_outputs.append(P.forward(seal_backend, seal_inputs[k]))
                    seal_eval.append(time.perf_counter() - t)
                shares.append(other.share())
                if (k + 1) % 10 == 0 or k + 1 == count:
                    print(f"  {k + 1}/{count}: shaper 1T {1e3 * statistics.median(eval_s[one.name]):.0f} ms"
                          + (f", SEAL {1e3 * statistics.median(seal_eval):.0f} ms" if seal_here else ""),
                          file=sys.stderr, flush=True)
        one.enter()
        dec_s, slots = [], []
        for y in outputs:
            t = time.perf_counter()
            slots.append(encoder.decode(ckks.decrypt(keys.secret, y)))
            dec_s.append(time.perf_counter() - t)
        logits = P.logits(np.stack(slots))
        pred = np.argmax(logits, axis=1)
        quiet = [v is not None and v < QUIET_SHARE for v in shares]
        row.update({
            "keygen_s": keygen_s,
            "eval": {c.name: stats_ms(v, quiet) for c, v in zip(configs, eval_s.values())},
            "other_cpu_share_per_image": [None if v is None else round(v, 3) for v in shares],
            "encrypt_image": {c.name: stats_ms(v) for c, v in zip(configs, enc_s.values()) if v} or None,
            "decrypt": stats_ms(dec_s),
            "sizes_bytes": {"image_ciphertext": len(ckks.to_bytes(inputs[0])) if "image" in encrypt else 0,
                            "model": sum(len(ckks.to_bytes(w)) for w in weights.values()) if "model" in encrypt else 0,
                            "output_ciphertext": len(ckks.to_bytes(outputs[0]))},
            "predicted": pred.tolist(),
            "agree_with_plaintext": float(np.mean(pred == plain_pred[:count])),
            "all_equal_plaintext": bool(np.array_equal(pred, plain_pred[:count])),
            "max_logit_error": float(np.max(np.abs(logits - plain_logits[:count]))),
            "threads_outputs_identical": same_threads,
        })
        out["shaper"][mode] = row
        if seal_here:
            seal_cfg.enter()
            dec, seal_slots = [], []
            for y in seal_outputs:
                t = time.perf_counter()
                seal_slots.append(s.decrypt(y))
                dec.append(time.perf_counter() - t)
            seal_logits = P.logits(np.stack(seal_slots))
            seal_pred = np.argmax(seal_logits, axis=1)
            seal_row.update({
                "encrypt": ["image", "model"], "images": count, "keygen_s": s.keygen_seconds,
                "eval": {seal_cfg.name: stats_ms(seal_eval, quiet)},
                "encrypt_image": {seal_cfg.name: stats_ms(seal_enc)},
                "decrypt": stats_ms(dec),
                "sizes_bytes": {"image_ciphertext": s.ct_bytes(seal_inputs[0]),
                                "model": sum(s.ct_bytes(w) for w in seal_weights.values()),
                                "output_ciphertext": s.ct_bytes(seal_outputs[0])},
                "predicted": seal_pred.tolist(),
                "agree_with_plaintext": float(np.mean(seal_pred == plain_pred[:count])),
                "all_equal_plaintext": bool(np.array_equal(seal_pred, plain_pred[:count])),
                "max_logit_error": float(np.max(np.abs(seal_logits - plain_logits[:count]))),
                "primes_equal_shaper": s.primes == list(params.primes),
                "output_level": s.ctx.get_context_data(seal_outputs[0].parms_id()).chain_index(),
            })
            out["seal"] = seal_row
            del seal_inputs, seal_outputs, seal_weights, seal_backend
        del inputs, outputs, weights, backend
    nat.set_threads(max(1, len(cpus)))
    bench._pin(set(cpus))
    return out


# -- threshold ------------------------------------------------------------------------------------

def threshold_party(session: Any, method: str, images: Any, labels: Any, model: Any) -> dict:
    """One party: joint keys with the plan's rotation keys, then ``jobs.infer_job`` (party 0 the
    client, the last party the model owner, every party evaluating), timed per image through its progress
    events. Pinned to CPU ``index mod cpus``, one native thread."""
    import shaper._native as nat

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    pin = {cpus[session.index % len(cpus)]}
    bench._pin(pin)
    nat.set_threads(1)
    bench._pin(pin)
    params = cnn_parameters()
    steps = P.trace(params).rotation_steps
    engine = engine_for(session)
    b0, t0 = session.stats.bytes_sent, time.perf_counter()
    keys = tc.keygen(engine, params, rotations=steps, method=method, budget=CNN_BUDGET)
    keygen = {"seconds": time.perf_counter() - t0, "bytes_sent": session.stats.bytes_sent - b0,
              "phases": [p.__dict__ for p in keys.phases], "sizes": keys.sizes(), "rotation_keys": len(keys.galois)}
    marks: list[tuple[float, dict]] = []
    client, owner = session.index == 0, session.index == session.n - 1
    report = jobs.infer_job(session, keys, images=images if client else None, labels=labels if client else None,
                            model=model if owner else None, encrypt=("image", "model"),
                            progress=lambda e: marks.append((time.perf_counter(), dict(e))))

    def per_item(phase: str) -> list[float]:
        """Seconds between consecutive 'done' events of ``phase`` (the first from its start)."""
        out, last = [], None
        for t, e in marks:
            if e.get("phase") == phase and e.get("status") == "start":
                last = t
            elif e.get("phase") == phase and "done" in e and last is not None:
                out.append(t - last)
                last = t
        return out

    report = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in report.items()}
    report.update(keygen=keygen, eval_seconds=per_item("evaluate"), encrypt_seconds=per_item("encrypt images"))
    return report


def threshold(method: str, model: Any, images: np.ndarray, labels: np.ndarray, plain_pred: np.ndarray) -> dict:
    print(f"threshold, 2 parties, {method} keys, {len(images)} images ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        res = launch(2, threshold_party, method, images, labels, model, config=NetConfig(timeout=3600),
                     workers_per_party=1, timeout=3600)
    except Exception as exc:  # noqa: BLE001 (a failed row is reported, the rest still runs)
        print(f"  FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return {"method": method, "error": f"{type(exc).__name__}: {exc}"}
    wall = time.perf_counter() - t
    client = res[0]
    pred = np.asarray(client["predicted"])
    row = {
        "method": method, "parties": 2, "images": len(images), "wall_s": wall,
        "keygen_s": max(r["keygen"]["seconds"] for r in res),
        "keygen_bytes_sent_per_party": [r["keygen"]["bytes_sent"] for r in res],
        "keygen_phases_party0": client["keygen"]["phases"], "key_sizes": client["keygen"]["sizes"],
        "rotation_keys": client["keygen"]["rotation_keys"],
        "eval": stats_ms(client["eval_seconds"]), "encrypt_image": stats_ms(client["encrypt_seconds"]),
        "model_encrypt_s": next(p["seconds"] for p in res[-1]["phases"] if p["name"].startswith("encrypt model")),
        "joint_decryption_batch_s": max(next(p["seconds"] for p in r["phases"] if p["name"] == "joint decryption")
                                        for r in res),
        "joint_decryption_bytes_sent_per_party": [next(p["bytes_sent"] for p in r["phases"]
                                                       if p["name"] == "joint decryption") for r in res],
        "inference_bytes_sent_per_party": [r["bytes_sent"] - r["keygen"]["bytes_sent"] for r in res],
        "total_bytes_sent_per_party": [r["bytes_sent"] for r in res],
        "phases": {r["party"]: r["phases"] for r in res},
        "accuracy": client.get("accuracy"),
        "agree_with_plaintext": float(np.mean(pred == plain_pred)),
        "all_equal_plaintext": bool(np.array_equal(pred, plain_pred)),
        "precision_bits": client["precision_bits"], "cost": client["cost"],
        "pinning": "party i on CPU i mod cpus, 1 native thread; party 0 client, party 1 model owner, both evaluate",
    }
    row["joint_decryption_per_image_ms"] = 1e3 * row["joint_decryption_batch_s"] / len(images)
    print(f"  keygen {row['keygen_s']:.1f} s, eval {row['eval']['median_ms']:.0f} ms/image, joint decryption "
          f"{row['joint_decryption_batch_s']:.2f} s per batch, = plaintext: {row['all_equal_plaintext']}",
          file=sys.stderr, flush=True)
    return row


# -- report -----------------------------------------------------------------------------------------

def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v:.1f} ms" if v < 1000 else f"{v / 1e3:.2f} s")


def _mb(v: float | None) -> str:
    return "-" if v is None else f"{v / 2**20:.2f} MiB"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or not b else f"{a / b:.2f}x"


def print_table(result: dict) -> None:
    acc = result["plaintext"]
    print(f"\n**Encrypted MNIST CNN, N = 2^14, q = 60 + 6x53 bits, scale 2^53, {result['meta']['images']} images**\n")
    print(f"plaintext accuracy (bundled model): {acc['test_accuracy']:.2%} on the 10,000 test images, "
          f"{acc['subset_accuracy']:.2%} on the {acc['subset_images']} encrypted ones\n")
    sk = result["single_key"]
    full = sk["shaper"].get("image+model", {})
    seal = sk.get("seal") or {}

    def ev(row: dict, cfg: str, key: str = "median_ms") -> float | None:
        return (row.get("eval") or {}).get(cfg, {}).get(key)

    def enc(row: dict, cfg: str) -> float | None:
        return ((row.get("encrypt_image") or {}).get(cfg) or {}).get("median_ms")

    print("| single key, image + model encrypted | shaper 1T | shaper 2T | SEAL 1T | SEAL/shaper 1T | GMPFHE | GMPFHE/shaper 1T |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = [
        ("eval / image, median", ev(full, "shaper 1T"), ev(full, "shaper 2T"), ev(seal, "SEAL 1T"), PAPER["eval_ms"]),
        (f"eval / image, median over quiet images ({(full.get('eval') or {}).get('shaper 1T', {}).get('quiet_count')})",
         ev(full, "shaper 1T", "quiet_median_ms"), ev(full, "shaper 2T", "quiet_median_ms"),
         ev(seal, "SEAL 1T", "quiet_median_ms"), PAPER["eval_ms"]),
        ("eval / image, min", ev(full, "shaper 1T", "min_ms"), ev(full, "shaper 2T", "min_ms"),
         ev(seal, "SEAL 1T", "min_ms"), None),
        ("eval / image, mean", ev(full, "shaper 1T", "mean_ms"), ev(full, "shaper 2T", "mean_ms"),
         ev(seal, "SEAL 1T", "mean_ms"), None),
        ("encrypt / image, median", enc(full, "shaper 1T"), enc(full, "shaper 2T"), enc(seal, "SEAL 1T"),
         PAPER["encrypt_ms"]),
        ("encrypt model (25 vectors)", full.get("model_encrypt_ms"), None, seal.get("model_encrypt_ms"), None),
        ("decrypt + decode / image, median", (full.get("decrypt") or {}).get("median_ms"), None,
         (seal.get("decrypt") or {}).get("median_ms"), None),
        ("keys (pk, rlk, 28 rotation)", 1e3 * full["keygen_s"] if full else None, None,
         1e3 * seal["keygen_s"] if seal else None, None),
    ]
    for label, a, b, c, paper in rows:
        print(f"| {label} | {_ms(a)} | {_ms(b)} | {_ms(c)} | {_ratio(c, a)} | {_ms(paper)} | {_ratio(paper, a)} |")
    fs, ss = full.get("sizes_bytes", {}), seal.get("sizes_bytes", {})
    for key in ("image_ciphertext", "model", "output_ciphertext"):
        print(f"| size {key.replace('_', ' ')} | {_mb(fs.get(key))} | | {_mb(ss.get(key))} | {_ratio(ss.get(key), fs.get(key))} | | |")
    for label, key in (("agreement with plaintext", "agree_with_plaintext"),):
        print(f"| {label} | {full.get(key, float('nan')):.2%} | | {seal.get(key, float('nan')):.2%} | | | |")
    print(f"| max logit error | {full.get('max_logit_error', float('nan')):.2e} | | "
          f"{seal.get('max_logit_error', float('nan')):.2e} | | | |")

    print("\n| shaper single key, per mode | images | eval 1T median | eval 2T median | 1T/2T | quiet images "
          "| eval 1T quiet median | eval 2T quiet median | encrypt model / encode | = plaintext | max logit error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode, row in sk["shaper"].items():
        a, b = ev(row, "shaper 1T"), ev(row, "shaper 2T")
        qa, qb = ev(row, "shaper 1T", "quiet_median_ms"), ev(row, "shaper 2T", "quiet_median_ms")
        model_ms = row.get("model_encrypt_ms", row.get("model_encode_ms"))
        print(f"| {mode} | {row['images']} | {_ms(a)} | {_ms(b)} | {_ratio(a, b)} | "
              f"{row['eval']['shaper 1T'].get('quiet_count')} | {_ms(qa)} | {_ms(qb)} | {_ms(model_ms)} | "
              f"{row['all_equal_plaintext']} ({row['agree_with_plaintext']:.0%}) | {row['max_logit_error']:.2e} |")

    if result["threshold"]:
        print("\n| threshold, 2 parties | images | keygen | eval / image median | encrypt / image | joint decryption batch "
              "| per image | MB sent / party (keygen) | MB sent / party (inference) | accuracy | = plaintext |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in result["threshold"]:
            if "error" in r:
                print(f"| {r['method']} | FAILED: {r['error'][:80]} |")
                continue
            print(f"| {r['method']} | {r['images']} | {r['keygen_s']:.1f} s | {_ms(r['eval']['median_ms'])} | "
                  f"{_ms(r['encrypt_image']['median_ms'])} | {_ms(1e3 * r['joint_decryption_batch_s'])} | "
                  f"{_ms(r['joint_decryption_per_image_ms'])} | "
                  f"{max(r['keygen_bytes_sent_per_party']) / 1e6:,.1f} | {max(r['inference_bytes_sent_per_party']) / 1e6:,.1f} | "
                  f"{r['accuracy']:.2%} | {r['all_equal_plaintext']} |")
    print("\nratios:")
    for k, v in result["ratios"].items():
        print(f"  {k}: {v}")
    for k, v in result["acceptance"].items():
        print(f"  acceptance {k}: {v}")
    for note in result["meta"]["notes"]:
        print(f"- {note}")


# -- main -----------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=100, help="encrypted subset: the first K test images")
    ap.add_argument("--clear-images", type=int, default=None,
                    help="images of the model-in-the-clear and image-in-the-clear rows (default: --images)")
    ap.add_argument("--threshold-images", type=int, default=None, help="images of the threshold runs (default: --images)")
    ap.add_argument("--methods", default="local,exact", help="threshold key-generation methods, comma-separated ('' none)")
    ap.add_argument("--no-seal", action="store_true")
    ap.add_argument("--model", help="a weights file instead of the bundled model (development only)")
    ap.add_argument("--wait-quiet", type=float, default=900,
                    help="seconds to wait for compilers/test runs/other CPU users before timing (0: do not wait)")
    ap.add_argument("--quick", action="store_true", help="4 images, local threshold keys only, no waiting (smoke run)")
    ap.add_argument("--out", default=os.path.join("benchmarks", "results", "cnn.json"), help="JSON path ('' none)")
    args = ap.parse_args()
    if args.quick:
        args.images, args.methods, args.wait_quiet = min(args.images, 4), "local", 0
    clear_images = args.images if args.clear_images is None else args.clear_images
    threshold_images = args.images if args.threshold_images is None else args.threshold_images
    methods = [m for m in args.methods.split(",") if m]
    started = time.time()

    why = bench.shaper_available()
    if why:
        print(f"shaper's native CKKS is not available: {why}", file=sys.stderr)
        return 1
    seal_ok = "--no-seal" if args.no_seal else bench.seal_available()
    if seal_ok:
        print(f"[skip] SEAL: {seal_ok}", file=sys.stderr)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))

    # 1. plaintext accuracy
    model = cnn.CnnModel.load(args.model) if args.model else cnn.bundled()
    test_images, test_labels = mnist.load_test()
    x_all = test_images / 255.0
    plain_all = model.forward(x_all)
    plain_pred_all = np.argmax(plain_all, axis=1)
    images, labels = x_all[:args.images], test_labels[:args.images]
    plain_logits = plain_all[:args.images]
    plaintext = {"test_images": len(x_all), "test_accuracy": float(np.mean(plain_pred_all == test_labels)),
                 "subset_images": len(images),
                 "subset_accuracy": float(np.mean(plain_pred_all[:args.images] == labels)),
                 "packed_plan_max_difference": float(np.max(np.abs(
                     P.logits(P.packed_forward(model, images[:10])) - plain_logits[:10])))}
    print(f"plaintext: {plaintext['test_accuracy']:.2%} on {len(x_all)} test images, "
          f"{plaintext['subset_accuracy']:.2%} on the first {len(images)}", file=sys.stderr, flush=True)

    still_busy = bench.wait_quiet(args.wait_quiet) if args.wait_quiet else bench.machine_busy()
    capacity = bench.parallel_capacity(cpus)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    watch = Watch()
    watch.seen.update(still_busy)

    # 2, 3. single key: shaper and SEAL
    single = single_key(model, images, plain_logits, cpus, clear_images=clear_images, seal_ok=seal_ok, watch=watch)
    load_mid = os.getloadavg() if hasattr(os, "getloadavg") else None

    # 4. threshold
    thr = [threshold(m, model, x_all[:threshold_images], test_labels[:threshold_images],
                     plain_pred_all[:threshold_images]) for m in methods]

    # 5. ratios, acceptance
    full, seal = single["shaper"]["image+model"], single.get("seal")
    one = full["eval"]["shaper 1T"]["median_ms"]
    ratios: dict[str, Any] = {
        "paper_eval_over_shaper_1t": round(PAPER["eval_ms"] / one, 2),
        "paper_encrypt_over_shaper_1t": round(PAPER["encrypt_ms"] / full["encrypt_image"]["shaper 1T"]["median_ms"], 2),
    }
    if "shaper 2T" in full["eval"]:
        ratios["shaper_1t_over_2t"] = round(one / full["eval"]["shaper 2T"]["median_ms"], 2)
        ratios["paper_eval_over_shaper_2t"] = round(PAPER["eval_ms"] / full["eval"]["shaper 2T"]["median_ms"], 2)
    quiet_one = full["eval"]["shaper 1T"].get("quiet_median_ms")
    if quiet_one:
        ratios["paper_eval_over_shaper_1t_quiet"] = round(PAPER["eval_ms"] / quiet_one, 2)
        quiet_two = full["eval"].get("shaper 2T", {}).get("quiet_median_ms")
        if quiet_two:
            ratios["shaper_1t_over_2t_quiet"] = round(quiet_one / quiet_two, 2)
        if seal and seal["eval"]["SEAL 1T"].get("quiet_median_ms"):
            ratios["seal_over_shaper_1t_eval_quiet"] = round(seal["eval"]["SEAL 1T"]["quiet_median_ms"] / quiet_one, 2)
    if seal:
        ratios["seal_over_shaper_1t_eval"] = round(seal["eval"]["SEAL 1T"]["median_ms"] / one, 2)
        ratios["seal_over_shaper_1t_encrypt"] = round(seal["encrypt_image"]["SEAL 1T"]["median_ms"]
                                                      / full["encrypt_image"]["shaper 1T"]["median_ms"], 2)
        ratios["seal_over_shaper_model_encrypt"] = round(seal["model_encrypt_ms"] / full["model_encrypt_ms"], 2)
        ratios["seal_over_shaper_decrypt"] = round(seal["decrypt"]["median_ms"] / full["decrypt"]["median_ms"], 2)
    for r in thr:
        if "error" not in r:
            ratios[f"paper_decrypt_over_threshold_{r['method']}_per_batch"] = round(
                PAPER["decrypt_s"] / r["joint_decryption_batch_s"], 3)
            ratios[f"paper_decrypt_over_threshold_{r['method']}_per_image"] = round(
                1e3 * PAPER["decrypt_s"] / r["joint_decryption_per_image_ms"], 2)
            ratios[f"paper_eval_over_threshold_{r['method']}"] = round(PAPER["eval_ms"] / r["eval"]["median_ms"], 2)
    acceptance = {"eval_ms_per_image_1t_target": TARGET_EVAL_MS, "eval_ms_per_image_1t": one,
                  "met": one <= TARGET_EVAL_MS, "eval_ms_per_image_1t_quiet_images": quiet_one,
                  "met_on_quiet_images": None if quiet_one is None else quiet_one <= TARGET_EVAL_MS}
    failures = []
    for mode, row in single["shaper"].items():
        if not row["all_equal_plaintext"]:
            failures.append(f"shaper {mode}: predictions differ from the plaintext model on "
                            f"{round((1 - row['agree_with_plaintext']) * row['images'])} images")
        if not row["threads_outputs_identical"]:
            failures.append(f"shaper {mode}: 1T and 2T output ciphertexts differ")
    if seal and not seal["all_equal_plaintext"]:
        failures.append("SEAL: predictions differ from the plaintext model")
    for r in thr:
        if "error" in r:
            failures.append(f"threshold {r['method']}: {r['error']}")
        elif not r["all_equal_plaintext"]:
            failures.append(f"threshold {r['method']}: predictions differ from the plaintext model")

    seen = sorted(watch.seen)
    notes = ["per-image evaluation: median over images (min, mean and every sample in the JSON); configurations "
             "take turns image by image; one untimed warm-up image each",
             f"quiet images: image rounds (shaper 1T, 2T, SEAL on one image) during which all other processes "
             f"together used < {QUIET_SHARE} of a CPU (/proc/stat minus this process; per round in the JSON)",
             f"{cpu_model()}, {len(cpus)} CPUs; 1T pinned to one CPU, 2T to two"
             + ("" if capacity is None else f" (two spinning processes do {capacity:.2f}x the work of one)"),
             "SEAL: tenseal.sealapi, no hoisted rotations in its API (rotate_many = separate rotate_vector calls); "
             "lazy relinearisation like shaper's (5 relinearisations); sizes uncompressed",
             "encryption: encode + public-key encryption of one packed image (SEAL: from a Python list built "
             "beforehand); decryption: decrypt + decode of one level-0 output",
             "threshold: 2 parties over loopback TLS on this machine, party i pinned to CPU i, 1 native thread; "
             "per-image evaluation and encryption at the client (party 0) from the job's progress events",
             "GMPFHE: 1,007 ms eval, 209 ms encryption per image, 0.04 s decryption (2 parties, LAN), their machine"]
    if seen:
        notes.append(f"machine NOT quiet during the single-key sections ({len(seen)} observations, meta.quiet)")
    meta = {"versions": bench._versions(),
            "images": len(images), "clear_images": min(clear_images, len(images)), "threshold_images": threshold_images,
            "image_selection": "the first K images of the MNIST test set (t10k, = mnist.sample()[:K])",
            "model": {"file": None if args.model else os.path.relpath(str(cnn.model.BUNDLED_FILE)),
                      "sha256": mnist.sha256(args.model or cnn.model.BUNDLED_FILE),
                      "training": dict(model.training) if model.training else None,
                      "test_accuracy_recorded": model.test_accuracy},
            "parameters": {"n": 1 << 14, "q_bits": list(CNN_CHAIN[1]), "p_bits": CNN_CHAIN[2],
                           "scale_bits": CNN_CHAIN[3], "seal_bits": SEAL_BITS},
            "plan_cost": P.trace(cnn_parameters()).cost(),
            "rotation_steps": list(P.trace(cnn_parameters()).rotation_steps),
            "threads": {"shaper 1T": "shaper._native.set_threads(1), pinned to one CPU",
                        "shaper 2T": "set_threads(2), pinned to two CPUs", "SEAL 1T": "single-threaded, one CPU",
                        "threshold": "each party 1 native thread on its own CPU"},
            "statistic": "per image: median over the images (also min, mean, samples, and the median over the "
                         f"quiet images: other processes < {QUIET_SHARE} CPU during that image's round); one sample = "
                         "one image's "
                         "plan.forward wall time (perf_counter) on an already encrypted image; encryption/decryption "
                         "likewise per image; model encryption and key generation: one wall time; threshold "
                         "per-image times from the gaps between the job's per-image progress events at the client",
            "quick": args.quick, "two_cpu_throughput": None if capacity is None else round(capacity, 3),
            "quiet": {"quiet": not seen, "waited_up_to_s": args.wait_quiet, "busy_seen": seen,
                      "loadavg_before": load_before, "loadavg_after_single_key": load_mid},
            "paper": PAPER, "duration_s": None, "notes": notes}
    result = {"meta": meta, "plaintext": plaintext, "single_key": single, "threshold": thr, "ratios": ratios,
              "acceptance": acceptance, "failures": failures}
    meta["duration_s"] = round(time.time() - started, 1)
    print_table(result)
    if args.out:
        write_json(args.out, result)
        print(f"wrote {args.out}", file=sys.stderr)
    for line in failures:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
