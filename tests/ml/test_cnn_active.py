"""The encrypted CNN under a key made on the active engine: only the argmax reaches the client.

* ``output="label"`` (the default on such a key): the images a packed joint input (784 pixels
  range-checked each), every party evaluates the plan, folds the logits to period 16, and the
  argmax is computed inside the MPC (:func:`~shaper.protocols.threshold_ckks.decrypt_argmax`);
  oracle: the plaintext model's predictions. The model goes in the clear here (``--encrypt
  image``; its joint encryption alone takes 48 s at N = 2^14, and the encrypted model's path is
  the joint input of tests/protocols/test_threshold_ckks_active.py). The model owner announces a
  bound four times its weights': every party checks the clear weights against it, and nothing
  it announces sizes anything, so the labels are unaffected.
* ``output="logits"`` is refused at every party with the derived worst case (no flood sized by a
  declaration), before any input is encrypted.

The deviations inside the label decryption, and input owners beyond their bounds, are played at
2 and 3 parties in tests/protocols/test_threshold_ckks_argmax.py and test_threshold_ckks_active.py
on small parameters (the same code paths; at N = 2^14 one run costs a minute)."""

from __future__ import annotations

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

IMAGES = 3


def _keygen(session):
    from shaper.ml.cnn import plan as P
    from shaper.ml.cnn.params import cnn_parameters
    from shaper.protocols import threshold_ckks as tc
    from shaper.protocols.active import ActiveEngine

    params = cnn_parameters()
    return tc.keygen(ActiveEngine(session), params, rotations=P.rotation_steps(params), method="local", check=False,
                     budget=64)


@pytest.fixture(scope="module")
def keys():
    from shaper.net import run_in_memory

    return run_in_memory(2, _keygen, timeout=900)


def _job(session, keys, output, announced=None, encrypt=("image",)):
    from shaper.jobs import cnn as jobs

    images = cnn.mnist.sample()[0][:IMAGES] / 255.0 if session.index == 0 else None
    model = cnn.bundled() if session.index == 1 else None
    if announced is not None and session.index == 1:  # the owner announces another bound than its weights'
        jobs.model_bound = lambda m: announced
    before = session.stats.bytes_sent
    try:
        return jobs.infer_job(session, keys[session.index], images=images, model=model, output=output,
                              encrypt=encrypt)
    finally:
        _SENT[session.index] = session.stats.bytes_sent - before


_SENT: dict[int, int] = {}


def test_labels_equal_the_plaintext_predictions_whatever_bound_the_owner_announces(keys, monkeypatch):
    from shaper.jobs import cnn as jobs
    from shaper.net import run_in_memory

    monkeypatch.setattr(jobs, "model_bound", jobs.model_bound)  # restored after the owner's override
    true_bound = jobs.model_bound(cnn.bundled())
    client, owner = run_in_memory(2, _job, keys, None, 4 * true_bound, timeout=900)
    images = cnn.mnist.sample()[0][:IMAGES] / 255.0
    assert np.array_equal(client["predicted"], cnn.bundled().forward(images).argmax(1))
    assert client["output"] == "label" and client["security"] == "active" and "logits" not in client
    assert "predicted" not in owner and "logits" not in owner  # the label goes to the client alone
    assert client["resolution"] < 1e-3


def test_logits_are_refused_with_the_derived_worst_case_before_any_input_is_encrypted(keys):
    outcome = run(2, _job, keys, "logits", timeout=30)
    for o in outcome:
        assert o[0] == "error" and o[1] == "ConfigError" and "--reveal label" in o[2] and "worst-case" in o[2], o
    assert max(_SENT.values()) < 4096  # the setting's round, nothing of an input
