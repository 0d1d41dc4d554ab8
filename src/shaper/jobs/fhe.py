"""``shaper fhe demo``: n parties generate one CKKS key inside the MPC, one party encrypts,
another computes on the ciphertext with the opened keys alone, and all decrypt jointly.

Each party runs :func:`demo_job` in its own process (``shaper.net.launch``). Party 0 encrypts
x and sends the ciphertext to everyone; the last party computes y = rot(x * x, r) with the
public material only and sends y to everyone; the parties check y's digest, consent, and decrypt
it jointly with smudging sampled in the MPC. Every party compares the result with numpy.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..crypto import ckks
from ..errors import KeyValidationError
from ..protocols import threshold_ckks as tc


def run_demo(session: Any, chain: tuple, rotations: tuple[int, ...], method: str, insecure: bool,
             verbose: bool) -> dict:
    """The whole demo in one party (see the module docstring)."""
    def progress(event: dict) -> None:
        if verbose and session.index == 0 and event["status"] == "done":
            print(f"  {event['phase']:<34s} {event['seconds']:7.2f} s {event['bytes'] / 1e6:9.1f} MB sent by party 0",
                  flush=True)

    n, q_bits, p_bits, scale_bits = chain
    params = ckks.Parameters.from_literal(n, list(q_bits), p_bits, scale_bits, insecure=insecure)
    engine = tc.engine_for(session)
    start = time.perf_counter()
    keys = tc.keygen(engine, params, rotations=rotations, method=method, progress=progress)
    keygen_s = time.perf_counter() - start
    last = session.n - 1
    x = np.sin(np.arange(params.slots) * 0.01)  # party 0's data; the others know it only to check the demo
    if session.index == 0:  # the data owner encrypts (anyone holding the public key could)
        ct = ckks.encrypt(keys.public, ckks.Encoder(params).encode(x))
        session.broadcast(ckks.to_bytes(ct), "fhe-demo-input")
    else:
        ct = ckks.from_bytes(session.recv_bytes(0, "fhe-demo-input"), params)
    if session.index == last:  # someone computes with the opened keys only
        ev = keys.evaluator()
        t0 = time.perf_counter()
        y = ev.rotate(ev.mul_rescale(ct, ct), rotations[0])
        compute_s = time.perf_counter() - t0
        session.broadcast({"y": ckks.to_bytes(y).hex(), "compute_s": compute_s}, "fhe-demo-result")
    else:
        msg = session.recv_meta(last, "fhe-demo-result")
        y, compute_s = ckks.from_bytes(bytes.fromhex(msg["y"]), params), float(msg["compute_s"])
    t0 = time.perf_counter()
    got = tc.decrypt(engine, keys.share, y)
    decrypt_s = time.perf_counter() - t0
    want = np.roll(x * x, -rotations[0])
    error = float(np.max(np.abs(got - want)))
    bound = 1e-6 + 4 * 2.0 ** -tc.decryption_precision(params, y.scale)  # what the smudging costs here
    if not error < bound:
        raise KeyValidationError(f"joint decryption is off by {error:.3g} (the smudging explains {bound:.3g})")
    return {"party": session.name, "keygen_s": keygen_s, "phases": [p.__dict__ for p in keys.phases],
            "sizes": keys.sizes(), "compute_s": compute_s, "decrypt_s": decrypt_s, "error": error,
            "digest": tc.ciphertext_digest(y), "predicted_bits": tc.decryption_precision(params, y.scale), "bytes_sent": session.stats.bytes_sent, "params": repr(params),
            "sample": [float(v) for v in got[:4].real], "expected": [float(v) for v in want[:4].real]}


__all__ = ["run_demo"]
