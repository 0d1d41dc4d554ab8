"""The encrypted CNN under a key made on the active engine (``shaper fhe keygen --security
active``): the inference job's engine follows the key, so the client's pixels and the model
owner's weights are range-checked inputs, every error and flood is range-checked and every
opening MAC-checked. Deviating parties at 2 parties (the same joint steps at 3 parties run in
``tests/protocols/test_threshold_ckks_active.py`` on a small ring; the honest inference on a
real key, with its 28 rotation keys, is ``shaper cnn demo --security active``, measured):

===============================================  ================================================
deviation                                        what stops it
===============================================  ================================================
the model owner sends weights whose encoding     the range proof of its coefficients, naming it,
exceeds the bound it announced (its own checks   before any weight is encrypted
skipped)
the client sends pixels beyond [0, 1] (its own   the range proof of its image's coefficients,
checks skipped)                                  naming it
a party whose key directory lost its MAC shares  every party agrees on the engine first: refused
                                                 by name
===============================================  ================================================

Not covered, and documented (docs/cnn.md, "What remains"): the output bound the floods are
sized by is still the model owner's declaration.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

import numpy as np
import pytest

from shaper.ml import cnn

from ..protocols.deviating import run

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("shaper._native") is None or os.environ.get("SHAPER_NATIVE", "").lower() in
    ("off", "0", "no", "false"),
    reason="N = 2^14 CKKS and the active engine's OT extension at usable speed need the native kernels")

jobs = importlib.import_module("shaper.jobs.cnn")


@pytest.fixture(scope="module")
def active_keys():
    """Two parties' keys made on the active engine (secret, public and relinearisation keys; the
    rotation keys are placeholders: every deviation here stops before the plan runs, and the
    whole inference on a real key is `shaper cnn demo --security active`, measured in
    benchmarks/results/cnn_active.json)."""
    from shaper.crypto import ckks
    from shaper.ml.cnn import plan as P
    from shaper.ml.cnn.params import cnn_parameters
    from shaper.net import run_in_memory
    from shaper.protocols import threshold_ckks as tc
    from shaper.protocols.active import ActiveEngine

    params = cnn_parameters()
    keys = run_in_memory(2, lambda session: tc.keygen(ActiveEngine(session), params, method="local", check=False),
                         timeout=600)
    for k in keys:
        k.galois = {ckks.galois_element(params, s): k.relin for s in P.trace(params).rotation_steps}
    return keys


def _job(session, keys, encrypt):
    images = cnn.mnist.sample()[0][:1] / 255.0 if session.index == 0 else None
    model = cnn.bundled() if session.index == 1 else None
    return jobs.infer_job(session, keys[session.index], images=images, model=model, encrypt=encrypt)


def _skip_own_checks(monkeypatch):
    from shaper.protocols.active import ranges

    inputs = importlib.import_module("shaper.protocols.threshold_ckks.inputs")
    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)
    monkeypatch.setattr(inputs, "_check_values", lambda v, slots, bound: np.atleast_2d(np.asarray(v, np.float64)))


def test_a_model_owner_beyond_its_announced_bound_is_refused_naming_it(active_keys, monkeypatch):
    plan = importlib.import_module("shaper.ml.cnn.plan")
    real = plan.pack_model
    _skip_own_checks(monkeypatch)
    monkeypatch.setattr(jobs, "model_bound", lambda model: 1.0)  # announces 1, sends weights 4096 times larger
    monkeypatch.setattr(plan, "pack_model", lambda model: {k: v * 4096.0 for k, v in real(model).items()})
    outcome = run(2, _job, active_keys, ("image", "model"), timeout=120)
    assert outcome[0][0] == "error" and outcome[0][1] == "DeviationError" and "party1" in outcome[0][2], outcome


def test_a_client_with_pixels_beyond_one_is_refused_naming_it(active_keys, monkeypatch):
    plan = importlib.import_module("shaper.ml.cnn.plan")
    real = plan.pack_images
    _skip_own_checks(monkeypatch)
    monkeypatch.setattr(jobs.P, "pack_images", lambda images: real(images) * 4096.0)
    outcome = run(2, _job, active_keys, ("image",), timeout=120)  # the model in the clear: only images encrypted
    assert outcome[1][0] == "error" and outcome[1][1] == "DeviationError" and "party0" in outcome[1][2], outcome


def test_a_party_whose_key_lost_its_mac_shares_is_refused_by_name(active_keys):
    import dataclasses

    keys = [active_keys[0], dataclasses.replace(active_keys[1], macs=None)]
    outcome = run(2, _job, keys, ("image", "model"), timeout=120)
    assert all(o[0] == "error" for o in outcome), outcome
    assert any(o[1] == "ConfigError" and "security" in o[2] and "passive" in o[2] for o in outcome), outcome
