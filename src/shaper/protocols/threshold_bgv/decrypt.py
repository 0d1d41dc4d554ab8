"""Joint BGV decryption to bits (GMPFHE's "CircuitEval", with a public modulus switch first):
the parties' shares of a level-0 phase v = μ + 2e (mod q_0) are converted to XOR shares of v's
bits inside the MPC, and only the plaintext bit of each coefficient, the parity of v's centred
value, LSB(v) ⊕ [v > (q_0 − 1)/2], is opened to the recipient(s). Nobody learns v, so the
noise is never revealed and no flooding is needed.

:func:`decrypt_many` is the protocol a party runs (threshold CKKS's rules,
:mod:`shaper.protocols.threshold_ckks.decrypt`, with bits for a flood):

1. **Accounting.** Each party looks every ciphertext up in its own ledger: a joint input
   (:func:`~.inputs.encrypt_jointly`) or the output of an agreed evaluation it ran itself
   (:func:`~.evaluation.evaluate`). Its *own* noise estimate of that ciphertext (not the one a
   file carries) must leave the phase below q_0/4 after the switch to q_0.
2. **Consent.** Each party sends the request it would answer (the 64-hex digests, the
   recipient, the key's budget) and whether it consents; unless every request is the same and
   every party consents, every party raises :class:`~shaper.errors.DecryptionRefused` naming who
   refused and why, having sent nothing but the requests.
3. **Budget.** Each party charges the decryptions to its ledger, on disk, before opening.
4. **Range check, then bits.** Inside the MPC: v's bits, [q_0/4 ≤ v ≤ q_0 − q_0/4] per
   coefficient (a phase that may have wrapped), OR-ed over every coefficient and opened as one
   bit to every party. If it is set every party raises
   :class:`~shaper.crypto.bgv.scheme.NoiseBudgetExceeded` (as a single-key decryption does) and
   nothing else is opened; otherwise the plaintext bits go to the recipient(s).

Why the accounting matters even though only bits are opened: a ciphertext with small phase
reveals nothing of s beyond its plaintext, but its *plaintext* can depend on s. (0, 1) is a
valid encryption, with phase s, of s mod 2 (the support of the secret); c_0 = (q_0 − 1)/2,
c_1 = 1 puts the phase at the wrap point so that its bits show the sign of every coefficient.
Anyone can form these from public values. A party therefore decrypts only ciphertexts whose
provenance it knows: joint inputs (c_1 from a joint seed, the error no party chose) and the
outputs of evaluations it ran itself on them. The range check makes the second crafted kind fail
with one bit opened, even if the accounting were bypassed.

Security model (the engine's): on the passive engine, passive MPC, dishonest majority; any
n − 1 parties may collude. On the active engine the phase is computed on authenticated shares of
s (a key made there), converted to authenticated bits and opened checked: any n − 1 parties may
deviate, and a deviation aborts before anything is opened.
The recipient(s) learn the plaintext polynomial's coefficients mod 2, hence every slot, and
every party learns the range check's bit. Decryption to every party opens the bits without a
commitment: a party that sends last could flip them (it could make them wrong inside the passive
engine anyway), not learn more.

**The flooded method** (``method="flood"``; SPDZ's distributed decryption with threshold CKKS's
flood). At the lowest level d where it fits, the recipient is opened v + 2 sum_i f_i mod Q_d,
f_i each party's own Gaussian of width sigma_f (:func:`~shaper.crypto.ckks.multiparty.flood_sigma`
with E = sqrt(φ) · 32 · RMS, this party's own noise estimate of the phase, the key's budget and
the attacker's work: the key-recovery argument of docs/threshold-ckks.md), on the active engine
each a range-checked input within 8.6 sigma_f and the opening MAC-checked. The flood is even, so
the parity of the centred opening is the plaintext bit; it fits where 32 · RMS + 2 n · 8.6
sigma_f ≤ Q_d / 4. What it reveals beyond the bits: the recipient(s) see the phase's error
plus the floods, which hides the error in the sense of the key-recovery argument (an attacker
with 2^64 work recovers s, or anything else whose recovery from the bits alone is that hard,
with probability at most 2^-40 over the key's budget), not statistically: the bits method
reveals nothing but the bits. Its cost is one range-checked input per coefficient and party
and one opening, against the bits method's conversion; the noise estimate it is sized by is
HElib's heuristic (:mod:`shaper.crypto.bgv.scheme`), not a proof. A phase beyond its bound
is refused at the recipient (:class:`~shaper.crypto.bgv.scheme.NoiseBudgetExceeded`).

Cost of the bits method: one Z_q → Z_2 conversion of φ coefficients of log2 q_0 bits ((n − 1) ripple-carry modular
adders, :func:`shaper.protocols.additive.convert.mod_to_bits`), three comparisons with public
constants, and an OR tree; the public switch to q_0 first keeps the circuit at q_0's 40 bits
instead of the whole chain's (the recommendation of our research notes, ghs.md §5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...crypto.bgv import scheme
from ...crypto.bgv.multiparty import SecretKeyShare, decryption_share
from ...crypto.ckks.multiparty import flood_sigma, sample_flood
from ...errors import ConfigError, DecryptionRefused
from ...kernels.modq import add_mod
from ..active.ranges import digit_widths
from ..active.shares import AuthShares
from ..api import ModShares, XorShares
from ..threshold_ckks.decrypt import FloodPolicy, consent, flood_reach
from ..threshold_ckks.ledger import digest_of
from ..threshold_ckks.polys import SharedRows, active, contributed, linear

__all__ = ["METHODS", "Flood", "decrypt_bits", "decrypt_many", "plan", "plan_flood"]

#: the most ciphertexts one joint decryption takes (bounds what a request can make a party compute)
MAX_CIPHERTEXTS = 1 << 12
#: how a joint decryption turns the phase into bits: converted inside the MPC, or flooded and opened
METHODS = ("bits", "flood")
#: the widest flood span (bits) a range-checked input over several primes is proven for (its
#: anchor's helper primes are near 2^61)
_BASIS_SPAN_BITS = 58


def _phase_bits(engine: Any, s_share: Any, cts: Sequence[scheme.Ciphertext]) -> tuple[XorShares, int]:
    """XOR shares of the level-0 phases' bits, (w, W) over len(cts)·φ coefficients, and q_0.
    ``s_share``: a :class:`~shaper.crypto.bgv.multiparty.SecretKeyShare`, its evaluation rows, or
    (the active engine) a :class:`~shaper.protocols.threshold_ckks.polys.SharedRows` of s with
    its MAC shares: then the phase is computed on authenticated shares and converted with the
    engine's checked conversion (authenticated bits)."""
    params = cts[0].params
    ring = scheme._ring(params)
    q0 = int(params.primes[0])
    parts = [scheme.switch_to(ct, 0).parts for ct in cts]
    if isinstance(s_share, SharedRows):
        c1 = np.ascontiguousarray(np.stack([p[1] for p in parts]))  # (count, 1, φ)
        c0 = np.ascontiguousarray(np.stack([ring.inverse(np.ascontiguousarray(p[0]), [0]) for p in parts]))
        s0 = s_share.rows([0])
        v = linear(lambda s_: ring.inverse(ring.mul(c1, np.ascontiguousarray(np.broadcast_to(s_, c1.shape)), [0]), [0]),
                   s0).add_public(c0)
        x = AuthShares(engine, np.ascontiguousarray(v.share.reshape(-1, 1)),
                       np.ascontiguousarray(v.mac.reshape(v.mac.shape[0], -1, 1)), (q0,))
        return engine.mod_to_bits(x), q0
    rows = s_share.rows if isinstance(s_share, SecretKeyShare) else s_share
    s0 = np.ascontiguousarray(rows[:1])
    v = np.concatenate([decryption_share(ring, s0, p, engine.me == 0) for p in parts])
    return engine.mod_to_bits(ModShares(engine, v[:, None], (q0,))), q0


def _at_least(engine: Any, bits: XorShares, q0: int, bounds: Sequence[int]) -> list[XorShares]:
    """[v ≥ b] for each public b in 1..q0 − 1, as the carries of v + 2^w − b (w = bitlen(q0)):
    one ripple of w AND layers for all bounds together (each layer batched). Only the shares'
    own operations (XOR with public words, AND, indexing), so any engine's bits work."""
    w = q0.bit_length()
    consts = [(1 << w) - b for b in bounds]
    k = len(consts)
    words = bits.words.shape[-1]
    plane = bits[0]
    carry = type(plane).stack([plane & False] * k)  # shares of 0
    for j in range(w):
        ones = np.asarray([(c >> j) & 1 for c in consts], dtype=bool)[:, None]
        flip = np.broadcast_to(np.where(ones, np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(0)), (k, words))
        s = type(plane).stack([bits[j]] * k)
        # t = 1: s OR c = NOT(NOT s AND NOT c); t = 0: s AND c
        carry = ((s ^ flip) & (carry ^ flip)) ^ flip
    return [carry[i] for i in range(k)]


def _plain(engine: Any, bits: XorShares, above: XorShares) -> XorShares:
    """LSB(v) XOR [v > (q0 − 1)/2]: the parity of the centred phase."""
    return bits[0] ^ above


def _any(engine: Any, bad: XorShares) -> XorShares:
    """One shared bit: the OR of ``bad``'s lanes, as NOT of the AND of their negations, by
    halves (an odd lane out joins the next round)."""
    good = ~bad
    while good.bits > 1:
        half = good.bits // 2
        folded = good.lanes(0, half) & good.lanes(half, 2 * half)
        good = folded if good.bits % 2 == 0 else type(good).join([folded, good.lanes(2 * half, good.bits)])
    return ~good


def decrypt_bits(engine: Any, s_share: Any, ct: Any, to: int | None = None) -> np.ndarray | None:
    """The protocol's core, without accounting, consent or range check: the plaintext
    polynomial's coefficients (uint8 (φ,), or (len(ct), φ) for a list of ciphertexts, converted
    in one batch) at ``to`` (None: every party), from this party's share (a
    :class:`~shaper.crypto.bgv.multiparty.SecretKeyShare`, or its evaluation rows). Every party
    calls it with the same ciphertexts. It decrypts whatever it is given: call
    :func:`decrypt_many` on anything a party did not make itself (module docstring)."""
    cts = list(ct) if isinstance(ct, (list, tuple)) else [ct]
    bits, q0 = _phase_bits(engine, s_share, cts)
    (above,) = _at_least(engine, bits, q0, [(q0 + 1) // 2])
    opened = engine.reveal_bits(_plain(engine, bits, above), to=to)
    if opened is None:
        return None
    out = np.asarray(opened, dtype=np.uint8).reshape(len(cts), cts[0].params.phi)
    return out if isinstance(ct, (list, tuple)) else out[0]


def plan(keys: Any, cts: Sequence[scheme.Ciphertext]) -> dict[str, Any]:
    """What this party would answer for ``cts``: the request (digests, budget) and each
    ciphertext's noise room in bits by its own estimate. Raises
    :class:`~shaper.errors.DecryptionRefused` for a ciphertext it cannot account for or whose
    phase could reach q_0/4."""
    entries = keys.ledger.accounted(cts)
    room = []
    for k, (ct, e) in enumerate(zip(cts, entries, strict=True)):
        bits = scheme.Ciphertext(ct.parts, ct.level, e.error, ct.params).capacity()
        if not bits > 0:
            raise DecryptionRefused(f"ciphertext {k} ({e.digest[:16]}...): by this party's own noise estimate its "
                                    f"phase could reach q_0/4 ({-bits:.1f} bits short); it cannot be decrypted "
                                    "reliably")
        room.append(bits)
    return {"digests": [e.digest for e in entries], "budget": keys.ledger.budget, "room_bits": room}


@dataclass(frozen=True)
class Flood:
    """The flood of one flooded joint decryption as a party plans it (:func:`plan_flood`): the
    level it opens at, the bound of the phase's coefficients there (32 RMS), E = sqrt(φ) times
    that (E >= ||e||_2), the width sigma_f each party adds (twice its Gaussian: the flood is
    even), the reach 8.6 sigma_f a flood is range-checked within, the parties, the key's budget,
    the policy and log2 Q_d."""

    level: int
    phase_bound: float
    error_bound: float
    sigma: float
    reach: int
    parties: int
    budget: int
    policy: FloodPolicy
    log_q: float

    @property
    def opened_bound(self) -> float:
        """The largest |centred opening| with honest noise and floods within their reach."""
        return self.phase_bound + 2.0 * self.parties * self.reach

    @property
    def room_bits(self) -> float:
        """Bits between the opening's bound and Q_d / 4."""
        return self.log_q - 2 - math.log2(self.opened_bound)

    def request(self) -> dict[str, Any]:
        return {"method": "flood", "level": self.level, "sigma_bits": round(math.log2(self.sigma), 9),
                "mode": self.policy.mode, "lambda": self.policy.lam, "work": self.policy.work, "budget": self.budget}


def plan_flood(keys: Any, cts: Sequence[scheme.Ciphertext], policy: FloodPolicy = FloodPolicy(), *,
               parties: int | None = None, checked: bool | None = None) -> Flood:
    """The flooded decryption this party would run for ``cts``: its own noise estimates (ledger,
    raising :class:`~shaper.errors.DecryptionRefused` for a ciphertext it cannot account for),
    and the lowest level where the phase plus every party's flood stays within Q_d / 4. With
    ``checked`` (default: the key has MAC shares) the flood's span must also be one the
    range-checked input proves. Raises :class:`~shaper.errors.ConfigError` naming the bits
    missing when no level fits (decrypt with ``method="bits"`` then)."""
    params = keys.params
    cts = list(cts)
    entries = keys.ledger.accounted(cts)
    ring = scheme._ring(params)
    n = int(parties if parties is not None else keys.share.parties)
    checked = getattr(keys, "macs", None) is not None if checked is None else checked
    top = min(ct.level for ct in cts)
    short = math.inf
    for d in range(top + 1):
        rms = max(scheme._switched(ring, e.error, ct.level, d) for ct, e in zip(cts, entries, strict=True))
        phase = scheme.TAIL * rms
        error = math.sqrt(params.phi) * phase
        sigma = flood_sigma(error, keys.ledger.budget, mode=policy.mode, lam=policy.lam, work=policy.work)
        reach = flood_reach(sigma)
        log_q = sum(math.log2(q) for q in params.primes[:d + 1])
        flood = Flood(d, phase, error, sigma, reach, n, keys.ledger.budget, policy, log_q)
        span = 2 * reach
        # bits beyond what the range-checked input proves: 2^(k+1) < q_0 in one limb, the anchor's span over several
        over = (sum(digit_widths(span)) + 2 - int(params.primes[0]).bit_length() if d == 0
                else span.bit_length() - _BASIS_SPAN_BITS) if checked else 0
        if flood.room_bits >= 0 and over <= 0:
            return flood
        short = min(short, max(-flood.room_bits, over))
    raise ConfigError(f"a flooded decryption of these ciphertexts does not fit at any level up to {top} "
                      f"({short:.1f} bits short: the flood of mode {policy.mode!r} over a budget of "
                      f"{keys.ledger.budget} is too wide for the noise left); decrypt with method='bits'")


def _open_flooded(engine: Any, keys: Any, cts: list[scheme.Ciphertext], flood: Flood,
                  to: int | None) -> np.ndarray | None:
    """c_0 + c_1 [s] + 2 [f] at level d in coefficient form, opened to ``to`` (every party when
    None): rows (count, d + 1, φ) there, None elsewhere. [f] is the sum of every party's flood,
    on the active engine each a range-checked input within the flood's reach and the opening
    MAC-checked (to one recipient, masked by its own input mask)."""
    params = keys.params
    ring = scheme._ring(params)
    limbs = list(range(flood.level + 1))
    primes = tuple(int(q) for q in params.primes[:flood.level + 1])
    parts = [scheme.switch_to(ct, flood.level).parts for ct in cts]
    c1 = np.ascontiguousarray(np.stack([p[1] for p in parts]))
    c0 = np.ascontiguousarray(np.stack([ring.inverse(np.ascontiguousarray(p[0]), limbs) for p in parts]))
    mine = sample_flood((len(cts), params.phi), flood.sigma)
    if active(engine):
        f = contributed(engine, mine, -flood.reach, flood.reach, moduli=primes)
    else:
        f = SharedRows(engine, np.ascontiguousarray(ring.from_signed(mine, limbs)), None, primes)
    qs = np.asarray(primes, dtype=np.uint64)[:, None]
    s = keys.secret(engine).rows(limbs)
    v = linear(lambda s_, f_: add_mod(ring.inverse(ring.mul(c1, np.ascontiguousarray(np.broadcast_to(s_, c1.shape)),
                                                            limbs), limbs), add_mod(f_, f_, qs), qs), s, f)
    return v.add_public(c0).open("decryption", to, error=DecryptionRefused)


def _plaintext_bits(opened: np.ndarray, primes: Sequence[int], bound: float) -> np.ndarray:
    """The parity of each centred opening (uint8 (count, φ)) from residue rows (count, R, φ);
    :class:`~shaper.crypto.bgv.scheme.NoiseBudgetExceeded` when one lies beyond ``bound``."""
    if len(primes) == 1:  # int64 throughout
        q = int(primes[0])
        x = opened[:, 0].astype(np.int64)
    else:  # the CRT in Python integers (object arrays): a level above 0 is the rare case
        q = math.prod(int(p) for p in primes)
        x = np.zeros(opened.shape[0::2], dtype=object)
        for k, p in enumerate(primes):
            m = q // int(p)
            x = (x + opened[:, k].astype(object) * (m * pow(m, -1, int(p)))) % q
    centred = np.where(x > q // 2, x - q, x)
    peak = int(np.max(np.abs(centred)))
    bits = (centred % 2).astype(np.uint8)
    if peak > bound:
        raise scheme.NoiseBudgetExceeded(f"a flooded phase reached 2^{math.log2(peak):.1f}, beyond its bound "
                                         f"2^{math.log2(bound):.1f}: the ciphertext's noise outgrew its estimate and "
                                         "its bits cannot be trusted")
    return bits


def decrypt_many(engine: Any, keys: Any, cts: Sequence[scheme.Ciphertext], *, to: int | None = None,
                 approve: Callable[[dict], bool] | None = None, method: str = "bits",
                 policy: FloodPolicy = FloodPolicy()) -> np.ndarray | None:
    """Joint decryption of accounted ciphertexts in one consent round: the plaintext bits
    (uint8 (len(cts), φ)) at party ``to`` (every party when None), None elsewhere; decode
    slots with ``scheme.algebra(m).decode``. ``keys`` is this party's
    :class:`~.keystore.JointKeys` (share and ledger); ``approve`` sees the request and may
    refuse it. Raises :class:`~shaper.errors.DecryptionRefused` at every party unless every
    party accounts for every ciphertext, has budget left, agrees on the request and consents,
    and :class:`~shaper.crypto.bgv.scheme.NoiseBudgetExceeded` at every party if a phase may have
    wrapped (module docstring). ``method``: "bits" (the phase converted inside the MPC; nothing
    but the bits is opened) or "flood" (the phase flooded by ``policy`` and opened, the module
    docstring's flooded method: far cheaper on the active engine, and it reveals the flooded
    error as threshold CKKS does)."""
    if method not in METHODS:
        raise ConfigError(f"a BGV joint decryption's method is one of {', '.join(METHODS)}, got {method!r}")
    params = keys.params
    cts = list(cts)
    if not 1 <= len(cts) <= MAX_CIPHERTEXTS:
        raise ConfigError(f"a joint decryption takes 1..{MAX_CIPHERTEXTS} ciphertexts, got {len(cts)}")
    for k, ct in enumerate(cts):
        if not isinstance(ct, scheme.Ciphertext) or ct.params != params:
            raise ConfigError(f"ciphertext {k} is not a BGV ciphertext of this key's parameters")
        if len(ct.parts) != 2:
            raise ConfigError(f"ciphertext {k} has {len(ct.parts)} parts: relinearise before decrypting")
    session = engine.session
    if to is not None and not (isinstance(to, int) and 0 <= to < session.n):
        raise ConfigError(f"decryption recipient {to!r} is not a party index 0..{session.n - 1}")
    request: dict[str, Any] = {"digests": [digest_of(ct) for ct in cts], "to": to, "method": method}
    floods: list[Flood] = []

    def prepare() -> None:
        if method == "flood":
            floods.append(plan_flood(keys, cts, policy, parties=session.n, checked=active(engine)))
            request.update(floods[0].request())
        else:
            request["budget"] = plan(keys, cts)["budget"]

    consent(session, keys, len(cts), request, tag="tbgv-decrypt", approve=approve, prepare=prepare)
    flood = floods[0] if floods else None
    if flood is not None:
        opened = _open_flooded(engine, keys, cts, flood, to)
        if opened is None:
            return None
        return _plaintext_bits(opened, params.primes[:flood.level + 1], flood.opened_bound)
    bits, q0 = _phase_bits(engine, keys.secret(engine) if active(engine) else keys.share, cts)
    above, low, high = _at_least(engine, bits, q0, [(q0 + 1) // 2, q0 // 4, q0 - q0 // 4 + 1])
    if engine.reveal_bits(_any(engine, low & ~high))[0]:  # some q0/4 <= v <= q0 - q0/4
        raise scheme.NoiseBudgetExceeded("a jointly decrypted phase reached q_0/4 (checked inside the MPC): the "
                                         "ciphertext cannot be decrypted reliably; only that one bit was opened")
    opened = engine.reveal_bits(_plain(engine, bits, above), to=to)
    if opened is None:
        return None
    return np.asarray(opened, dtype=np.uint8).reshape(len(cts), params.phi)
