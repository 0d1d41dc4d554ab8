"""Joint input encryption under a threshold BGV key: ciphertexts whose c_1 and error no party
chose, so that every party can account for them (and for what is computed from them) when a
decryption is asked.

Why: anyone can form a ciphertext that encrypts a function of the secret without knowing it —
(0, 1) encrypts s mod 2 with phase s — and an input crafted so, once put through an agreed
circuit, decrypts to something that depends on s (docs/bgv.md, "Threat model"). Here:

1. the owner says how many slot vectors it brings; every party checks the tag;
2. a seed no party chose alone (committed, then opened) gives a_k, uniform on the chain;
3. party i opens b_i = 2e_i − a_k·s_i, the owner adding its encoded plaintext; e_i is party i's
   own Gaussian (the parameters' σ, from its CSPRNG); the openings are committed first;
4. c_0 = Σ_i b_i, c_1 = a_k: a ciphertext at the top level with phase μ + 2·Σ_i e_i.

c_1 is fixed by the joint seed, and a party that opens some other b_i only adds a term it knows,
independent of s: the plaintext moves, never towards s. Every party records each ciphertext in
its ledger with the same noise estimate (:func:`~shaper.crypto.bgv.multiparty.joint_input_noise`
with the worst-case message norm φ, so that every party's evaluator takes the same level
decisions and computes byte-identical outputs).

Cost per vector: one product a_k·s_i per limb, one local Gaussian, one committed opening of one
polynomial over the chain. No MPC sampling.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ...crypto.bgv import scheme
from ...crypto.bgv.multiparty import joint_input_noise, joint_input_share
from ...crypto.bgv.serial import ciphertext_digest
from ...crypto.ckks.keys import gaussian_bound, sample_gaussian
from ...crypto.prg import Prg, default_prg
from ...errors import ConfigError
from ..threshold_ckks.commit import committed_open_rows
from ..threshold_ckks.inputs import announce
from ..threshold_ckks.ledger import Entry
from ..threshold_ckks.polys import active, joint_seed, open_with_errors

__all__ = ["encrypt_jointly", "entry"]

#: the most vectors one call encrypts (bounds the memory a peer's count can cause)
MAX_VECTORS = 256


def encrypt_jointly(engine: Any, keys: Any, values: Any = None, *, owner: int | None = None,
                    tag: str = "input") -> list[scheme.Ciphertext]:
    """Every party's side of a joint encryption (module docstring): the owner passes ``values``
    ((count, nslots) or (nslots,) slot values, each an element of GF(2^d) below 2^d), the others
    None. ``owner`` (a party index) may be left None: the one party that passes values owns them.
    Every party gets the same top-level ciphertexts, recorded in its ledger as inputs."""
    session = engine.session
    params = keys.params
    me = session.index
    if owner is not None and not (isinstance(owner, int) and 0 <= owner < session.n):
        raise ConfigError(f"the owner of a joint input is a party index 0..{session.n - 1}, got {owner!r}")
    alg = scheme.algebra(params.m)
    count = None
    if values is not None:
        if owner is not None and owner != me:
            raise ConfigError(f"only the owner (party {owner}) passes values to a joint encryption")
        values = _check_values(values, alg.nslots, alg.d)
        count = len(values)
    header = {"tag": tag, "count": count, "fingerprint": params.fingerprint().hex()}
    owner, count = announce(session, header, ("tag", "fingerprint"), owner, "tbgv-input", MAX_VECTORS)
    ring = scheme._ring(params)
    chain = ring.chain(params.max_level)
    seed = joint_seed(engine, f"bgv-input/{tag}")
    a = np.stack([scheme._uniform(ring, chain, Prg(hashlib.sha256(seed + k.to_bytes(4, "big")).digest()))
                  for k in range(count)])
    if active(engine):
        c0 = _c0_authenticated(engine, keys, values if me == owner else None, owner, count, a, tag)
    else:
        prg = default_prg()
        e2 = np.stack([ring.encode_signed(2 * sample_gaussian(params.phi, params.sigma, prg), chain)
                       for _ in range(count)])
        message = None
        if me == owner:
            ev = scheme.Evaluator(params)
            message = np.stack([ev.encode(v).evaluation(ring, params.max_level) for v in values])
        b = joint_input_share(ring, np.ascontiguousarray(keys.share.rows[chain]), a, e2, message)
        c0 = committed_open_rows(engine, b, params.primes, what=f"bgv-input-{tag}", error=ConfigError)
    noise = joint_input_noise(params, float(params.phi), session.n)  # worst-case message: the same at every party
    cts = [scheme.Ciphertext(np.stack([c0[k], a[k]]), params.max_level, noise, params) for k in range(count)]
    keys.ledger.record_entries([entry(ct, "input", f"joint input {tag!r} of party {owner}") for ct in cts])
    return cts


def _c0_authenticated(engine: Any, keys: Any, values: Any, owner: int, count: int, a: np.ndarray,
                      tag: str) -> np.ndarray:
    """c_0 = −a·[s] + 2e + m on the active engine
    (:func:`~shaper.protocols.threshold_ckks.polys.open_with_errors`): the owner's plaintext
    coefficients a range-checked input within [0, 1] (a GF(2) polynomial;
    anything else is refused naming the owner), e the sum of every party's own rounded
    Gaussian, each range-checked within ±⌊6σ⌋, both proven in one anchor prime and carried into
    every limb by the opening, where a check against the anchor and the MAC check of −a·[s]
    stop a term added to a share of c_0 in any limb."""
    params = keys.params
    ring = scheme._ring(params)
    chain = ring.chain(params.max_level)
    s = keys.secret(engine).rows(chain)
    bits = None
    if values is not None:
        ev = scheme.Evaluator(params)
        bits = np.stack([ev.encode(v).bits for v in values]).astype(np.int64)
    if bits is not None and bits.shape != (count, params.phi):
        raise ConfigError(f"plaintexts of shape {bits.shape}, announced ({count}, {params.phi})")
    zero = np.zeros_like(a)
    base = s.map(lambda s_: joint_input_share(ring, s_, a, zero))
    bound = gaussian_bound(params.sigma)
    return open_with_errors(base, sample_gaussian((count, params.phi), params.sigma), -bound, bound, factor=2,
                            to_form=lambda r: ring.forward(r, chain), from_form=lambda r: ring.inverse(r, chain),
                            what=f"bgv-input-{tag}", owned=(owner, bits, 0, 1))


def entry(ct: scheme.Ciphertext, kind: str, source: str) -> Entry:
    """The ledger entry of a BGV ciphertext: its digest and this party's noise estimate (the
    entry's error; message and scale 1: a BGV plaintext is bits)."""
    return Entry(ciphertext_digest(ct), kind, source, float(ct.noise), 1.0, ct.level, 1.0)


def _check_values(values: Any, nslots: int, d: int) -> np.ndarray:
    v = np.asarray(values)
    if v.ndim == 1:
        v = v[None]
    if v.ndim != 2 or v.shape[0] == 0 or v.shape[1] != nslots:
        raise ConfigError(f"joint input values must be one vector or (count, {nslots}) slot vectors, got shape "
                          f"{v.shape}")
    if not np.issubdtype(v.dtype, np.integer):
        raise ConfigError(f"joint input slot values must be integers (elements of GF(2^{d})), got {v.dtype}")
    if v.size and (int(v.min()) < 0 or int(v.max()) >= 1 << d):
        raise ConfigError(f"a joint input slot value is outside 0..2^{d} - 1 (elements of GF(2^{d}))")
    return v.astype(np.uint64)
