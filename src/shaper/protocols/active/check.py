"""The active engine's batched MAC check: every value opened since the last check, verified at
once before anything leaves the engine (MASCOT's Pi_MACCheck over a random linear combination,
with commit-then-open of the MAC differences and a comparison of the parties' views).

Openings inside the engine (Beaver's x - a and y - b, the sacrifice's rho and zero, the
authentication's combination, an output's masked value) are *partial*: every party broadcasts
its share and sums, nothing else. The opened value y_j and this party's MAC shares m_j^(k) go to
the :class:`Openings` ledger. :meth:`Openings.check` then, for each modulus q and each key k:

1. draws coefficients r_j^(k) mod q from a seed no party chose
   (:meth:`~shaper.net.Session.shared_prg`: contributions committed before they are opened);
2. computes sigma_i^(k) = sum_j r_j^(k) m_j^(k) - alpha_i^(k) sum_j r_j^(k) y_j;
3. opens every party's sigma committed first (:func:`~shaper.protocols.commit.open_committed`),
   together with a SHA-256 digest of the values it opened (its *view*);
4. accepts only if the views agree and sum_i sigma_i^(k) = 0 for every q and k.

A party that shifted an opening by d must shift the sum of MAC shares by alpha^(k) d without
knowing alpha^(k): for each key the check passes with probability at most 1/B_q (the guess:
the honest party's key is uniform over B_q values) + 1/q (the combination cancels a nonzero
error), independently for the K keys, so at most (2/B_q)^K <= 2^-SOUNDNESS (:mod:`.shares`).
It cannot adapt its sigma to the honest ones (they are committed), nor feed two honest parties
different openings (their views differ: both stop). On failure an honest party raises
:class:`~shaper.errors.DeviationError` naming the phases of the unchecked openings, and nothing
opened since the last check is returned.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Callable

import numpy as np

from ...errors import DeviationError, FrameError
from ...kernels.modq import mul_mod
from ..commit import open_committed

__all__ = ["MAX_INPUT", "Openings", "dot_mod", "read_shape"]

DIGEST = 32
#: the most entries one announced input may have
MAX_INPUT = 1 << 26


def dot_mod(r: np.ndarray, y: np.ndarray, q: int) -> int:
    """sum_j r_j y_j mod q for residues below q < 2^62 (exact)."""
    prod = mul_mod(r.reshape(-1, 1), y.reshape(-1, 1), (q,)).ravel()
    lo = int((prod & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))
    hi = int((prod >> np.uint64(32)).sum(dtype=np.uint64))
    return ((hi << 32) + lo) % q


class Openings:
    """The openings not yet checked, by modulus: this party's view of each opened value and its
    MAC shares under every key."""

    def __init__(self) -> None:
        self._values: dict[int, list[np.ndarray]] = {}
        self._macs: dict[int, list[np.ndarray]] = {}
        self._phases: list[str] = []
        self._view = hashlib.sha256(b"shaper/active/view/v1")
        self.checked = 0   # values verified so far
        self.checks = 0    # checks run

    def __len__(self) -> int:
        return sum(sum(len(v) for v in vs) for vs in self._values.values())

    def record(self, opened: np.ndarray, mac: np.ndarray, moduli: tuple[int, ...], phase: str) -> None:
        """Add opened residues (..., L) and this party's MAC shares (K, ..., L) of them."""
        self.witness(opened, phase)
        for c, q in enumerate(moduli):
            self._values.setdefault(q, []).append(np.ascontiguousarray(opened[..., c]).ravel())
            k = mac.shape[0]
            self._macs.setdefault(q, []).append(np.ascontiguousarray(mac[..., c]).reshape(k, -1))

    def witness(self, public: np.ndarray, phase: str) -> None:
        """Add a value every party should have received alike (an opening, an owner's broadcast)
        to this party's view, which the next check compares across the parties."""
        if phase not in self._phases:
            self._phases.append(phase)
        arr = np.ascontiguousarray(public, dtype=np.uint64)
        self._view.update(repr(arr.shape).encode())
        self._view.update(arr.astype("<u8", copy=False).tobytes())

    def check(self, session: Any, alpha: Callable[[int], np.ndarray], tag: str) -> None:
        """Verify every recorded opening (module notes); empties the ledger. Raises
        :class:`~shaper.errors.DeviationError` when a party deviated (at every honest party whose
        check sees it; one whose check passed has the right values: non-unanimous abort)."""
        if not self._values and not self._phases:
            return
        phases = ", ".join(self._phases)
        coins = session.shared_prg(range(session.n), tag + "/coins")
        view = self._view
        sigmas = []
        count = 0
        for q in sorted(self._values):
            y = np.concatenate(self._values[q])
            keys = min(m.shape[0] for m in self._macs[q])
            macs = np.concatenate([m[:keys] for m in self._macs[q]], axis=1)
            a = alpha(q)
            count += len(y)
            for k in range(keys):
                r = coins.below(q, len(y))
                sigma = (dot_mod(r, macs[k], q) - int(a[k]) * dot_mod(r, y, q)) % q
                sigmas.append((q, sigma))
        payload = view.copy().digest() + np.asarray([s for _, s in sigmas], dtype="<u8").tobytes()
        opened = open_committed(session, payload, tag, error=DeviationError)
        views_differ = []
        totals = [0] * len(sigmas)
        for index, blob in enumerate(opened):
            name = session.parties[index]
            if len(blob) != len(payload):
                raise FrameError(f"party {name!r} opened {len(blob)} bytes in the MAC check; expected {len(payload)}")
            if blob[:DIGEST] != payload[:DIGEST]:
                views_differ.append(name)
            theirs = np.frombuffer(blob[DIGEST:], dtype="<u8")
            for j, (q, _) in enumerate(sigmas):
                if int(theirs[j]) >= q:
                    raise FrameError(f"party {name!r} opened a MAC difference out of range in the MAC check")
                totals[j] = (totals[j] + int(theirs[j])) % q
        failed = any(totals)
        if failed or views_differ:
            parts = []
            if failed:
                parts.append(f"MAC check failed ({phases}): a party changed a share or a MAC share")
            if views_differ:
                parts.append(f"{'and ' if failed else ''}the parties saw different opened values ({phases}): party "
                             f"{', '.join(repr(v) for v in views_differ)} disagrees with this party (a party sent "
                             "different values to different peers, or lied about what it saw)")
            raise DeviationError("; ".join(parts) + ". Nothing opened since the last check was output")
        # only a check that passed empties the ledger (a failed or interrupted one leaves it, and the
        # engine refuses to go on)
        self._values.clear()
        self._macs.clear()
        self._phases = []
        self._view = hashlib.sha256(b"shaper/active/view/v1")
        self.checked += count
        self.checks += 1


def read_shape(session: Any, owner: int, tag: str, limit: int = MAX_INPUT) -> tuple[int, ...]:
    """An input's shape as its owner announced it, checked before anything is allocated: at most
    8 axes, each a nonnegative int, at most ``limit`` entries (Python integers: no overflow)."""
    shape = session.recv_meta(owner, tag)
    ok = isinstance(shape, list) and len(shape) <= 8 and all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= limit for d in shape)
    if not ok or math.prod(shape) > limit:
        raise FrameError(f"party {session.parties[owner]!r} announced an input of shape {shape!r} (at most 8 axes "
                         f"and {limit} entries)")
    return tuple(shape)
