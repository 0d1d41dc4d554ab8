"""The active engine: n-party arithmetic over odd prime moduli (one field or an RNS basis) secure
against any n - 1 parties that deviate arbitrarily, with abort (SPDZ's online phase on MASCOT's
preprocessing; the GMPFHE paper's "malicious upgrade").

Shares are :class:`~.shares.AuthShares` (a share and K MAC shares per modulus). The operations:

==================  ===========================================================================
input (owner o)     an authenticated random r known to o (:func:`~.preprocessing.input_masks`);
                    o broadcasts x - r, every party adds it to [r]. A party that broadcasts
                    different values to different peers is caught by the view comparison.
add, sub, public    local (a public c: party 0 adds c to its share, every party alpha_i c to
constants, scalar   its MAC shares)
multiplication
mul                 Beaver with an authenticated triple (checked by sacrifice): x - a and y - b
                    are opened *partially* and go to the MAC check; triples reserved ahead in
                    one batch (``reserve_triples``) serve later products, each once
reveal to all       a partial opening, then the MAC check over everything opened since the last
                    one: the value is returned only if it passes
reveal to one (o)   [x] - [r] opened to all for an input mask r of o's, checked, and o adds r:
                    only o learns x, and o knows its MAC was checked
==================  ===========================================================================

**What each party learns**: the partial openings (uniform: masked by single-use triples,
masks and random combinations), the MAC check's differences (uniform given that they sum to
zero), and the outputs revealed to it. **What a deviating coalition of up to n - 1 parties can
do**: choose its own inputs; abort at any point (an honest party then raises, naming the
phase; the abort may be uneven: an honest party whose checks passed has the right output);
anything else (a wrong share, MAC share, product, correction, opening, or different messages
to different peers) makes the honest parties raise
:class:`~shaper.errors.DeviationError` at the next check, before any output that depends on
it, except with probability 2^-SOUNDNESS per check (:mod:`.shares`). The OT extension under the
preprocessing checks its receivers (KOS/Roy); the preprocessing's selective failures are
handled by MASCOT's combining and sacrifice (:mod:`.preprocessing`). Batches of 2^16 values or
more take their MACs from a pool made by silent VOLE (:mod:`.vole`: LPN-stretched, checked per
run), which costs a correction word per value and peer instead of MASCOT's 80 (``silent=False``
keeps MASCOT's COPE for every batch; every party must choose alike).

The engine holds the prime-field domain and the bits (``domains = {"mod", "bits"}``;
authenticated bits, their AND triples and openings in :mod:`.bits`), and the conversions and
samplers between them on checked daBits (:mod:`.dabits`: Z_2 -> Z_q, Z_q -> Z_2, integers in
bit planes into a basis, uniform ternary, the discrete Gaussian). Fixed point over Z_2^64 (the
``"ring"`` domain: ``share``, ``reveal``, ``*``, ``@``, ``truncate``) is SPDZ2k, shares mod
2^128 (:mod:`.spdz2k`), where the native ring kernels are built; the Z_3 chain stays with the
passive :class:`~shaper.protocols.additive.AdditiveEngine`.
``reveal`` of either domain runs both domains' checks.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, ClassVar, Sequence, TypeVar

import numpy as np

from ...arrays import is_sparse
from ...crypto import encoding
from ...errors import ConfigError, DeviationError, FrameError
from ...kernels import z2k
from ...kernels.modq import add_mod, basis, lift_public, moduli_array, mul_mod, sub_mod
from ..additive.fields import sum_residues, uniform_residues
from ..api import Engine, ModShares, Shared
from ..ot import links_for
from . import dabits, preprocessing, ranges, spdz2k, vole
from .bits import AuthBitDomain, AuthBits
from .check import MAX_INPUT, Openings, read_shape
from .spdz2k import AuthRing
from .shares import MIN_MODULUS_BITS, SOUNDNESS, AuthShares, check_soundness, key_range, soundness_bits

__all__ = ["GAUSSIAN_CHUNK", "MIN_POOLED", "POOL_PAYS", "ActiveEngine"]

#: Gaussian samples per run of the sampler's circuit (its 40 random bits per sample stay within
#: one call's bound on random bits)
GAUSSIAN_CHUNK = 1 << 16
#: values per modulus from which a pool run is cheaper in bytes than COPE (:meth:`ActiveEngine.expect_many`)
POOL_PAYS = 1 << 15
#: the smallest batch that takes the pool once a job expects many values
MIN_POOLED = 1 << 10

F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """An interactive step: any exception in it (a failed check, a malformed or missing message,
    a peer that stopped) stops the engine for good, since its ledger of unchecked openings and
    its peers' states can no longer be trusted; a retry would otherwise run on past a deviation."""

    @functools.wraps(method)
    def run(self: "ActiveEngine", *args: Any, **kwargs: Any) -> Any:
        self._alive()
        try:
            return method(self, *args, **kwargs)
        except BaseException as exc:
            if self._failed is None:
                self._failed = f"{type(exc).__name__}: {exc}"
            raise

    return run  # type: ignore[return-value]


class ActiveEngine(AuthBitDomain, Engine):
    """One party's side of the active n-party engine (see the module notes).

    ``links``: the correlated-OT links of the preprocessing (default: the session's OT extension,
    :func:`~shaper.protocols.ot.links_for`; :class:`~shaper.protocols.ot.InsecureLinks` runs
    the same protocol in the clear for tests where the native extension is not built).
    ``soundness``: every MAC check passes a deviation with probability at most 2^-soundness."""

    conversions: ClassVar[frozenset[str]] = frozenset()
    domains: ClassVar[frozenset[str]] = frozenset({"mod", "bits"})
    security = "active"

    def __init__(self, session: Any, *, links: Any = None, soundness: int = SOUNDNESS, frac_bits: int = 16,
                 silent: bool | None = None) -> None:
        if session.n < 2:
            raise ConfigError(f"{type(self).__name__} needs at least two parties, the session has {session.n}")
        if not 40 <= soundness <= 128:
            raise ConfigError(f"the MAC checks' soundness must be 40..128 bits, got {soundness}")
        self.session = session
        self.me = session.index
        self.parties = session.n
        self.frac_bits = frac_bits
        self.soundness = soundness
        self.prg = session.prg
        self.links = links
        self.openings = Openings()
        self._alpha: dict[int, np.ndarray] = {}
        self._step = 0
        self._failed: str | None = None
        self._pool: dict[tuple[int, ...], Any] = {}  # checked triples reserved ahead, by basis
        #: what protocols above made ahead on this engine (e.g. range-checked decryption floods),
        #: by a key of their own; every party holds the same, so takes stay in step
        self.reserved: dict[Any, Any] = {}
        if silent and not vole.available():
            raise ConfigError("silent VOLE needs the native extension (build it: pip install -e .)")
        # authenticated randomness by silent VOLE for large batches (:mod:`.vole`); every party
        # must make the same choice (the default follows the native extension, as the OT does)
        self.silent = vole.SilentPool() if (vole.available() if silent is None else silent) else None
        # the same, with each owner's MAC shares kept per peer: the range proofs' commitments
        self.pairwise = vole.SilentPool(pairwise=True) if self.silent is not None else None
        #: the smallest batch per modulus that starts a pool run (:data:`~.vole.SILENT_MIN`): a job
        #: that knows it will authenticate many values per modulus in small batches lowers it
        #: (:meth:`expect_many`), every party alike
        self.silent_min = vole.SILENT_MIN
        self.triples_made = 0
        # the ring Z_2^64 (SPDZ2k) needs the native ring kernels and OT links that give their rows
        self._z2k: spdz2k.Ring | None = None
        ring = spdz2k.available() and (links is None or hasattr(links, "rows"))
        self.domains = type(self).domains | {"ring"} if ring else type(self).domains  # type: ignore[misc]

    def expect_many(self, per_modulus: int) -> None:
        """A job announces that it will authenticate about ``per_modulus`` values per modulus in
        all (every party calls it alike): from the size where one pool run costs less than COPE
        for them (its first run's base is about 21,000 values' worth of COPE bytes), batches of
        any size above :data:`MIN_POOLED` take the silent pool."""
        if self.silent is not None and per_modulus >= POOL_PAYS:
            self.silent_min = min(self.silent_min, MIN_POOLED)

    # -- plumbing -----------------------------------------------------------------------------------
    def _tag(self, what: str) -> str:
        self._step += 1
        return f"act-{what}-{self._step}"

    def ot_links(self) -> Any:
        if self.links is None:
            self.links = links_for(self.session)
        return self.links

    def alpha(self, q: int) -> np.ndarray:
        """This party's MAC keys for modulus q (uint64, one per key), drawn once from its CSPRNG."""
        keys = self._alpha.get(q)
        if keys is None:  # as many as the weakest modulus the engine accepts needs at this soundness
            keys = self._alpha[q] = self.prg.below(key_range(q), math.ceil(self.soundness / (MIN_MODULUS_BITS - 2)))
        return keys

    def mac_keys(self, moduli: Sequence[int]) -> np.ndarray:
        """This party's MAC keys for every modulus of a basis, (L, K) uint64: what a party keeps
        (secret, beside the shares) when authenticated shares outlive the job, e.g. a threshold
        key's share; a later engine takes them back with :meth:`install_mac_keys`."""
        return np.stack([self.alpha(q) for q in self._basis(moduli)])

    def install_mac_keys(self, moduli: Sequence[int], keys: np.ndarray) -> None:
        """Use kept MAC keys (L, K) (:meth:`mac_keys` of an earlier engine of this party) for
        these moduli, so that shares authenticated under them check here. A modulus whose keys
        this engine has already drawn and used differently is refused (its earlier values would
        no longer check). The same key across jobs is SPDZ's global key kept for longer: each
        check a deviating party fails still passes with probability at most 2^-soundness, so k
        aborted tries give it at most k 2^-soundness."""
        mods = self._basis(moduli)
        arr = np.asarray(keys)
        want = math.ceil(self.soundness / (MIN_MODULUS_BITS - 2))
        if arr.dtype != np.uint64 or arr.shape != (len(mods), want):
            raise ConfigError(f"kept MAC keys must be uint64 ({len(mods)}, {want}) for this basis at soundness "
                              f"{self.soundness}, got {arr.dtype} {arr.shape}")
        for q, row in zip(mods, arr):
            if np.any(row >= np.uint64(key_range(q))):
                raise ConfigError(f"a kept MAC key is out of range for modulus {q}")
            have = self._alpha.get(q)
            if have is not None and not np.array_equal(have, row):
                raise ConfigError(f"this engine already authenticates modulus {q} under other MAC keys; install kept "
                                  "keys before the engine uses their moduli")
        for q, row in zip(mods, arr):
            self._alpha[q] = row.copy()

    def keys(self, moduli: Sequence[int]) -> int:
        """MAC keys per value over this basis."""
        return check_soundness(moduli, self.soundness)

    def soundness_of(self, moduli: Sequence[int]) -> float:
        """-log2 of the chance that a check over this basis passes a deviation."""
        return soundness_bits(moduli, self.keys(moduli))

    def uniform_mod(self, shape: int | tuple[int, ...], mods: Sequence[int]) -> np.ndarray:
        """This party's uniform residues (..., L), each limb by rejection sampling."""
        return uniform_residues(self.prg, shape, mods)

    def _basis(self, moduli: Any) -> tuple[int, ...]:
        mods = basis(moduli)
        self.keys(mods)  # refuses moduli too small to authenticate
        return mods

    def _alive(self) -> None:
        if self._failed:
            raise DeviationError(f"this engine stopped after a failed check or step ({self._failed}); start a new job")

    def joint_coins(self, what: str) -> Any:
        """A generator every party shares, from a seed no party chose (contributions committed
        before they are opened: :meth:`~shaper.net.Session.shared_prg`). Its first 32 bytes join
        this party's view, so a party that opened different contributions to different peers is
        caught by the next check's comparison of views, and no one is blamed for it wrongly."""
        coins = self.session.shared_prg(range(self.parties), self._tag(what))
        self.openings.witness(np.frombuffer(coins.random_bytes(32), dtype=np.uint64), "coins")
        return coins

    # -- openings and the check -------------------------------------------------------------------------
    @guarded
    def open_partial(self, x: AuthShares, phase: str) -> np.ndarray:
        """Every party's share summed at every party, *not yet checked*: recorded for the next
        :meth:`check`, so use it only to compute, never to output or to decide what to send."""
        tag = self._tag("open")
        share = np.ascontiguousarray(x.share)
        self.session.broadcast(share, tag)
        total = sum_residues(self.session, share, x.moduli, tag, f"in an opening ({phase})")
        self.openings.record(total, x.mac, x.moduli, phase)
        return total

    @guarded
    def guard(self, step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``step(*args, **kwargs)``, an interactive step built outside the engine from its
        methods (e.g. :func:`~shaper.protocols.threshold_ckks.polys.open_with_errors`), under
        the engine's guard: any exception in it stops the engine for good."""
        return step(*args, **kwargs)

    @guarded
    def open_sum(self, residues: np.ndarray, moduli: Any, phase: str) -> np.ndarray:
        """Every party's plain residues (..., L) summed at every party, with no MAC: for a value
        whose correctness the caller checks by other means before anything depends on it (e.g.
        an authenticated part plus each party's own terms, :func:`~.ranges.check_one_integer`).
        The total joins the view, so a party that sent different residues to different peers is
        caught by the next check's comparison of views."""
        mods = self._basis(moduli)
        tag = self._tag("open-sum")
        share = np.ascontiguousarray(residues, dtype=np.uint64)
        self.session.broadcast(share, tag)
        total = sum_residues(self.session, share, mods, tag, f"in an opening ({phase})")
        self.openings.witness(total, phase)
        return total

    @guarded
    def check(self, phase: str = "output") -> None:
        """Verify every partial opening since the last check (:mod:`.check`); a failure (or any
        error on the way) stops this engine for good."""
        self.openings.check(self.session, self.alpha, self._tag(f"check-{phase}"))

    @guarded
    def check_all(self, phase: str = "output") -> None:
        """Every domain's checks: the prime fields' MAC check, the bits' (:mod:`.bits`) and the
        ring's (:mod:`.spdz2k`, once it is in use)."""
        self.openings.check(self.session, self.alpha, self._tag(f"check-{phase}"))
        AuthBitDomain.check_bits(self, phase)
        if self._z2k is not None:
            self._z2k.check(1, phase)

    # -- bits (:mod:`.bits`): every interactive step guarded ----------------------------------------
    @guarded
    def share_bits(self, bits: Any, *, owner: int) -> AuthBits:
        return AuthBitDomain.share_bits(self, bits, owner=owner)

    @guarded
    def random_bits(self, shape: tuple[int, ...], bits: int) -> AuthBits:
        return AuthBitDomain.random_bits(self, shape, bits)

    @guarded
    def reveal_bits(self, x: Any, to: int | None = None) -> np.ndarray | None:
        return AuthBitDomain.reveal_bits(self, x, to)

    @guarded
    def and_bits(self, x: Any, y: Any) -> AuthBits:
        return AuthBitDomain.and_bits(self, x, y)

    @guarded
    def bit_triples(self, count: int) -> Any:
        return AuthBitDomain.bit_triples(self, count)

    @guarded
    def reserve_bit_triples(self, words: int) -> None:
        AuthBitDomain.reserve_bit_triples(self, words)

    @guarded
    def open_bits_partial(self, x: AuthBits, to: int | None = None) -> np.ndarray | None:
        return AuthBitDomain.open_bits_partial(self, x, to)

    @guarded
    def check_bits(self, phase: str = "output") -> None:
        AuthBitDomain.check_bits(self, phase)

    # -- public constants -----------------------------------------------------------------------------
    def mul_public_shares(self, x: AuthShares, residues: np.ndarray) -> AuthShares:
        """x times public residues (..., L) already reduced into every modulus."""
        r = np.asarray(residues, dtype=np.uint64)
        return AuthShares(self, mul_mod(x.share, r, x.moduli), mul_mod(x.mac, r, x.moduli), x.moduli)

    def add_public_residues(self, x: AuthShares, residues: np.ndarray) -> AuthShares:
        """x + c for public residues c (..., L): party 0's share, every party's MAC shares."""
        c = np.asarray(residues, dtype=np.uint64)
        qs = moduli_array(x.moduli)
        shape = np.broadcast_shapes(x.share.shape, c.shape)
        share = np.broadcast_to(x.share, shape)
        share = add_mod(share, np.broadcast_to(c, shape), qs) if self.me == 0 else share.copy()
        alpha = np.stack([self.alpha(q)[:x.keys] for q in x.moduli], axis=-1)  # (K, L)
        alpha = alpha.reshape((x.keys,) + (1,) * (len(shape) - 1) + (len(x.moduli),))
        mac = add_mod(np.broadcast_to(x.mac, (x.keys,) + shape), mul_mod(np.broadcast_to(c, (x.keys,) + shape),
                                                                           np.broadcast_to(alpha, (x.keys,) + shape),
                                                                           x.moduli), qs)
        return AuthShares(self, share, mac, x.moduli)

    def add_public_mod(self, x: ModShares, values: Any) -> AuthShares:
        assert isinstance(x, AuthShares)
        return self.add_public_residues(x, lift_public(values, x.moduli))

    # -- preprocessing ------------------------------------------------------------------------------
    @guarded
    def triples(self, count: int, moduli: Any) -> tuple[AuthShares, AuthShares, AuthShares]:
        """``count`` authenticated triples over the basis, checked (:func:`~.preprocessing.triples`)."""
        mods = self._basis(moduli)
        out = preprocessing.triples(self, int(count), mods, self.keys(mods))
        self.triples_made += int(count)
        return out

    def reserve_triples(self, count: int, moduli: Any) -> None:
        """Make ``count`` checked triples over the basis now, in one batch, for the products that
        follow (each takes from the pool before making its own): a program of many small
        products then pays one preprocessing exchange and one check instead of one per product.
        Every triple is still used once."""
        mods = self._basis(moduli)
        have = self._pool.get(mods)
        held = 0 if have is None else len(have[0])
        if held >= count:
            return
        fresh = self.triples(count - held, mods)
        self._pool[mods] = fresh if have is None else tuple(AuthShares.concat([h, f]) for h, f in zip(have, fresh))

    def _take_triples(self, count: int, mods: tuple[int, ...]) -> tuple[AuthShares, AuthShares, AuthShares]:
        have = self._pool.get(mods)
        if have is None or len(have[0]) < count:
            return self.triples(count, mods)
        taken = tuple(t[:count] for t in have)
        rest = tuple(t[count:] for t in have)
        self._pool[mods] = rest if len(rest[0]) else None  # type: ignore[assignment]
        return taken  # type: ignore[return-value]

    @guarded
    def random_mod(self, shape: int | tuple[int, ...], moduli: Any) -> AuthShares:
        """Authenticated uniform values no party knows (every party's share uniform)."""
        mods = self._basis(moduli)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        count = int(np.prod(shape))
        r = preprocessing.authenticate(self, self.uniform_mod((count,), mods), mods, self.keys(mods),
                                       phase="random values")
        return r.reshape(shape)

    def powers(self, count: int, moduli: Any, degree: int = 4) -> list[AuthShares]:
        """Authenticated power tuples [a], [a^2], ..., [a^degree] for uniform a no party knows:
        a random [a] and degree - 1 Beaver products (each from a checked triple), so every
        power carries MACs and every opening goes to the next MAC check. (The passive engine's
        OT chain makes them in fewer OTs; here the triples' checks are what make them right.)"""
        if not 2 <= degree <= 64:
            raise ValueError(f"power tuples need a degree of 2..64, got {degree}")
        self.reserve_triples((degree - 1) * int(count), moduli)  # one preprocessing batch for every power
        a = self.random_mod((count,), moduli)
        out = [a]
        while len(out) < degree:  # a^(2e) as (a^e)^2, a^(2e+1) as a^(2e) a: one round per power
            e = len(out) + 1
            half = out[e // 2 - 1]
            out.append(half * half if e % 2 == 0 else out[e - 2] * a)
        return out

    def square_pairs(self, count: int, moduli: Any) -> tuple[AuthShares, AuthShares]:
        """Authenticated (a, a^2) for uniform a (one checked triple each)."""
        a, a2 = self.powers(count, moduli, 2)
        return a, a2

    # -- the prime-field domain ---------------------------------------------------------------------
    @guarded
    def share_mod(self, values: Any, *, owner: int, moduli: Any) -> AuthShares:
        """The owner's integers (any sign) as authenticated shares: a mask of the owner's, and the
        owner's broadcast of value minus mask (checked with the rest at the next check)."""
        mods = self._basis(moduli)
        if not 0 <= owner < self.parties:
            raise ConfigError(f"input owner {owner} is not a party (0..{self.parties - 1})")
        tag = self._tag("input")
        if self.me == owner:
            v = lift_public(values, mods)
            shape = v.shape[:-1]
            if math.prod(shape) > MAX_INPUT:
                raise ValueError(f"an input of {math.prod(shape)} entries; at most {MAX_INPUT} at once")
            self.session.broadcast(list(shape), tag + "/shape")
        else:
            shape = read_shape(self.session, owner, tag + "/shape")
        self.openings.witness(np.asarray(shape, dtype=np.uint64), "input")
        count = math.prod(shape)
        mask, r = preprocessing.input_masks(self, owner, count, mods, self.keys(mods))
        qs = moduli_array(mods)
        if self.me == owner:
            d = sub_mod(v.reshape(count, len(mods)), r, qs)
            self.session.broadcast(d, tag)
        else:
            d = self.session.recv_array(owner, tag, dtype=np.uint64, shape=(count, len(mods)))
            if np.any(d >= qs):
                raise FrameError(f"party {self.session.parties[owner]!r} sent an input out of range")
        # the broadcast value joins the view every party compares at the next check
        self.openings.witness(d, "input")
        return self.add_public_residues(mask, d).reshape(shape)

    def share_mod_in_range(self, values: Any, *, owner: int, lo: int, hi: int, modulus: int | None = None,
                           moduli: Any = None) -> AuthShares:
        """The owner's integers authenticated mod one prime (``modulus``) or over an RNS basis
        (``moduli``), every entry proven to lie in [lo, hi] before this returns, as one integer in
        every limb (:func:`~.ranges.input_in_range`, :func:`~.ranges.input_in_range_basis`): an
        honest party raises :class:`~shaper.errors.DeviationError` naming the owner when the proof
        fails, and the owner itself refuses an entry outside the range before sending anything."""
        if (modulus is None) == (moduli is None):
            raise ConfigError("a range-checked input takes one prime (modulus=) or a basis (moduli=)")
        mods = self._basis(modulus if moduli is None else moduli)
        if not 0 <= owner < self.parties:
            raise ConfigError(f"input owner {owner} is not a party (0..{self.parties - 1})")
        return self._in_range(values, owner, mods, int(lo), int(hi))

    @guarded
    def _in_range(self, values: Any, owner: int, mods: tuple[int, ...], lo: int, hi: int) -> AuthShares:
        if len(mods) == 1:
            return ranges.input_in_range(self, values, owner=owner, q=mods[0], lo=lo, hi=hi)
        return ranges.input_in_range_basis(self, values, owner=owner, moduli=mods, lo=lo, hi=hi)

    def _limb_in_range(self, values: Any, owner: int, q: int, lo: int, hi: int, keys: int) -> tuple[AuthShares, AuthShares]:
        """One limb's proof of a basis-wide range check: (entries, their digits of x - lo)."""
        return ranges.input_in_range(self, values, owner=owner, q=q, lo=lo, hi=hi, keys=keys, digits=True)

    @guarded
    def reveal_mod(self, x: ModShares, to: int | None = None) -> np.ndarray | None:
        """Open to every party (``to`` None) or to ``to`` alone, SPDZ's output order: every
        opening so far MAC-checked first (so that no party sees an output of a computation a
        deviation changed, e.g. a product whose Beaver openings were shifted), then the output
        opened and checked in turn."""
        assert isinstance(x, AuthShares)
        if to is None:
            self.check_all("before output")
            opened = self.open_partial(x, "output")
            self.check_all("output")
            return opened
        if not 0 <= to < self.parties:
            raise ConfigError(f"output recipient {to} is not a party (0..{self.parties - 1})")
        flat = x.reshape(x.size)
        mask, r = preprocessing.input_masks(self, to, x.size, x.moduli, x.keys)
        self.check_all("before output")
        masked = self.open_partial(flat - mask, "private output")
        self.check_all("private output")
        if self.me != to:
            return None
        return add_mod(masked, r, moduli_array(x.moduli)).reshape(x.share.shape)

    @guarded
    def mul_mod(self, x: ModShares, y: ModShares) -> AuthShares:
        """Element-wise product with checked triples: one round of partial openings."""
        assert isinstance(x, AuthShares) and isinstance(y, AuthShares)
        x._same(y)
        mods = x.moduli
        shape = np.broadcast_shapes(x.share.shape, y.share.shape)[:-1]
        count = int(np.prod(shape))
        xs = _broadcast(x, shape).reshape(count)
        ys = _broadcast(y, shape).reshape(count)
        a, b, c = self._take_triples(count, mods)
        keys = min(xs.keys, ys.keys, a.keys)
        xs, ys, a, b, c = (_trim(v, keys) for v in (xs, ys, a, b, c))
        opened = self.open_partial(AuthShares.concat([xs - a, ys - b]), "multiplication")
        e, f = opened[:count], opened[count:]
        z = c + self.mul_public_shares(b, e) + self.mul_public_shares(a, f)
        z = self.add_public_residues(z, mul_mod(e, f, mods))
        return z.reshape(shape)

    def matmul_mod(self, x: ModShares, y: ModShares) -> AuthShares:
        """(m, k) @ (k, n) over one modulus, as m k n element-wise products summed."""
        assert isinstance(x, AuthShares) and isinstance(y, AuthShares)
        if len(x.moduli) != 1 or len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[0]:
            raise ValueError(f"matmul_mod needs (m, k) @ (k, n) over one modulus, got {x.shape} @ {y.shape} "
                             f"over {len(x.moduli)} moduli")
        (m, k), n = x.shape, y.shape[1]
        left = _broadcast(x.reshape(m, k, 1), (m, k, n))
        right = _broadcast(y.reshape(1, k, n), (m, k, n))
        return self.mul_mod(left, right).sum(axis=1)

    # -- conversions and samplers on daBits (:mod:`.dabits`) ------------------------------------------
    # argument errors are raised before the guarded step: a bad call leaves the engine running
    def dabits(self, count: int, moduli: Any) -> tuple[AuthBits, AuthShares]:
        """``count`` checked random bits authenticated in Z_2 and in every modulus (daBits)."""
        if int(count) < 0:
            raise ValueError(f"a negative daBit count: {count}")
        return self._dabits(int(count), self._basis(moduli))

    @guarded
    def _dabits(self, count: int, mods: tuple[int, ...]) -> tuple[AuthBits, AuthShares]:
        return dabits.dabits(self, count, mods)

    def bits_to_mod(self, x: Any, moduli: Any) -> AuthShares:
        """Z_2 -> Z_q for every modulus of the basis at once (a daBit per bit)."""
        if not isinstance(x, AuthBits):
            raise TypeError(f"the active engine converts authenticated bits, got {type(x).__name__}")
        return self._bits_to_mod(x, self._basis(moduli))

    @guarded
    def _bits_to_mod(self, x: AuthBits, mods: tuple[int, ...]) -> AuthShares:
        return dabits.bits_to_mod(self, x, mods)

    def planes_to_mod(self, planes: Any, weights: Sequence[int], moduli: Any) -> AuthShares:
        """sum_j weights_j x_j over the basis for bit planes x (w, N) (:func:`~.dabits.planes_to_mod`)."""
        if not isinstance(planes, AuthBits) or len(planes.shape) != 2:
            raise TypeError("planes_to_mod takes authenticated bit planes (w, N)")
        if len(weights) != planes.shape[0]:
            raise ValueError(f"{planes.shape[0]} bit planes and {len(weights)} weights")
        return self._planes_to_mod(planes, [int(c) for c in weights], self._basis(moduli))

    @guarded
    def _planes_to_mod(self, planes: AuthBits, weights: list[int], mods: tuple[int, ...]) -> AuthShares:
        return dabits.planes_to_mod(self, planes, weights, mods)

    def mod_to_bits(self, x: ModShares) -> AuthBits:
        """Z_q -> Z_2: bit planes (bitlen(q), ...) of the residues, one prime at a time."""
        if not isinstance(x, AuthShares):
            raise TypeError(f"the active engine converts authenticated shares, got {type(x).__name__}")
        if len(x.moduli) != 1:
            raise ValueError(f"mod_to_bits converts one modulus at a time, got the basis {x.moduli}")
        return self._mod_to_bits(x)

    @guarded
    def _mod_to_bits(self, x: AuthShares) -> AuthBits:
        return dabits.mod_to_bits(self, x)

    def edabits(self, count: int, bits: int, moduli: Any) -> tuple[AuthBits, AuthShares]:
        """Random r < 2^bits as bit planes (bits, count) and as shares over the basis."""
        r = self.random_bits((bits,), count)
        planes = self.bits_to_mod(r, moduli)
        weights = lift_public(np.array([1 << j for j in range(bits)], dtype=object), planes.moduli)
        total = self.mul_public_shares(planes, np.broadcast_to(weights[:, None, :], planes.share.shape).copy())
        return r, total.sum(axis=0)

    def trits_to_mod(self, t: ModShares, moduli: Any, *, balanced: bool = True) -> ModShares:
        from ..api import UnsupportedConversion

        raise UnsupportedConversion("the active engine holds no Z_3 shares (its moduli have 31 bits or more); draw "
                                    "uniform ternary values with ternary()")

    @guarded
    def ternary(self, shape: Any, moduli: Any) -> AuthShares:
        """Uniform values in {-1, 0, 1} over the basis (two daBits and an AND per draw)."""
        return dabits.ternary(self, shape, self._basis(moduli))

    def uniform(self, shape: Any, moduli: Any) -> AuthShares:
        return self.random_mod(shape, moduli)

    def hamming_weight(self, count: int, length: int, weight: int, moduli: Any) -> AuthShares:
        """Vectors (count, length) in {-1, 0, 1} with exactly ``weight`` nonzero entries
        (:func:`~.dabits.hamming_weight`: i.i.d. indicators, vectors of another weight rejected)."""
        if not 0 < int(weight) <= int(length) or int(count) < 1:
            raise ValueError(f"a fixed-weight sample needs 0 < weight <= length and count >= 1, got weight {weight}, "
                             f"length {length}, count {count}")
        return self._hamming_weight(int(count), int(length), int(weight), self._basis(moduli))

    @guarded
    def _hamming_weight(self, count: int, length: int, weight: int, mods: tuple[int, ...]) -> AuthShares:
        return dabits.hamming_weight(self, count, length, weight, mods)

    @guarded
    def gaussian(self, count: int, moduli: Any, **kw: Any) -> AuthShares:
        """Discrete-Gaussian samples over the basis: the passive engine's circuit
        (:func:`~shaper.protocols.additive.sampling.gaussian`) on authenticated bits, its
        output converted with daBits; in chunks of :data:`GAUSSIAN_CHUNK` samples (a call's
        random bits are bounded)."""
        from ..additive import sampling

        mods = self._basis(moduli)
        count = int(count)
        parts = [sampling.gaussian(self, min(GAUSSIAN_CHUNK, count - start), mods, **kw)
                 for start in range(0, count, GAUSSIAN_CHUNK)]
        return AuthShares.concat(parts) if parts else sampling.gaussian(self, 0, mods, **kw)

    # -- Z_2^64 fixed point: SPDZ2k (:mod:`.spdz2k`), where the native ring kernels are built -------------
    def _ring(self) -> spdz2k.Ring:
        if "ring" not in self.domains:
            raise self._no_domain("ring")
        if self._z2k is None:
            self._z2k = spdz2k.Ring(self)
        return self._z2k

    @guarded
    def ring_triples(self, count: int) -> tuple[AuthRing, AuthRing, AuthRing]:
        """``count`` checked SPDZ2k triples over Z_2^64 (scale 0), for benchmarks and tests: the
        engine's own products take theirs from the same generator."""
        a, b, c = self._ring().take_triples(1, count)
        return tuple(AuthRing.of(self, w, (count,), 0) for w in (a, b, c))  # type: ignore[return-value]

    def _mine(self, x: Any) -> AuthRing:
        if not isinstance(x, AuthRing):
            raise TypeError(f"the active engine's ring takes its own shares, got {type(x).__name__}")
        self._same_engine(x)
        return x

    def share(self, values: Any, *, owner: int, frac_bits: int | None = None) -> AuthRing:
        """The owner's numbers at scale 2^frac_bits as SPDZ2k shares (a mask of the owner's and
        its broadcast of value minus mask, recorded in every party's view)."""
        ring = self._ring()
        if not 0 <= owner < self.parties:
            raise ConfigError(f"input owner {owner} is not a party (0..{self.parties - 1})")
        f = self.frac_bits if frac_bits is None else frac_bits
        raw = encoding.ring_encode(encoding.as_exact_array(values), f) if self.me == owner else None
        return self._share_ring(ring, raw, owner, f)

    @guarded
    def _share_ring(self, ring: spdz2k.Ring, raw: np.ndarray | None, owner: int, f: int) -> AuthRing:
        w, shape = ring.input(raw, owner)
        return AuthRing.of(self, w, shape, f)

    @guarded
    def reveal_ring(self, x: Shared, to: int | None = None, **options: Any) -> np.ndarray | None:
        """Open to every party or to ``to`` alone (uint64), after the ring's MAC check."""
        x = self._mine(x)
        if to is not None and not 0 <= to < self.parties:
            raise ConfigError(f"output recipient {to} is not a party (0..{self.parties - 1})")
        out = self._ring().reveal(x.wide(), to)
        return None if out is None else out.reshape(x.shape)

    @guarded
    def mul(self, x: Shared, y: Shared, *, truncate: bool = True) -> AuthRing:
        """Beaver's product with SPDZ2k triples; with ``truncate``, back to x's scale."""
        x, y = self._mine(x), self._mine(y)
        shape = np.broadcast_shapes(x.shape, y.shape)
        z = self._ring().mul(x.broadcast_to(shape).wide(), y.broadcast_to(shape).wide())
        out = AuthRing.of(self, z, shape, x.frac_bits + y.frac_bits)
        return self.truncate(out, y.frac_bits) if truncate and y.frac_bits else out

    def matmul(self, x: Shared, y: Shared, *, truncate: bool = True) -> AuthRing:
        """(m, k) @ (k, n) as m k n element-wise products summed (no matrix triples yet)."""
        x, y = self._mine(x), self._mine(y)
        m, k, n = self.check_matmul(x, y)
        left = x.reshape(m, k, 1).broadcast_to((m, k, n))
        right = y.reshape(1, k, n).broadcast_to((m, k, n))
        out = self.mul(left, right, truncate=False).sum(axis=1)
        return self.truncate(out, y.frac_bits) if truncate and y.frac_bits else out

    @guarded
    def truncate(self, x: Shared, bits: int) -> AuthRing:
        """x / 2^bits, probabilistic (:mod:`.spdz2k`): floor or one more, and a large error with
        probability about |x| / 2^63, as the passive engine's."""
        x = self._mine(x)
        if bits == 0:
            return x
        if not 0 < bits < 64:
            raise ValueError(f"truncation bits must be in 1..63, got {bits}")
        return AuthRing.of(self, self._ring().truncate(x.wide(), bits), x.shape, x.frac_bits - bits)

    def add_public(self, x: Shared, ring_values: np.ndarray) -> AuthRing:
        x = self._mine(x)
        c = np.asarray(ring_values, dtype=np.uint64)
        shape = np.broadcast_shapes(x.shape, c.shape)
        w = self._ring().add_public(x.broadcast_to(shape).wide(), np.broadcast_to(c, shape).reshape(-1, 1))
        return AuthRing.of(self, w, shape, x.frac_bits)

    def add(self, x: Shared, y: Any) -> Shared:
        """x + y: shares add word-wise with carries (128-bit), public values through add_public."""
        if not isinstance(y, Shared):
            return Engine.add(self, x, y)
        x, y = self._mine(x), self._mine(y)
        frac = max(x.frac_bits, y.frac_bits)
        a, b = x.rescaled(frac), y.rescaled(frac)
        return AuthRing(self, z2k.add(a.share, b.share), z2k.add(a.mac, b.mac), frac)

    def neg(self, x: Shared) -> AuthRing:
        x = self._mine(x)
        return AuthRing(self, z2k.neg(x.share), z2k.neg(x.mac), x.frac_bits)

    def mul_public(self, x: Shared, value: Any, *, frac_bits: int | None = None, truncate: bool = True) -> Shared:
        """Public integers exactly (local); reals encoded at ``frac_bits`` and truncated back."""
        x = self._mine(x)
        arr = encoding.as_exact_array(value)
        if not encoding.has_floats(arr):
            return _times(x, encoding.ring_encode(arr, 0), x.frac_bits)
        f = x.frac_bits if frac_bits is None else frac_bits
        product = _times(x, encoding.ring_encode(arr, f), x.frac_bits + f)
        return product.truncate(f) if truncate else product

    def matmul_public(self, x: Shared, matrix: Any, *, left: bool) -> AuthRing:
        """``matrix @ x`` (``left``) or ``x @ matrix`` for a public integer matrix (local)."""
        x = self._mine(x)
        if left:
            cols = x.shape[1:]
            share, mac = (_apply_public(matrix, v.reshape(x.shape[0], -1, 2)) for v in (x.share, x.mac))
            rows = share.shape[0]
            return AuthRing(self, share.reshape((rows,) + cols + (2,)), mac.reshape((rows,) + cols + (2,)), x.frac_bits)
        transposed = matrix.T if is_sparse(matrix) else np.asarray(matrix).T
        xt = x.T
        out = self.matmul_public(AuthRing(self, np.ascontiguousarray(xt.share), np.ascontiguousarray(xt.mac),
                                          x.frac_bits), transposed, left=True)
        return out.T  # type: ignore[return-value]


def _times(x: AuthRing, k: np.ndarray, frac: int) -> AuthRing:
    shape = np.broadcast_shapes(x.shape, k.shape)
    xb, kb = x.broadcast_to(shape), np.broadcast_to(k, shape)
    return AuthRing(x.engine, z2k.mul_word(xb.share, kb), z2k.mul_word(xb.mac, kb), frac)


def _apply_public(matrix: Any, values: np.ndarray) -> np.ndarray:
    """A public integer matrix (dense or scipy sparse) times words (k, n, 2) mod 2^128."""
    if is_sparse(matrix):
        csr = matrix.tocsr()
        if csr.dtype.kind == "f" and not np.all(csr.data == np.round(csr.data)):
            raise TypeError("public matrices applied to ring shares must be integer (encode reals first)")
        if csr.shape[1] != values.shape[0]:
            raise ValueError(f"a ({csr.shape[0]}, {csr.shape[1]}) matrix applied to {values.shape[0]} rows")
        data = csr.data.astype(np.int64).view(np.uint64)
        return z2k.csr_matmul(csr.indptr.astype(np.uint64), csr.indices.astype(np.uint64), data, values)
    arr = np.asarray(matrix)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.round(arr)):
            raise TypeError("public matrices applied to ring shares must be integer (encode reals first)")
    arr = np.atleast_2d(arr.astype(np.int64))
    if arr.shape[1] != values.shape[0]:
        raise ValueError(f"a {arr.shape} matrix applied to {values.shape[0]} rows")
    return z2k.matmul(arr.view(np.uint64), np.ascontiguousarray(values))


def _broadcast(x: AuthShares, shape: tuple[int, ...]) -> AuthShares:
    full = tuple(shape) + (len(x.moduli),)
    return AuthShares(x.engine, np.broadcast_to(x.share, full).copy(),
                      np.broadcast_to(x.mac, (x.keys,) + full).copy(), x.moduli)


def _trim(x: AuthShares, keys: int) -> AuthShares:
    return x if x.keys == keys else AuthShares(x.engine, x.share, x.mac[:keys], x.moduli)

