"""Three insurers pool claim amounts without showing them, and none can cheat the total.

Each insurer inputs its claims, each *proven* to lie between 0 and 10^6 before anything uses
it (an insurer cannot inflate its part with an absurd or negative amount), and the parties
compute the total claimed and the sum of squares (for the variance) on the active engine:
every opening is MAC-checked before anything is output, so any two insurers that deviate
together can make the job stop, never make it return a wrong total. Each insurer also flags
the claims it finds suspicious (a private bit per claim); the job opens only which claims
every insurer flagged (an AND of authenticated bits), never one insurer's flags, and the number
of flags raised in all, plus discrete-Gaussian noise the insurers sample together (the flags
converted into the field with daBits; no insurer can choose or see the noise). Then the same
job runs with one insurer that shifts its share in one multiplication: every honest insurer
stops.

    python examples/active_mpc.py --local 3

Or one process per host, with a parties file (docs/net.md):

    python examples/active_mpc.py --parties parties.toml --me alice   # and bob, carol
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from shaper.errors import DeviationError, PeerError
from shaper.net import Session, launch
from shaper.protocols.active import ActiveEngine

P = (1 << 61) - 1  # the field; every total below stays far under it
CAP = 10**6        # the agreed bound of one claim
CLAIMS = 50


def claims(index: int) -> np.ndarray:
    """Each insurer's claims (deterministic so the result can be checked)."""
    return (np.arange(CLAIMS, dtype=np.int64) * (7919 * (index + 1))) % CAP


def flags(index: int) -> np.ndarray:
    """Each insurer's private flags: claim j is suspicious to insurer i when j % (i + 2) == 0."""
    return np.arange(CLAIMS) % (index + 2) == 0


def pooled(session: Session) -> dict:
    mpc = ActiveEngine(session)
    parts = [mpc.share_mod_in_range(claims(i) if i == session.index else None, owner=i, modulus=P, lo=0, hi=CAP)
             for i in range(session.n)]
    everything = parts[0]
    for part in parts[1:]:
        everything = everything + part
    total = everything.sum(axis=0)
    squares = (everything * everything).sum(axis=0)
    t, s = (int(v) for v in (total.reveal()[0], squares.reveal()[0]))
    marks = [mpc.share_bits(flags(i) if session.index == i else None, owner=i) for i in range(session.n)]
    everyone = marks[0]
    for mark in marks[1:]:  # authenticated bits: AND from checked triples, MAC-checked openings
        everyone = everyone & mark
    flagged = [int(j) for j in np.flatnonzero(everyone.reveal())]
    # every flag into the field (daBits), summed, plus noise sampled inside the MPC
    raised = mpc.bits_to_mod(marks[0], P).sum(axis=0)
    for mark in marks[1:]:
        raised = raised + mpc.bits_to_mod(mark, P).sum(axis=0)
    noisy = int((raised + mpc.gaussian(1, P)).reveal()[0, 0])
    return {"total": t, "sum_of_squares": s, "flagged by every insurer": flagged,
            "flags raised, with joint Gaussian noise": noisy - P if noisy > P // 2 else noisy,
            "MAC-checked values": mpc.openings.checked}


class ShiftsOneProduct(ActiveEngine):
    """A deviating insurer: adds 1 to its share of the first value it opens in a product."""

    def open_partial(self, x, phase):
        if phase == "multiplication" and not getattr(self, "_done", False):
            self._done = True
            x = x._like(x.share.copy(), x.mac)
            x.share[(0,) * x.share.ndim] = (int(x.share[(0,) * x.share.ndim]) + 1) % x.moduli[0]
        return super().open_partial(x, phase)


def with_a_cheat(session: Session) -> str:
    cls = ShiftsOneProduct if session.index == session.n - 1 else ActiveEngine
    mpc = cls(session)
    x = mpc.share_mod_in_range(claims(session.index) if session.index == 0 else None, owner=0, modulus=P, lo=0,
                               hi=CAP)
    try:
        return f"output {(x * x).sum(axis=0).reveal()[0]}"
    except (DeviationError, PeerError) as exc:
        return f"stopped: {type(exc).__name__}: {str(exc)[:90]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local", type=int, metavar="N", help="run N parties here (processes over loopback TLS)")
    ap.add_argument("--parties", help="parties file (one process per host)")
    ap.add_argument("--me", help="this party's name in the parties file")
    args = ap.parse_args()
    if args.local:
        results = launch(args.local, pooled)
        want = sum(claims(i) for i in range(args.local))
        assert results[0]["total"] == int(want.sum()) and results[0]["sum_of_squares"] == int((want ** 2).sum())
        every = np.logical_and.reduce([flags(i) for i in range(args.local)])
        assert results[0]["flagged by every insurer"] == [int(j) for j in np.flatnonzero(every)]
        raised = int(sum(flags(i).sum() for i in range(args.local)))
        assert abs(results[0]["flags raised, with joint Gaussian noise"] - raised) <= 23  # the sampler's support
        print(json.dumps(results[0]), "(equal to the plaintext totals)")
        for name, outcome in zip(("alice", "bob", "carol", "dave", "erin"), launch(args.local, with_a_cheat)):
            print(f"{name}: {outcome}")
        return
    if not (args.parties and args.me):
        ap.error("pass --local N, or --parties FILE and --me NAME")
    with Session.from_config(args.parties, me=args.me) as session:
        print(json.dumps(pooled(session)))


if __name__ == "__main__":
    main()
