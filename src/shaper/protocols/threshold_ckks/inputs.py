"""Joint input encryption: ciphertexts whose error no party chooses, so that every party can
account for them when they (or what is computed from them) are decrypted.

A party that encrypts alone (``ckks.encrypt``) chooses its ciphertext's randomness: with a large
or structured error e_1 (or a crafted c_1) the phase of the ciphertext carries e_1 s, which a
later decryption shows to the recipient. Here the parties make the ciphertext together:

1. the owner says how many vectors it brings; every party checks the level, scale and value
   bound it expects (the evaluation they will run fixes them);
2. a seed no party chose alone (committed, then opened) gives a_k, uniform, one per vector;
3. party i opens b_i = e_i - a_k s_i, the owner adding its encoded vector; e_i is party i's own
   Gaussian (sigma of the parameters); the openings are committed first, so that no party picks
   its share after seeing the others';
4. c_0 = sum_i b_i, c_1 = a_k: a ciphertext of phase Delta m + sum_i e_i.

The error does not depend on s at all, and c_1 is fixed by the joint seed: a party that sends
some other b_i only adds a term it knows, which does not depend on s either. Every party records
each ciphertext in its ledger with its worst-case bound (:class:`~shaper.crypto.ckks.bounds.NoiseModel`
``joint_input``); the owner's values must lie within the declared bound.

What stays the owner's to choose is its message: within the declared bound it is any input the
application allows; a party that deviates from the protocol could add a message beyond it, which
the bound does not cover (docs/threshold-ckks.md, "What remains").

Cost: per vector, one multiplication a_k s_i per limb, one Gaussian polynomial and one opening of
one polynomial (the inputs' c_1 travel as 32-byte seeds). No MPC sampling.

**On the active engine** (a key made there, :func:`_encrypt_authenticated`): c_0 = -a [s] + [e]
+ [m] on authenticated shares, opened with the MAC check. The owner's encoded coefficients are a
range-checked input (each within :func:`coefficient_bound`, so a value one unit beyond it is
refused, naming the owner, and the bound itself accepted), every party's error a range-checked
input within +-floor(6 sigma). A term added to a share of c_0 fails the MAC check. The ledger
records the bound the check enforces, :func:`enforced_value_bound` (W c / scale: log2 W bits
above the declared slot bound, the price of checking coefficients rather than slots).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks.bounds import NoiseModel
from ...crypto.ckks.keys import gaussian_bound, uniform_poly
from ...crypto.ckks.multiparty import joint_input_share, local_errors_coefficients
from ...crypto.prg import Prg
from ...errors import ConfigError
from .commit import committed_open_rows
from .polys import active, joint_seed, linear, ntt_copy, open_with_errors

__all__ = ["Packing", "announce", "encrypt_jointly", "noise_model"]

#: the most vectors one call encrypts (bounds the memory a peer's count can cause)
MAX_VECTORS = 1 << 14


def noise_model(keys: Any) -> NoiseModel:
    """The worst-case noise model of a party's joint key (parameters, parties, key method)."""
    return NoiseModel(keys.params, keys.share.parties, key_method=keys.ledger.key_method)


@dataclass(frozen=True, eq=False)
class Packing:
    """A public layout of small inputs into slots: input ``sources[i]`` goes to slot
    ``targets[i]`` (an input may fill several slots, a slot takes at most one input; the other
    slots are zero), each input a multiple of ``step``. The owner of a joint input with a
    packing passes (count, inputs) values; each is rounded to a multiple of ``step``. On the
    active engine what is range-checked is then the inputs, as integers within
    ±ceil(value_bound / step) (``inputs`` values per vector instead of N coefficients), and the
    coefficients are a public integer map of them computed inside the MPC: the enforced slot
    bound is the declared one (plus step), not W times it. ``name`` identifies the layout in
    the parties' agreement (with a digest of the arrays)."""

    name: str
    sources: np.ndarray
    targets: np.ndarray
    inputs: int
    step: float

    def __post_init__(self) -> None:
        src, tgt = np.asarray(self.sources), np.asarray(self.targets)
        if src.shape != tgt.shape or src.ndim != 1 or not len(src):
            raise ConfigError("a packing maps each input (sources) to slots (targets): two equal 1-D arrays")
        if src.dtype.kind not in "iu" or tgt.dtype.kind not in "iu" or not isinstance(self.inputs, int):
            raise ConfigError("a packing's sources, targets and input count are integers")
        if src.min() < 0 or src.max() >= self.inputs or tgt.min() < 0 or len(np.unique(tgt)) != len(tgt):
            raise ConfigError("a packing's sources must be inputs 0..inputs-1 and its targets distinct slots")
        object.__setattr__(self, "sources", src.astype(np.int64))
        object.__setattr__(self, "targets", tgt.astype(np.int64))
        if not (math.isfinite(self.step) and self.step > 0):
            raise ConfigError(f"a packing's step must be positive, got {self.step!r}")

    def digest(self) -> str:
        h = hashlib.sha256(f"{self.name}/{self.inputs}/{self.step!r}".encode())
        h.update(np.ascontiguousarray(self.sources, dtype="<i8").tobytes())
        h.update(np.ascontiguousarray(self.targets, dtype="<i8").tobytes())
        return h.hexdigest()

    def slots(self, values: np.ndarray, slots: int) -> np.ndarray:
        """(count, inputs) values -> (count, slots) slot vectors."""
        out = np.zeros((len(values), slots))
        out[:, self.targets] = np.asarray(values, dtype=np.float64)[:, self.sources]
        return out

    def encoding(self, params: Any, scale: float) -> np.ndarray:
        """The public integer map (inputs, N): round(scale step sigma^-1(e_S)) for each input's
        slot set S, so that the integers v give coefficients v @ encoding (the rounding of each
        coefficient then within inputs/2 x the largest |v|, counted in the ledger's error)."""
        key = (params.fingerprint, float(scale), self.digest())
        cached = _ENCODINGS.get(key)
        if cached is not None:
            return cached
        encoder = ckks.Encoder(params)
        out = np.empty((self.inputs, params.n), dtype=np.int64)
        unit = np.zeros(params.slots)
        for i in range(self.inputs):
            unit[:] = 0.0
            unit[self.targets[self.sources == i]] = 1.0
            out[i] = np.rint(encoder.slots_to_coefficients(unit) * float(scale) * self.step).astype(np.int64)
        out.flags.writeable = False
        _ENCODINGS.clear()  # one at a time: a CNN's image layout is 100 MB
        _ENCODINGS[key] = out
        return out


_ENCODINGS: dict[tuple, np.ndarray] = {}


def encrypt_jointly(engine: Any, keys: Any, values: Any = None, *, value_bound: float, owner: int | None = None,
                    level: int | None = None, scale: float | None = None, tag: str = "input",
                    packing: Packing | None = None) -> list[ckks.Ciphertext]:
    """Every party's side of the joint encryption (module docstring): the owner passes
    ``values`` (one vector, or a (count, <= slots) array of real numbers with |v| <= value_bound;
    with a ``packing``, (count, packing.inputs) inputs laid out by it), the others None.
    ``owner`` (a party index) may be left None: the one party that passes values is the owner.
    Every party gets the same ciphertexts, at ``level`` (default the top) and ``scale``
    (default the parameters'), recorded in its ledger as inputs."""
    session = engine.session
    params = keys.params
    me = session.index
    if owner is not None and not (isinstance(owner, int) and 0 <= owner < session.n):
        raise ConfigError(f"the owner of a joint input is a party index 0..{session.n - 1}, got {owner!r}")
    level = params.max_level if level is None else int(level)
    params.mods(level)
    scale = params.scale if scale is None else float(scale)
    value_bound = float(value_bound)
    if not (np.isfinite(value_bound) and value_bound > 0):
        raise ConfigError(f"the value bound of a joint input must be positive and finite, got {value_bound!r}")
    count = None
    layout = None
    if packing is not None:  # public: every party checks it and agrees on it, the encoding map included
        if packing.targets.max() >= params.slots:
            raise ConfigError(f"the packing {packing.name!r} writes slot {packing.targets.max()}; there are "
                              f"{params.slots}")
        if packing.inputs * math.ceil(value_bound / packing.step) >= 1 << 29:
            raise ConfigError(f"the packing {packing.name!r} has too many or too wide inputs for its exact encoding "
                              "(inputs x bound / step must stay below 2^29)")
        layout = packing.digest() + "/" + hashlib.sha256(packing.encoding(params, scale).tobytes()).hexdigest()
    if values is not None:
        if owner is not None and owner != me:
            raise ConfigError(f"only the owner (party {owner}) passes values to a joint encryption")
        if packing is not None:
            values = _check_values(values, packing.inputs, value_bound)
            if values.shape[1] != packing.inputs:
                raise ConfigError(f"a joint input packed by {packing.name!r} takes {packing.inputs} values per vector, "
                                  f"got {values.shape[1]}")
            values = np.rint(values / packing.step) * packing.step  # the multiples of step the layout encodes
        else:
            values = _check_values(values, params.slots, value_bound)
        count = len(values)
    header = {"level": level, "scale": scale, "bound": value_bound, "tag": tag, "count": count, "packing": layout}
    owner, count = announce(session, header, ("level", "scale", "bound", "tag", "packing"), owner, "tckks-input",
                            MAX_VECTORS)
    seed = joint_seed(engine, f"input/{tag}")
    rows = params.mods(level)
    seeds = [hashlib.sha256(seed + k.to_bytes(4, "big")).digest() for k in range(count)]
    a = np.stack([uniform_poly(params, rows, Prg(s)) for s in seeds])
    if active(engine):
        c0, bound = _encrypt_authenticated(engine, keys, values if me == owner else None, owner, count, level, scale,
                                           value_bound, a, tag, packing)
    else:
        message = None
        if me == owner:
            encoder = ckks.Encoder(params)
            values = values if packing is None else packing.slots(values, params.slots)
            message = np.stack([encoder.encode(v, level=level, scale=scale).data for v in values])
        b = joint_input_share(keys.share, a, level, message)
        c0 = committed_open_rows(engine, b, params.moduli[:level + 1], what=f"input-{tag}", error=ConfigError)
        # a packed input's values are multiples of step within +-ceil(bound / step) steps
        held = value_bound if packing is None else math.ceil(value_bound / packing.step) * packing.step
        bound = noise_model(keys).joint_input(level, scale, held)
    cts = [ckks.Ciphertext(params, np.stack([c0[k], a[k]]), scale, seeds[k]) for k in range(count)]
    keys.ledger.record(cts, [bound] * count, kind="input", source=f"joint input {tag!r} of party {owner}")
    return cts


def coefficient_bound(scale: float, value_bound: float) -> int:
    """The largest |coefficient| an honest encoding of slot values within ``value_bound`` at
    ``scale`` has: each coefficient is an average of the slots' (2/N) sum over N/2 of them, so
    |m_j| <= scale * bound, plus 1/2 of rounding."""
    return int(math.floor(float(scale) * float(value_bound))) + 1


def enforced_value_bound(keys: Any, scale: float, value_bound: float) -> float:
    """The slot bound the range check of :func:`coefficient_bound` enforces whatever the owner
    does: a polynomial with |coefficients| <= c has ||m||_can <= W c (W = csc(pi / 2N), about
    0.64 N, reached by coefficients of alternating signs), so W c / scale: log2(W) bits (13.4 at
    N = 2^14) above the declared bound, the price of checking coefficients, not slots."""
    return float(noise_model(keys).W * coefficient_bound(scale, value_bound) / float(scale))


def _encrypt_authenticated(engine: Any, keys: Any, values: np.ndarray | None, owner: int, count: int, level: int,
                           scale: float, value_bound: float, a: np.ndarray, tag: str,
                           packing: Packing | None = None) -> tuple[np.ndarray, Any]:
    """The joint encryption on the active engine: c_0 = -a [s] + m + e, opened
    (:func:`~.polys.open_with_errors`). m: the owner's encoded coefficients, each proven within
    :func:`coefficient_bound` in an anchor of two or three primes outside the basis before
    anything depends on it; e: every party's own Gaussian, proven within ±⌊6σ⌋ there too; both
    carried into every limb by the opening, where c_0 - (-a [s]) is checked to be the committed
    m + e (masked subset sums, MAC-checked); [s]: the key's share with its MAC shares. Returns
    (c_0 rows (count, level + 1, N), the enforced bound)."""
    params = keys.params
    secret = keys.secret(engine)  # refuses a key without MAC shares
    ctx = params.context
    rows = params.mods(level)
    if packing is not None:
        return _encrypt_packed(engine, keys, values, owner, count, level, scale, value_bound, a, tag, packing)
    limit = coefficient_bound(scale, value_bound)
    coeffs = None
    if values is not None:
        encoder = ckks.Encoder(params)
        coeffs = np.stack([np.rint(encoder.slots_to_coefficients(v) * scale) for v in values]).astype(np.int64)

    if coeffs is not None and coeffs.shape != (count, params.n):
        raise ConfigError(f"encoded values of shape {coeffs.shape}, announced ({count}, {params.n})")
    s = secret.rows(rows)

    def phase(s_: np.ndarray) -> np.ndarray:  # -a s; the message and the errors join at the opening
        return ctx.neg(ctx.mul(a, np.ascontiguousarray(np.broadcast_to(s_, a.shape)), rows), rows)

    bound = gaussian_bound(params.sigma)
    c0 = open_with_errors(linear(phase, s), local_errors_coefficients(params, count), -bound, bound, factor=1,
                          to_form=ntt_copy(ctx, rows), from_form=ntt_copy(ctx, rows, inverse=True), what=f"input-{tag}",
                          owned=(owner, coeffs, -limit, limit))
    # the phase is m + e: m any polynomial with coefficients within c (the whole of it counted as
    # message, at W c), e the parties' range-checked errors; the honest encoding's rounding of the
    # declared values stays in the error (conservative), not an encoding error of the W c bound
    nm = NoiseModel(params, keys.share.parties, key_method="contributed")
    declared = nm.joint_input(level, scale, value_bound)
    bound = dataclasses.replace(declared, message=float(scale) * enforced_value_bound(keys, scale, value_bound))
    return c0, bound


def _encrypt_packed(engine: Any, keys: Any, values: np.ndarray | None, owner: int, count: int, level: int,
                    scale: float, value_bound: float, a: np.ndarray, tag: str,
                    packing: Packing) -> tuple[np.ndarray, Any]:
    """:func:`_encrypt_authenticated` for packed inputs: the owner's integers v = values / step
    range-checked within ±ceil(value_bound / step), m = v @ encoding inside the anchor
    (:func:`~.polys.open_with_errors` with ``encoding``). The enforced message is exactly the
    layout of v times step (slots within value_bound + step); the encoding's rounding (each
    coefficient within inputs/2 x max|v|, canonical norm W times that) joins the error."""
    params = keys.params
    secret = keys.secret(engine)
    ctx = params.context
    rows = params.mods(level)
    top = int(math.ceil(value_bound / packing.step))
    encoding = packing.encoding(params, scale)
    ints = None if values is None else np.rint(np.asarray(values) / packing.step).astype(np.int64)
    s = secret.rows(rows)

    def phase(s_: np.ndarray) -> np.ndarray:
        return ctx.neg(ctx.mul(a, np.ascontiguousarray(np.broadcast_to(s_, a.shape)), rows), rows)

    bound = gaussian_bound(params.sigma)
    c0 = open_with_errors(linear(phase, s), local_errors_coefficients(params, count), -bound, bound, factor=1,
                          to_form=ntt_copy(ctx, rows), from_form=ntt_copy(ctx, rows, inverse=True), what=f"input-{tag}",
                          owned=(owner, ints, -top, top), encoding=encoding)
    nm = NoiseModel(params, keys.share.parties, key_method="contributed")
    declared = nm.joint_input(level, scale, value_bound)
    rounding = nm.W * 0.5 * packing.inputs * top
    return c0, dataclasses.replace(declared, message=float(scale) * top * packing.step,
                                   error=declared.error + rounding)


def announce(session: Any, header: dict, agreed: tuple[str, ...], owner: int | None, tag: str,
             most: int) -> tuple[int, int]:
    """The round before a joint encryption (threshold CKKS's and BGV's): every party's ``header``
    (``count`` set by the owner alone, None elsewhere) to every other; the ``agreed`` fields must
    match, exactly one party may own the values (``owner`` when given) and announce 1..``most``
    vectors. Returns (owner index, count); raises :class:`~shaper.errors.ConfigError` naming the
    party that differs."""
    session.broadcast(header, tag)
    headers = {session.name: header, **session.gather(tag)}
    for name, h in headers.items():
        if not isinstance(h, dict) or {k: h.get(k) for k in agreed} != {k: header[k] for k in agreed}:
            raise ConfigError(f"party {name!r} encrypts a different joint input ({h!r}; ours {header!r})")
    owners = [session.parties.index(name) for name, h in headers.items() if h.get("count") is not None]
    if len(owners) != 1 or (owner is not None and owners != [owner]):
        raise ConfigError(f"exactly one party brings the values of a joint input (expected "
                          f"{'any' if owner is None else session.parties[owner]}; got "
                          f"{', '.join(session.parties[i] for i in owners) or 'none'})")
    count = headers[session.parties[owners[0]]]["count"]
    if not (isinstance(count, int) and 1 <= count <= most):
        raise ConfigError(f"the owner announced {count!r} vectors; a joint encryption takes 1..{most}")
    return owners[0], count


def _check_values(values: Any, slots: int, bound: float) -> np.ndarray:
    if values is None:
        raise ConfigError("the owner of a joint input passes its values")
    v = np.asarray(values)
    if v.ndim == 1:
        v = v[None]
    if v.ndim != 2 or v.shape[0] == 0 or not 1 <= v.shape[1] <= slots:
        raise ConfigError(f"joint input values must be one vector or (count, <= {slots}) vectors, got shape {v.shape}")
    if not np.issubdtype(v.dtype, np.number) or np.iscomplexobj(v):
        raise ConfigError(f"joint input values must be real numbers, got {v.dtype}")
    v = v.astype(np.float64)
    if not np.all(np.isfinite(v)):
        raise ConfigError("joint input values hold NaN or infinite numbers")
    peak = float(np.max(np.abs(v)))
    if peak > bound:
        raise ConfigError(f"a joint input value reaches {peak:.6g}, beyond the declared bound {bound:.6g}")
    return v
