"""The n-party MPC job behind ``shaper mpc run`` and ``benchmarks/mpc.py``: every party makes
preprocessing with OT extension and samples and converts over an RNS key basis, timing each
operation; revealed samples are checked against their support.

The default basis is one a threshold-CKKS key of ring degree 2^14 would use: nine NTT-friendly
primes (q = 1 mod 2^15): q_0 of 60 bits, seven of 45 bits and a 60-bit special prime, 435 bits
in all (within the 438 bits of 128-bit security at degree 2^14).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..net.phases import Meter

__all__ = ["ACTIVE_OPS", "CKKS_14", "OPS", "P61", "SECURITY", "mpc_job"]

CKKS_14 = (1152921504606748673, 35184371138561, 35184370941953, 35184370352129, 35184370155521,
           35184369893377, 35184368877569, 35184368320513, 1152921504606683137)
P61 = (1 << 61) - 1
OPS = ("ot", "triples-61", "triples-64", "bit-triples", "gaussian", "ternary", "b2a-61", "b2a", "t2a", "a2b", "cmp-20")
#: what the active engine runs: MAC'd triples checked by sacrifice, multiplications of
#: authenticated inputs opened after the MAC check, range-checked inputs, and AND triples
#: (authenticated bits, WRK17's checked leaky ANDs, bucketed), and comparisons of two parties'
#: private 20-bit integers on them; the conversions and samplers on daBits
ACTIVE_OPS = ("triples-61", "triples-64", "mul-61", "range-40", "range-40-rns", "bit-triples", "cmp-20", "gaussian", "ternary", "b2a-61",
              "b2a", "a2b")
#: the operations both engines run through the same engine methods
CONVERSIONS = ("gaussian", "ternary", "b2a-61", "b2a", "a2b")
SECURITY = ("passive", "active")


def _timed(session: Any, fn: Callable[[], Any], items: int) -> dict:
    """Run fn between two barriers; seconds, items/s and bytes this party sent per item."""
    session.barrier("mpc-op-start")
    meter = Meter(session)
    out = fn()
    step = meter.read(items=items)
    session.barrier("mpc-op-end")
    seconds = step.seconds
    return {"seconds": seconds, "items": items, "rate": items / seconds if seconds else float("inf"),
            "bytes_per_item": step.bytes_sent / max(items, 1), "result": out}


def _random_ots(engine: Any, count: int) -> int:
    """Random OT extension to the next party and from the previous one (ring): ``count`` OTs in
    each role, messages hashed to 128-bit keys. The ``ot`` rate counts both roles (a party's OTs
    per second, as sender or receiver: with one core per party, the rate of one sender and one
    receiver, as libOTe and emp-ot report it)."""
    from ..protocols.ot import CHUNK_OTS, links_for

    links = links_for(engine.session)
    me, n = engine.me, engine.parties
    nxt, prev = (me + 1) % n, (me - 1) % n
    links.ensure([nxt, prev])
    tx, rx = links._links[nxt], links._links[prev]
    done = 0
    # output buffers reused chunk after chunk (fresh pages cost more than the hashing)
    keys = np.empty((CHUNK_OTS, 16), np.uint8)
    pair = (np.empty((CHUNK_OTS, 16), np.uint8), np.empty((CHUNK_OTS, 16), np.uint8))
    while done < count:
        m = min(CHUNK_OTS, count - done)
        choices = engine.prg.uint64((m + 63) // 64).view(np.uint8)
        u, _ = rx.rx.extend_hash(choices, m, rx.domain_rx, out=keys[:m])
        engine.session.send(prev, u, "mpc-rot")
        tx.tx.extend_hash(engine.session.recv_bytes(nxt, "mpc-rot"), m, tx.domain_tx, out=(pair[0][:m], pair[1][:m]))
        done += m
    return done


def mpc_job(session: Any, ops: Sequence[str] = OPS, count: int = 100_000, moduli: Sequence[int] = CKKS_14,
            check: bool = True, repeat: int = 1, security: str = "passive") -> dict:
    """Every party's side of the job: {op: timing} (see the module notes); with ``repeat`` > 1
    each operation runs that many times and the run of median time is kept (``runs``: every
    run's rate), since one short run on a shared machine varies by +-15 %. ``security``:
    "passive" (the additive engine) or "active" (the active engine: :data:`ACTIVE_OPS` only)."""
    if security not in SECURITY:
        raise ValueError(f"security must be one of {', '.join(SECURITY)}, got {security!r}")
    if security == "active":
        bad = [op for op in ops if op not in ACTIVE_OPS]
        if bad:
            raise ValueError(f"the active engine does not run {', '.join(bad)} yet; it runs {', '.join(ACTIVE_OPS)}")
    agree_on_security(session, security)
    job = _active_job if security == "active" else _job
    if repeat > 1:
        runs = [job(session, ops, count, moduli, check) for _ in range(repeat)]
        out = {}
        for op in ops:
            rows = sorted((r[op] for r in runs), key=lambda r: r["seconds"])
            out[op] = dict(rows[len(rows) // 2], runs=[r["rate"] for r in (run[op] for run in runs)])
        return out
    return job(session, ops, count, moduli, check)


def agree_on_security(session: Any, security: str) -> None:
    """Every party announces the engine it runs; a party that runs another stops the job at once,
    by name, before any preprocessing (a mismatch would otherwise surface as garbled messages)."""
    from ..errors import ConfigError

    session.broadcast(security, "mpc-security")
    for peer, theirs in session.gather("mpc-security").items():
        if theirs != security:
            raise ConfigError(f"party {peer!r} runs the {theirs!r} engine, this party the {security!r} one; every party "
                              "must choose the same --security (or the same security in the parties file)")


def _active_job(session: Any, ops: Sequence[str], count: int, moduli: Sequence[int], check: bool) -> dict:
    from ..protocols.active import ActiveEngine
    from ..protocols.ot import links_for

    engine = ActiveEngine(session)
    links_for(session).ensure([p for p in range(session.n) if p != session.index])  # base OTs outside timings
    out: dict[str, dict] = {}
    for op in ops:
        if op == "triples-61":
            res = _timed(session, lambda: engine.triples(count // 4, (P61,)), count // 4)
            if check:
                a, b, c = res["result"]
                rows = slice(0, 64)
                av, bv, cv = (v[rows].reveal()[:, 0] for v in (a, b, c))
                if any(int(x) * int(y) % P61 != int(z) for x, y, z in zip(av, bv, cv)):
                    raise AssertionError("an active triple is wrong")
        elif op == "triples-64":   # SPDZ2k: Z_2^64 in shares mod 2^128, sacrificed mod 2^192
            res = _timed(session, lambda: engine.ring_triples(count // 4), count // 4)
            if check:
                a, b, c = (v[:64].reveal() for v in res["result"])
                with np.errstate(over="ignore"):
                    wrong = not np.array_equal(c.view(np.uint64), a.view(np.uint64) * b.view(np.uint64))
                if wrong:
                    raise AssertionError("an active Z_2^64 triple is wrong")
        elif op == "mul-61":
            n = count // 4
            x = engine.share_mod(np.arange(n) if session.index == 0 else None, owner=0, moduli=(P61,))
            y = engine.share_mod(np.arange(n) if session.index == session.n - 1 else None, owner=session.n - 1,
                                 moduli=(P61,))
            res = _timed(session, lambda: (x * y).reveal(), n)
            if check and any(int(v) != i * i % P61 for i, v in enumerate(res["result"][:64, 0])):
                raise AssertionError("an active product is wrong")
        elif op in ("range-40", "range-40-rns"):
            # entries of 40 bits and a sign, each proven to lie in [-2^40, 2^40] before it is used,
            # mod 2^61 - 1 or as one integer in every limb of the basis
            n = count // 8
            bound = 1 << 40
            values = (engine.prg.below(2 * bound + 1, n).astype(np.int64) - bound) if session.index == 0 else None
            where = {"modulus": P61} if op == "range-40" else {"moduli": moduli}
            res = _timed(session, lambda: engine.share_mod_in_range(values, owner=0, lo=-bound, hi=bound, **where), n)
            if check:
                first = res["result"][:64].reveal()
                for c in range(first.shape[1]):
                    q = P61 if op == "range-40" else moduli[c]
                    if session.index == 0 and not np.array_equal(_centered(first[:, c], q), values[:64]):
                        raise AssertionError("a range-checked input came out wrong")
        elif op == "bit-triples":
            n = 64 * 16 * ((count + 63) // 64)  # as many as the passive job's
            res = _timed(session, lambda: engine.bit_triples(n), n)
            if check:
                a, b, c = (engine.rows_as_bits(m[:64]).reveal() for m in res["result"])
                if not np.array_equal(c, a & b):
                    raise AssertionError("an active AND triple is wrong")
        elif op == "cmp-20":
            res = _compare(session, engine, count // 4, check)
        elif op in CONVERSIONS:
            res = _conversion(session, engine, op, count, moduli, check)
        else:
            raise ValueError(f"unknown operation {op!r}; the active engine runs {', '.join(ACTIVE_OPS)}")
        res.pop("result", None)
        out[op] = res
    return out


def _job(session: Any, ops: Sequence[str], count: int, moduli: Sequence[int], check: bool) -> dict:
    from ..protocols.additive import AdditiveEngine
    from ..protocols.triples import OtTriples

    engine = AdditiveEngine(session, triple_source=OtTriples(), frac_bits=0)
    src = engine.triple_source
    from ..protocols.ot import links_for

    links_for(session).ensure([p for p in range(session.n) if p != session.index])  # base OTs outside timings
    out: dict[str, dict] = {}
    words = (count + 63) // 64
    for op in ops:
        if op == "ot":
            # each party is the receiver of 16 count OTs and the sender of as many: 32 count per party
            res = _timed(session, lambda: _random_ots(engine, 16 * count), 32 * count)
        elif op == "triples-61":
            res = _timed(session, lambda: src.mod_triples(engine, count // 4, (P61,)), count // 4)
        elif op == "triples-64":
            res = _timed(session, lambda: src.elementwise(engine, count // 4), count // 4)
        elif op == "bit-triples":
            res = _timed(session, lambda: src.bit_triples(engine, 16 * words), 64 * 16 * words)
        elif op in CONVERSIONS:
            res = _conversion(session, engine, op, count, moduli, check)
        elif op == "t2a":
            trits = engine.random_mod(count, (3,))
            res = _timed(session, lambda: engine.trits_to_mod(trits, moduli), count)
        elif op == "cmp-20":
            res = _compare(session, engine, count // 4, check)
        else:
            raise ValueError(f"unknown operation {op!r}; choose from {', '.join(OPS)}")
        res.pop("result", None)
        out[op] = res
    return out


def _conversion(session: Any, engine: Any, op: str, count: int, moduli: Sequence[int], check: bool) -> dict:
    """The samplers and conversions, on either engine (the same engine methods)."""
    from ..protocols.additive.sampling import TAIL

    if op == "gaussian":
        res = _timed(session, lambda: engine.gaussian(count // 4, moduli), count // 4)
        if check:
            vals = _centered(res["result"].limb(0).reveal()[:, 0], moduli[0])
            if np.abs(vals).max() > TAIL:
                raise AssertionError(f"a Gaussian sample left the support: {np.abs(vals).max()}")
            res["std"] = float(vals.std())
    elif op == "ternary":
        res = _timed(session, lambda: engine.ternary(count, moduli), count)
        if check:
            vals = _centered(res["result"].limb(0).reveal()[:, 0], moduli[0])
            if np.abs(vals).max() > 1:
                raise AssertionError("a ternary sample left {-1, 0, 1}")
    elif op in ("b2a", "b2a-61"):
        bits = engine.random_bits((), count)
        target = (P61,) if op == "b2a-61" else moduli
        res = _timed(session, lambda: engine.bits_to_mod(bits, target), count)
        if check and not np.array_equal(res["result"].limb(0).reveal()[:, 0], bits.reveal()):
            raise AssertionError("a converted bit came out wrong")
    else:  # a2b
        x = engine.random_mod(count // 4, moduli[0])
        res = _timed(session, lambda: engine.mod_to_bits(x), count // 4)
        if check:
            bits = res["result"].reveal()
            got = sum(bits[j].astype(np.uint64) << np.uint64(j) for j in range(bits.shape[0]))
            if not np.array_equal(got, x.reveal()[:, 0]):
                raise AssertionError("a decomposed residue came out wrong")
    return res


def _compare(session: Any, engine: Any, n: int, check: bool) -> dict:
    """[x >= y] for the first party's and the last party's private 20-bit integers, opened to
    every party: the inputs as bit planes, a 20-layer comparison circuit (any engine's bits)."""
    from ..protocols.additive.convert import compare_ge

    width, last = 20, session.n - 1

    def values(party: int) -> np.ndarray:
        return (np.arange(n, dtype=np.uint64) * np.uint64(7919 * (party + 1))) % np.uint64(1 << width)

    def planes(party: int) -> np.ndarray | None:
        if session.index != party:
            return None
        v = values(party)
        return ((v[None, :] >> np.arange(width, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(bool)

    def run() -> np.ndarray:
        x = engine.share_bits(planes(0), owner=0)
        y = engine.share_bits(planes(last), owner=last)
        return compare_ge(engine, x, y).reveal()

    res = _timed(session, run, n)
    if check and not np.array_equal(res["result"], values(0) >= values(last)):
        raise AssertionError("a comparison came out wrong")
    return res


def _centered(values: np.ndarray, q: int) -> np.ndarray:
    v = values.astype(np.int64) if q < (1 << 63) else values
    return np.where(v > q // 2, v - q, v)
