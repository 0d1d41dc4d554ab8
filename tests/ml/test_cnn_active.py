"""The encrypted CNN and a key made on the active engine: refused by name before anything is
sent. The key's range-checked errors raise the outputs' error bound from 2^40.6 to 2^46.1, and
the flood sized by it leaves no precision in the logits (measured with the job enabled: 91 of
100 predictions right, the largest logit error 18.8; docs/cnn.md, "What remains"), so the job
refuses rather than hand back plausible wrong predictions."""

from __future__ import annotations

import importlib.util
import os

import pytest

from shaper.ml import cnn

from ..protocols.deviating import run

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("shaper._native") is None or os.environ.get("SHAPER_NATIVE", "").lower() in
    ("off", "0", "no", "false"),
    reason="N = 2^14 CKKS and the active engine's OT extension at usable speed need the native kernels")


def _keygen(session):
    from shaper.ml.cnn.params import cnn_parameters
    from shaper.protocols import threshold_ckks as tc
    from shaper.protocols.active import ActiveEngine

    return tc.keygen(ActiveEngine(session), cnn_parameters(), method="local", check=False)


def _job(session, keys):
    from shaper.jobs.cnn import infer_job

    images = cnn.mnist.sample()[0][:1] / 255.0 if session.index == 0 else None
    model = cnn.bundled() if session.index == 1 else None
    before = session.stats.bytes_sent
    try:
        infer_job(session, keys[session.index], images=images, model=model)
    finally:
        _SENT[session.index] = session.stats.bytes_sent - before


_SENT: dict[int, int] = {}


def test_the_cnn_refuses_a_key_made_on_the_active_engine_before_sending_anything():
    from shaper.net import run_in_memory

    keys = run_in_memory(2, _keygen, timeout=600)
    outcome = run(2, _job, keys, timeout=30)
    for o in outcome:
        assert o[0] == "error" and o[1] == "ConfigError" and "active engine" in o[2] and "91 of 100" in o[2], o
    assert _SENT == {0: 0, 1: 0}
