"""The conformance programs: the same code on every secret-sharing engine (SPU's protocol tests).

Each ``prog_*(engine, ...)`` uses only the engine interface (:mod:`shaper.protocols.api`) and
returns what it revealed; :func:`run` executes a program on one engine kind — the plaintext
reference in-process, Hybrid2PC over two in-memory parties (small keys, dealer triples),
Replicated3PC over three, AdditiveEngine over 2, 3 and 5 (OT triples; dealer triples where
the native extension is absent) — and returns every party's results. ``test_conformance.py`` checks
them against numpy and against the reference.
"""

import importlib.util
import warnings

import numpy as np

from shaper.kernels import z2k
from shaper.net import run_in_memory
from shaper.protocols import Hybrid2PC, InsecureDealer, OtTriples, Reference, Replicated3PC
from shaper.protocols.active import ActiveEngine
from shaper.protocols.additive import AdditiveEngine
from shaper.protocols.ot import InsecureLinks

NATIVE = importlib.util.find_spec("shaper._native") is not None  # OT extension is native only
KEY_BITS = 640  # Paillier keys of the hybrid engine: insecure test size
ENGINES = ("reference", "hybrid", "replicated", "additive-2", "additive-3", "additive-5", "active-2", "active-3",
           "active-5")
PARTIES = {"reference": 1, "hybrid": 2, "replicated": 3, "additive-2": 2, "additive-3": 3, "additive-5": 5,
           "active-2": 2, "active-3": 3, "active-5": 5}
#: the active engine holds fixed point over Z_2^64 (SPDZ2k) where the native ring kernels are built
ACTIVE_RING = NATIVE and z2k.available()
#: the engines that hold fixed point over Z_2^64
RING_ENGINES = tuple(k for k in ENGINES if ACTIVE_RING or not k.startswith("active-"))


def make_engine(kind, session=None, frac_bits=16):
    if kind == "reference":
        return Reference(frac_bits=frac_bits)
    if kind == "hybrid":
        warnings.simplefilter("ignore")  # dealer triples warn on purpose
        return Hybrid2PC.setup(session, key_bits=KEY_BITS, triple_source=InsecureDealer(), frac_bits=frac_bits)
    if kind == "replicated":
        return Replicated3PC(session, frac_bits=frac_bits)
    if kind.startswith("additive-"):
        if NATIVE:  # the real preprocessing: OT extension among the parties
            return AdditiveEngine(session, triple_source=OtTriples(), frac_bits=frac_bits)
        warnings.simplefilter("ignore")  # dealer triples warn on purpose
        return AdditiveEngine(session, triple_source=InsecureDealer(), frac_bits=frac_bits)
    if kind.startswith("active-"):
        # without the extension the same protocol runs on correlated OTs computed in the clear
        return ActiveEngine(session, links=None if NATIVE else InsecureLinks(session), frac_bits=frac_bits)
    raise ValueError(kind)


def _job(session, kind, program, args, frac_bits):
    return program(make_engine(kind, session, frac_bits), *args)


def run(kind, program, *args, frac_bits=16):
    """``program(engine, *args)`` on every party of an engine of ``kind``; results in party order."""
    if kind == "reference":
        return [program(make_engine(kind, frac_bits=frac_bits), *args)]
    return run_in_memory(PARTIES[kind], _job, kind, program, args, frac_bits, timeout=120)


def last(engine):
    """The highest party index: inputs come from both ends of the party list."""
    return max(getattr(engine, "parties", 1) - 1, 0)


# -- programs ------------------------------------------------------------------------------------
def prog_share_reveal(engine, xv):
    x = engine.share(xv, owner=last(engine))
    ints = engine.share(np.arange(-3, 3), owner=0, frac_bits=0)
    return {"all": x.reveal(), "to0": x.reveal(to=0), "ints": ints.reveal(), "ring": engine.reveal_ring(x),
            "shape": x.shape, "frac_bits": x.frac_bits}


def prog_linear(engine, xv, yv):
    x = engine.share(xv, owner=0)
    y = engine.share(yv, owner=last(engine))
    return [(x + y).reveal(), (x - y).reveal(), (3 - x).reveal(), (x * -7).reveal(), (-y + 2.5).reveal(),
            x.sum().reveal()]


def prog_local(engine, mv):
    """Shape operations and public products: all local."""
    m = engine.share(mv, owner=0)  # (3, 4)
    w = np.array([[1, -2], [0, 3], [2, 2], [-1, 0]])
    return {"index": m[1].reveal(), "slice": m[:, 1:3].reveal(), "T": m.T.reveal(), "reshape": m.reshape(12).reveal(),
            "sum0": m.sum(axis=0).reveal(), "right": (m @ w).reveal(), "left": (w.T @ m.T).reveal(),
            "mixed": (m + engine.share(mv, owner=0, frac_bits=8)).reveal(), "half": (m * 0.5).reveal()}


def prog_mul(engine, xv, yv):
    x = engine.share(xv, owner=0)
    y = engine.share(yv, owner=last(engine))
    exact = engine.mul(x, y, truncate=False)
    return [engine.reveal_ring(exact), (x * y).reveal(), (x * 0.75).reveal()]


def prog_matmul(engine, xv, yv):
    x = engine.share(xv, owner=0)
    y = engine.share(yv, owner=last(engine))
    return [engine.reveal_ring(engine.matmul(x, y, truncate=False)), (x @ y).reveal()]


def prog_truncate(engine, xv, bits):
    x = engine.share(xv, owner=0)
    t = x.truncate(bits)
    return {"value": t.reveal(), "frac_bits": t.frac_bits, "down": (x * x).truncate().frac_bits}


def prog_expression(engine, xv, yv):
    """A small fixed-point program mixing everything: (x * y + 1.5) @ w - x.sum()."""
    x = engine.share(xv, owner=0)
    y = engine.share(yv, owner=last(engine))
    w = engine.share(np.full((xv.shape[1], 2), 0.25), owner=last(engine))
    return ((x * y + 1.5) @ w - x.sum()).reveal()


def prog_conversions(engine):
    """What the engine says it supports, and what an unsupported conversion raises."""
    from shaper.protocols import UnsupportedConversion

    missing = {}
    for name in ("h2s", "s2h"):
        if name in engine.conversions:
            continue
        try:
            getattr(engine, name)(None, holder=0, key_owner=0)
            missing[name] = "no error"
        except UnsupportedConversion as exc:
            missing[name] = str(exc)
    return sorted(engine.conversions), missing


P61 = (1 << 61) - 1
P50 = 1125899906842597  # the largest prime below 2^50
BASIS = (P61, P50, 3)  # an RNS basis; its columns are three prime fields
P31 = 2147483647
WIDE_BASIS = (P61, P50, P31)  # the active engine authenticates moduli of 31 bits and more


def _refusal(fn):
    """The message of the UnsupportedConversion an engine raises for a domain it does not hold."""
    from shaper.protocols import UnsupportedConversion

    try:
        fn()
    except UnsupportedConversion as exc:
        return {"refused": str(exc)}
    return {"refused": None}


def prog_mod(engine, xs, ys, mx, my, basis=BASIS):
    """Z_q and RNS shares: inputs from both ends, linear operations, public constants, Beaver
    products, a matrix product over one prime, openings to all and to one party."""
    if "mod" not in engine.domains:
        return _refusal(lambda: engine.share_mod(xs, owner=0, moduli=basis))
    x = engine.share_mod(xs, owner=0, moduli=basis)
    y = engine.share_mod(ys, owner=last(engine), moduli=basis)
    a = engine.share_mod(mx, owner=last(engine), moduli=P61)
    b = engine.share_mod(my, owner=0, moduli=P61)
    return {"sum": (x + y).reveal(), "diff": (x - y - 7).reveal(), "pub": (x * -3 + 5).reveal(),
            "prod": (x * y).reveal(), "mm": (a @ b).reveal(), "to0": (x * y + x).reveal(to=0)}


def prog_bits(engine, xb, yb):
    """Z_2 shares (bit-sliced): inputs from both ends, XOR and NOT (local), AND (Beaver bit
    triples), a public mask, openings to all and to one party."""
    if "bits" not in engine.domains:
        return _refusal(lambda: engine.share_bits(xb, owner=0))
    x = engine.share_bits(xb, owner=0)
    y = engine.share_bits(yb, owner=last(engine))
    return {"and": (x & y).reveal(), "xor": (x ^ y).reveal(), "not": (~x).reveal(),
            "zero": (x & np.uint64(0)).reveal(), "to0": ((x & y) ^ ~y).reveal(to=0)}


def prog_domain_conversions(engine, xb, xs, basis=WIDE_BASIS):
    """Between the domains: bits into every limb of a basis, residues of one prime into bits,
    daBits, and the samplers (uniform ternary, discrete Gaussian) over the basis."""
    if not hasattr(engine, "bits_to_mod"):
        return {"refused": True}
    x = engine.share_bits(xb, owner=0)
    v = engine.share_mod(xs, owner=last(engine), moduli=P61)
    b2, bf = engine.dabits(70, basis)
    return {"b2a": engine.bits_to_mod(x, basis).reveal(), "a2b": engine.mod_to_bits(v).reveal(),
            "dabit-bits": b2.reveal(), "dabit-field": bf.reveal(), "ternary": engine.ternary(64, basis).reveal(),
            "gaussian": engine.gaussian(64, basis).reveal()}


def prog_errors(engine):
    """Errors every engine raises the same way."""
    out = {}
    x = engine.share(np.array([1.0, 2.0]), owner=0)
    checks = [("bool", lambda: bool(x)), ("lower-scale", lambda: x.rescaled(x.frac_bits - 1)),
              ("matmul-shape", lambda: engine.matmul(x, x))]
    if engine.me == 0:  # the owner fails before sending, so only it tries
        checks.append(("overflow", lambda: engine.share([2.0 ** 50], owner=0)))
    for name, fn in checks:
        try:
            fn()
            out[name] = "no error"
        except Exception as exc:  # noqa: BLE001 - the type is what we compare
            out[name] = type(exc).__name__
    return out
