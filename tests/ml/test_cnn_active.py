"""The encrypted CNN under a key made on the active engine (``shaper fhe keygen --security
active``): the inference job's engine follows the key, so the client's pixels and the model
owner's weights are range-checked inputs, every error and flood is range-checked and every
opening MAC-checked; the logits equal the plaintext model's predictions. Deviating parties at 2
parties (the key generation with the CNN's 28 rotation keys takes a minute; 3 parties run in
``tests/protocols/test_threshold_ckks_active.py`` on a small ring for the same joint steps):

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

from shaper.cli import main
from shaper.ml import cnn

from ..protocols.deviating import run

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("shaper._native") is None or os.environ.get("SHAPER_NATIVE", "").lower() in
    ("off", "0", "no", "false"),
    reason="N = 2^14 CKKS and the active engine's OT extension at usable speed need the native kernels")

jobs = importlib.import_module("shaper.jobs.cnn")


@pytest.fixture(scope="module")
def active_keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("cnn-active") / "keys"
    assert main(["fhe", "keygen", "--local", "2", "--rotations", "cnn", "--security", "active", "--out",
                 str(root)]) == 0
    return root


def test_cnn_infer_on_an_active_key_gives_the_plaintext_predictions(active_keys, tmp_path, capsys):
    capsys.readouterr()
    logits = tmp_path / "logits.npy"
    assert main(["cnn", "infer", "--local-keys", str(active_keys), "--mnist-sample", "2", "--out", str(logits)]) == 0
    out = capsys.readouterr().out
    assert "client party0, model owner party1" in out
    images = cnn.mnist.sample()[0][:2] / 255.0
    want = cnn.bundled().forward(images)
    got = np.load(logits)
    assert got.shape == (2, 10) and np.array_equal(got.argmax(1), want.argmax(1)) and np.max(np.abs(got - want)) < 1


def _job(session, root, encrypt):
    images = cnn.mnist.sample()[0][:1] / 255.0 if session.index == 0 else None
    model = cnn.bundled() if session.index == 1 else None
    return jobs.infer_job(session, os.path.join(root, session.name), images=images, model=model, encrypt=encrypt)


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
    outcome = run(2, _job, str(active_keys), ("image", "model"), timeout=120)
    assert outcome[0][0] == "error" and outcome[0][1] == "DeviationError" and "party1" in outcome[0][2], outcome


def test_a_client_with_pixels_beyond_one_is_refused_naming_it(active_keys, monkeypatch):
    plan = importlib.import_module("shaper.ml.cnn.plan")
    real = plan.pack_images
    _skip_own_checks(monkeypatch)
    monkeypatch.setattr(jobs.P, "pack_images", lambda images: real(images) * 4096.0)
    outcome = run(2, _job, str(active_keys), ("image",), timeout=120)  # the model in the clear: only images encrypted
    assert outcome[1][0] == "error" and outcome[1][1] == "DeviationError" and "party0" in outcome[1][2], outcome


def test_a_party_whose_key_lost_its_mac_shares_is_refused_by_name(active_keys, tmp_path):
    import shutil

    from shaper.protocols.threshold_ckks.keystore import MACS_FILE

    root = tmp_path / "keys"
    shutil.copytree(active_keys, root)
    (root / "party1" / MACS_FILE).unlink()
    outcome = run(2, _job, str(root), ("image", "model"), timeout=120)
    assert all(o[0] == "error" for o in outcome), outcome
    assert any(o[1] == "ConfigError" and "security" in o[2] and "passive" in o[2] for o in outcome), outcome
