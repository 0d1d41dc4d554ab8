"""Joint decryption to a label: the index of the largest of a ciphertext's first slots, computed
inside the MPC from the parties' shares of the phase and opened to one recipient. No party sees
a slot value, a coefficient or the noise; the recipient sees the label.

Every party calls :func:`decrypt_argmax` with its own keys and its own copy of the ciphertexts
(the rules of :func:`~.decrypt.decrypt_many`: accounting in its own ledger, one consent round,
the budget charged on disk before anything is computed), then:

1. **Phase shares.** [v] = c_0 + c_1 [s] on limb q_0, in coefficient form (linear in the shares
   of s; on the active engine with their MAC shares). Only the coefficients at multiples of
   ``N / (2 period)`` are kept: when the slot vector repeats with period ``period`` (the CNN
   writes its ten logits into every 128-slot block), the message polynomial lies in the
   subring Z[X^(N / 2 period)] and those 2 period coefficients carry the slots; decoding them
   alone averages each slot over its copies (the noise in the other coefficients drops out).
2. **Exact lift.** Each kept coefficient, offset by h = (q_0 - 1)/2 so that the centred value
   c is u = c + h in [0, q_0), is converted to bits (the engine's Z_q -> Z_2 conversion: exact,
   checked on the active engine), its low ``shift`` bits dropped and the rest converted back:
   U = floor(u / 2^shift), an integer below q_0 / 2^shift, exactly.
3. **Fixed-point decode.** L_a = sum_t M_at U_t - C_a for each of the ``classes`` slots, with
   M = round(2^frac x the decoding matrix) and C_a the offset's public part: a public linear
   map, local. The shift is chosen so that |L_a - L_b| < q_0 / 4 for *every* phase (a worst case
   over all coefficients in (-q_0/2, q_0/2)), so the sign of a difference read mod q_0 is its
   true sign whatever the ciphertext holds.
4. **A tournament.** Rounds of pairwise comparisons: [L_a - L_b < 0] from the difference's
   bits (another conversion and a comparison with (q_0 + 1)/2), converted back (a daBit), and
   the winner's value and index chosen by one product each; classes - 1 comparisons in
   ceil(log2 classes) rounds. The last index is opened to the recipient alone, MAC-checked
   there on the active engine.

The label is the argmax of the slots up to :attr:`ArgmaxPlan.resolution` (the fixed-point
error's worst case, in slot units at the ciphertext's scale) plus the ciphertext's own error:
two slots closer than that may come out either way.

Security. On the active engine any n - 1 parties may deviate arbitrarily: every conversion,
product and opening is MAC-checked, so a deviation aborts every honest party before the label
is opened, or the label is the one above. What the recipient learns is the label: a function
of the phase, hence of the noise only where two slots are within the noise of each other.
That is at most log2(classes) bits per decrypted ciphertext over the key's whole budget
(Q log2(classes) bits for a budget of Q: 3.3 bits per image, 425 bits for the CNN's 128),
against a secret of N log2 3 bits (25,966 at N = 2^14) and errors of far more; an argument by
leakage-resilient LWE (docs/threshold-ckks.md, "Decryption to a label"). No flood is needed, so
the label's precision does not depend on any bound a party declares. The other parties learn
nothing (every opened value is masked inside the conversions).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks.multiparty import ciphertext_digest, validate_ciphertexts
from ...errors import ConfigError
from ...kernels.modq import matmul_mod
from ..additive import convert
from ..api import ModShares
from .decrypt import consent
from .polys import linear, ntt_copy

__all__ = ["MAX_CLASSES", "ArgmaxPlan", "argmax_plan", "decrypt_argmax"]

#: the most slots one label is chosen among (a bound on what a request makes every party compute)
MAX_CLASSES = 64


@dataclass(frozen=True, eq=False)
class ArgmaxPlan:
    """The public constants of a decryption to a label (:func:`argmax_plan`): the ``stride``
    and count ``terms`` of the kept coefficients, the fixed point (``frac``, ``shift``), the
    per-slot decoding rows M (``decode``, (classes, terms) int64) with their offsets C_a =
    round(h sum_t M_at / 2^shift) (``centres``), which the protocol uses; for every pair a < b
    (``pairs``) the difference rows M_a - M_b (``rows``) and offsets C_ab (``offsets``), the
    worst case the shift is chosen for (L_a - L_b is D_ab within one unit); and
    ``resolution``: how far apart (slot units at ``scale``) two slots must be for the label to
    follow their order whatever the phase's other coefficients are."""

    classes: int
    period: int
    stride: int
    terms: int
    frac: int
    shift: int
    scale: float
    pairs: np.ndarray
    rows: np.ndarray
    offsets: np.ndarray
    resolution: float
    decode: np.ndarray
    centres: np.ndarray

    def digest(self) -> str:
        """SHA-256 of the constants the protocol uses (the parties compare it before computing:
        a floating-point difference between machines would otherwise split the computation)."""
        h = hashlib.sha256(f"{self.classes}/{self.period}/{self.frac}/{self.shift}".encode())
        h.update(np.ascontiguousarray(self.decode, dtype="<i8").tobytes())
        h.update(",".join(str(int(c)) for c in self.centres).encode())
        return h.hexdigest()


def _decoding(n: int, classes: int, period: int) -> np.ndarray:
    """The real decoding matrix (terms, classes): slot k of the subring polynomial
    sum_t c_t X^(stride t) is sum_t A[t, k] c_t before dividing by the scale, A[t, k] =
    Re zeta^(stride t 5^k) with zeta = exp(i pi / N) (slot k is the evaluation at zeta^(5^k),
    :class:`~shaper.crypto.ckks.Encoder`'s order)."""
    stride, terms = n // (2 * period), 2 * period
    points = np.array([pow(5, k, 2 * n) for k in range(classes)], dtype=np.int64)
    exps = (stride * np.arange(terms, dtype=np.int64)[:, None] * points[None, :]) % (2 * n)
    return np.cos(np.pi * exps / n)


def argmax_plan(params: ckks.Parameters, scale: float, classes: int, period: int | None = None,
                frac: int | None = None) -> ArgmaxPlan:
    """The constants every party derives alike for ``classes`` slots of ciphertexts at ``scale``
    whose slots repeat with ``period`` (None: the full slot count, no repetition assumed).

    ``frac`` (default: balanced) trades the decoding matrix's rounding, about
    terms q_0 / (2^(frac+1) scale), against the truncation the no-wrap guarantee forces, about
    2^(frac+3) terms^2 / scale: they meet near frac = (log2 q_0 - 4 - log2 terms) / 2. For the
    CNN's 60-bit q_0 at scale 2^53: 25 bits and a resolution of 6.7e-5 with its 32 terms (period
    16), 24 bits and 1.2e-3 with 256 (period 128)."""
    slots = params.slots
    period = slots if period is None else period
    if not isinstance(classes, int) or not 2 <= classes <= MAX_CLASSES:
        raise ConfigError(f"a label is chosen among 2..{MAX_CLASSES} slots, got {classes!r}")
    if not isinstance(period, int) or period < classes or period > slots or slots % period:
        raise ConfigError(f"the slots' period must divide {slots} and be at least the {classes} classes, "
                          f"got {period!r}")
    if not (math.isfinite(scale) and scale > 0):
        raise ConfigError(f"the ciphertexts' scale must be positive, got {scale!r}")
    q0 = int(params.moduli[0])
    h = (q0 - 1) // 2
    terms = 2 * period
    if frac is None:
        frac = max(1, (q0.bit_length() - 4 - (terms.bit_length() - 1)) // 2)
    a = _decoding(params.n, classes, period)
    m = np.rint(a * float(1 << frac)).astype(np.int64)                       # (terms, classes)
    pairs = np.array([(i, j) for i in range(classes) for j in range(i + 1, classes)], dtype=np.int64)
    rows = (m[:, pairs[:, 0]] - m[:, pairs[:, 1]]).T.copy()                    # (pairs, terms)
    l1 = int(np.max(np.sum(np.abs(rows), axis=1)))
    # the smallest shift for which every |D| < q0 / 4: |2^k D| <= l1 (h + 2^k) + 2^(k-1)
    shift = 0
    while l1 * (h // (1 << shift) + 2) + 2 >= q0 // 4:
        shift += 1
    sums = rows.sum(axis=1)
    offsets = np.array([_round_div(h * int(s), 1 << shift) for s in sums], dtype=object)
    # |2^k D - 2^f Delta (z_a - z_b)| <= sum_t |c_t| (rounding of M) + 2^k (l1 + 1) (truncation, offset)
    resolution = (terms * h + (1 << shift) * (l1 + 2)) / (float(1 << frac) * float(scale))
    decode = np.ascontiguousarray(m.T)                                        # (classes, terms)
    centres = np.array([_round_div(h * int(v), 1 << shift) for v in decode.sum(axis=1)], dtype=object)
    for x in (rows, offsets, decode, centres):
        x.flags.writeable = False
    return ArgmaxPlan(classes, period, params.n // (2 * period), terms, frac, shift, float(scale), pairs, rows,
                      offsets, float(resolution), decode, centres)


def _round_div(x: int, d: int) -> int:
    return (2 * x + d) // (2 * d)


def decrypt_argmax(engine: Any, keys: Any, cts: Sequence[ckks.Ciphertext], *, classes: int, to: int,
                   period: int | None = None, approve: Callable[[dict], bool] | None = None) -> np.ndarray | None:
    """The label of each accounted ciphertext: argmax over its slots 0..classes - 1 (whose values
    repeat every ``period`` slots; None: no repetition) as int64 (len(cts),) at party ``to``,
    None elsewhere (module docstring). Raises :class:`~shaper.errors.DecryptionRefused` at
    every party unless every party accounts for every ciphertext, has budget left, agrees on
    the request and consents; on the active engine a deviation raises
    :class:`~shaper.errors.DeviationError` before the label is opened."""
    params = keys.params
    cts = validate_ciphertexts(params, cts)
    session = engine.session
    if not (isinstance(to, int) and 0 <= to < session.n):
        raise ConfigError(f"the label's recipient {to!r} is not a party index 0..{session.n - 1}")
    request: dict[str, Any] = {"digests": [ciphertext_digest(ct) for ct in cts], "to": to, "output": "argmax",
                               "classes": classes, "period": period, "budget": keys.ledger.budget}
    plans: list[ArgmaxPlan] = []

    def prepare() -> None:  # a bad request is this party's refusal, sent in the consent round like any other
        plans.append(argmax_plan(params, min(ct.scale for ct in cts), classes, period))
        request["plan"] = plans[0].digest()  # the public maps every party computed, compared
        keys.ledger.accounted(cts)

    consent(session, keys, len(cts), request, tag="tckks-argmax", approve=approve, prepare=prepare)
    return _labels(engine, keys, cts, plans[0], to)


def _labels(engine: Any, keys: Any, cts: list[ckks.Ciphertext], plan: ArgmaxPlan, to: int) -> np.ndarray | None:
    params = keys.params
    ctx = params.context
    q0 = int(params.moduli[0])
    w = q0.bit_length()
    count = len(cts)
    h = (q0 - 1) // 2
    # 1. the kept coefficients of c_0 + c_1 [s] + h, shares (count, terms)
    s0 = keys.secret(engine).rows([0])
    c1 = np.ascontiguousarray(np.stack([ct.data[1, :1] for ct in cts]))
    c0 = ntt_copy(ctx, [0], inverse=True)(np.stack([ct.data[0, :1] for ct in cts]))
    keep = np.arange(plan.terms) * plan.stride
    into = ntt_copy(ctx, [0], inverse=True)
    v = linear(lambda s_: into(ctx.mul(c1, np.ascontiguousarray(np.broadcast_to(s_, c1.shape)), [0]))[:, 0][..., keep],
               s0)
    offset = (c0[:, 0][..., keep].astype(object) + h) % q0
    u = _as_engine_shares(engine, v.share, v.mac, q0)
    u = u + offset.reshape(-1)
    # 2. U = floor(u / 2^shift), exactly
    bits = convert.mod_to_bits(engine, u)
    high = bits[plan.shift:w]
    big = convert.planes_to_mod(engine, high, [1 << j for j in range(w - plan.shift)], (q0,))
    # 3. L_a = sum_t M_at U_t - C_a: every difference L_a - L_b within q0 / 4 (the plan's shift)
    values = _matmul_public(big, plan.decode, q0, count) + np.tile(-plan.centres, count)   # (count classes,)
    # 4. the tournament: the larger of each pair by the sign of the difference, its index carried along
    return _tournament(engine, values, plan, count, q0, to)


def _as_engine_shares(engine: Any, share: np.ndarray, mac: np.ndarray | None, q: int) -> ModShares:
    """Kernel values (...) on one prime as the engine's shares (M, 1) (with MAC shares (K, ...))."""
    flat = np.ascontiguousarray(share.reshape(-1, 1))
    if mac is None:
        return ModShares(engine, flat, (q,))
    from ..active.shares import AuthShares

    return AuthShares(engine, flat, np.ascontiguousarray(mac.reshape(mac.shape[0], -1, 1)), (q,))


def _matmul_public(x: ModShares, rows: np.ndarray, q: int, count: int) -> ModShares:
    """(count, terms) shares times the public rows (pairs, terms)^T mod q: (count pairs,)."""
    m = np.ascontiguousarray(np.mod(rows.T, q).astype(np.uint64))

    def apply(a: np.ndarray) -> np.ndarray:
        return matmul_mod(np.ascontiguousarray(a.reshape(count, -1)), m, q).reshape(-1, 1)

    share = apply(x.share)
    mac = getattr(x, "mac", None)
    if mac is None:
        return ModShares(x.engine, share, (q,))
    return type(x)(x.engine, share, np.stack([apply(mac[k]) for k in range(mac.shape[0])]), (q,))


def _tournament(engine: Any, values: ModShares, plan: ArgmaxPlan, count: int, q: int, to: int) -> np.ndarray | None:
    """argmax per image of the shared values (count classes,) mod q, by rounds of pairwise
    comparisons: candidate i against i + half, b = [L_i - L_(i+half) < 0] (the difference's bits
    and a comparison with (q + 1)/2), the winner L_i + b (L_(i+half) - L_i) and its index alike
    (one round of products); an odd candidate waits a round. classes - 1 comparisons in all, in
    ceil(log2 classes) rounds; the winner's index is opened to ``to`` alone."""
    w = q.bit_length()
    k = plan.classes
    vals = values.reshape(count, k)
    idx = (vals * 0) + np.tile(np.arange(k, dtype=np.int64), (count, 1))  # public indices as shares
    while k > 1:
        half = k // 2
        a, b = vals[:, :half], vals[:, half:2 * half]
        ia, ib = idx[:, :half], idx[:, half:2 * half]
        bits = convert.mod_to_bits(engine, (a - b).reshape(count * half))
        _, negative = convert.add_public(engine, bits, (1 << w) - (q + 1) // 2)
        sel = engine.bits_to_mod(negative, (q,)).reshape(count, half)
        moved = engine.mul_mod(_concat([sel, sel], axis=1), _concat([b - a, ib - ia], axis=1))
        win, iwin = a + moved[:, :half], ia + moved[:, half:]
        if k % 2:
            win, iwin = _concat([win, vals[:, k - 1:]], axis=1), _concat([iwin, idx[:, k - 1:]], axis=1)
        vals, idx, k = win, iwin, half + k % 2
    opened = engine.reveal_mod(idx.reshape(count), to)
    if opened is None:
        return None
    return np.asarray(opened, dtype=np.uint64).reshape(count).astype(np.int64)


def _concat(parts: Sequence[ModShares], axis: int) -> ModShares:
    """Shares joined along a value axis (the limb axis stays last), MAC shares alike."""
    first = parts[0]
    share = np.concatenate([p.share for p in parts], axis=axis)
    mac = getattr(first, "mac", None)
    if mac is None:
        return ModShares(first.engine, share, first.moduli)
    return type(first)(first.engine, share, np.concatenate([p.mac for p in parts], axis=axis + 1), first.moduli)
