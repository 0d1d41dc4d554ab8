"""The engine the threshold-CKKS tests run on: the production engine (OT-extension triples and
MPC sampling) where the native extension is built, and the same additive engine on the insecure
dealer where it is not (:class:`~shaper.protocols.triples.InsecureDealer`: its triples, and its
correlated OTs computed in the clear, so the engine's own samplers and conversions run
unchanged; INSECURE, tests only). The samplers' laws are tested on both in
``tests/protocols/test_additive_sampling.py``."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

from shaper.protocols.additive import AdditiveEngine
from shaper.protocols.triples import InsecureDealer

NATIVE = importlib.util.find_spec("shaper._native") is not None


def engine_for_tests(session: Any) -> Any:
    """The production engine where the extension is built; the dealer's otherwise."""
    if NATIVE:
        from shaper.jobs.fhe import engine_for

        return engine_for(session)
    warnings.simplefilter("ignore")  # the dealer warns on purpose
    return AdditiveEngine(session, triple_source=InsecureDealer(), frac_bits=0)
