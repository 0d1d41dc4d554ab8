"""Encrypted MNIST inference, first under one single-key CKKS key, then with three parties that
hold the key jointly: a hospital (the client, with images), a lab (the model owner) and an
auditor (a key holder). The lab encrypts its model, the hospital its images and evaluates, and
all three decrypt the logits together -- to the hospital only.

Run: ``python examples/cnn_inference.py`` (about 20 s on 2 cores: 5 images, key generation
with the ``local`` method and the CNN's 23 rotation keys).
"""

from __future__ import annotations

import numpy as np

from shaper.jobs.cnn import infer_job
from shaper.jobs.fhe import engine_for
from shaper.ml import cnn
from shaper.net import launch
from shaper.protocols import threshold_ckks as tc

IMAGES = 5


def party(session) -> dict:
    params = cnn.cnn_parameters()
    keys = tc.keygen(engine_for(session), params, rotations=cnn.plan.rotation_steps(params), method="local",
                     budget=cnn.params.CNN_BUDGET)  # one job: the flood grows with the budget
    images, labels = cnn.mnist.sample()
    mine = {"hospital": {"images": images[:IMAGES] / 255.0, "labels": labels[:IMAGES]},
            "lab": {"model": cnn.bundled()}}.get(session.name, {})
    return infer_job(session, keys, **mine)  # the roles follow from who brings what


if __name__ == "__main__":
    model = cnn.bundled()
    images, labels = cnn.mnist.sample()
    x = images[:IMAGES] / 255.0

    single = cnn.single_key(model, x)  # image and model encrypted, one key, one process
    print(f"single key: predictions {single.predicted}, labels {labels[:IMAGES]}, same as plaintext: "
          f"{single.agree:.0%}, largest logit error {single.max_error:.1e}, "
          f"{single.seconds['evaluate'] / IMAGES * 1e3:.0f} ms per image")

    hospital, lab, auditor = launch(["hospital", "lab", "auditor"], party, timeout=None)
    assert "logits" not in lab and "logits" not in auditor  # decrypted for the hospital only
    same = np.array_equal(hospital["predicted"], model.predict(x))
    print(f"joint key: roles {hospital['role']} / {lab['role']} / {auditor['role']}; predictions "
          f"{hospital['predicted']}, accuracy {hospital['accuracy']:.0%}, same as plaintext: {same}")
