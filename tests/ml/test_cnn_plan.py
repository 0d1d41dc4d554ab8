"""The CNN packing plan and encrypted inference (issue 19), against independent oracles:

* the packed plan evaluated in the clear equals a direct loop-based forward pass written here
  (not the model's own im2col code) to 1e-9, and the 64 copies of the logits agree;
* the plan's trace has the documented cost (24 products, 34 rotations, depth 5) and the
  rotation keys derived from it are exactly the rotations the evaluation performs;
* homomorphic predictions equal the plaintext model's on 100 bundled MNIST test images under a
  single-key CKKS key and under a 2-party threshold key with joint decryption to the client;
* misuse is refused with an error that names it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.errors import ConfigError, ScaleError
from shaper.jobs import cnn as cnn_jobs
from shaper.jobs.fhe import engine_for
from shaper.kernels.rns import native_selected
from shaper.ml import cnn
from shaper.ml.cnn import params as cnn_params
from shaper.ml.cnn import plan as P
from shaper.ml.cnn.inference import encode_model, encrypt_images, encrypt_model, evaluate
from shaper.protocols import threshold_ckks as tc

FULL = pytest.mark.skipif(not native_selected(), reason="N = 2^14 CKKS needs the native RNS kernels (extension absent "
                          "or SHAPER_NATIVE=off); the plan's plaintext tests run everywhere")
MPC = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None or not native_selected(),
                         reason="the MPC engine's OT extension and N = 2^14 CKKS run in the native extension only")


@pytest.fixture(scope="module")
def data():
    images, labels = cnn.mnist.sample()
    return images / 255.0, labels


@pytest.fixture(scope="module")
def model():
    return cnn.bundled()


def direct_forward(m, x):
    """The network straight from its definition: explicit windows, channel-fastest flatten."""
    conv = np.zeros((len(x), 5, 13, 13))
    for c in range(5):
        for i in range(13):
            for j in range(13):
                conv[:, c, i, j] = np.einsum("kuv,uv->k", x[:, 2 * i:2 * i + 4, 2 * j:2 * j + 4], m.conv[c])
    flat = np.zeros((len(x), 845))
    for c in range(5):
        for i in range(13):
            for j in range(13):
                flat[:, c + 5 * (13 * i + j)] = conv[:, c, i, j] ** 2
    h = flat @ m.fc1_w.T + m.fc1_b
    return (h ** 2) @ m.fc2_w.T + m.fc2_b


# -- the plan in the clear -------------------------------------------------------------------

def test_packed_plan_equals_the_direct_forward_pass(data, model):
    x = data[0][:40]
    want = direct_forward(model, x)
    slots = P.packed_forward(model, x)
    assert np.max(np.abs(P.logits(slots) - want)) <= 1e-9
    blocks = slots.reshape(len(x), 64, 128)
    assert np.max(np.abs(blocks[:, :, :10] - want[:, None, :])) <= 1e-9  # 64 equal copies of the logits
    assert np.max(np.abs(blocks[:, :, 10:])) == 0.0  # and nothing else of the model
    assert np.abs(want).max() > 1.0  # a real, non-degenerate model


def test_packed_plan_on_random_weights_and_images():
    rng = np.random.default_rng(5)
    m = cnn.CnnModel(conv=rng.normal(size=(5, 4, 4)), fc1_w=rng.normal(size=(64, 845)) * 0.05,
                     fc1_b=rng.normal(size=64), fc2_w=rng.normal(size=(10, 64)), fc2_b=rng.normal(size=10))
    x = rng.uniform(size=(6, 28, 28))
    assert np.max(np.abs(P.logits(P.packed_forward(m, x)) - direct_forward(m, x))) <= 1e-9


def test_image_layout_puts_every_pixel_where_the_docstring_says():
    img = np.arange(784, dtype=np.float64).reshape(28, 28) / 783
    packed = P.pack_images(img)[0]
    for (r, c) in [(0, 0), (0, 1), (1, 0), (27, 27), (13, 6)]:
        a, i, b, j = r % 2, r // 2, c % 2, c // 2
        for ch in range(5):
            for half in (0, 4096):
                assert packed[half + 1024 * (2 * a + b) + 196 * ch + 14 * i + j] == img[r, c]
    assert np.count_nonzero(packed) == 783 * 5 * 2  # every pixel 10 times (pixel (0, 0) is 0 here), nothing else
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        P.pack_images(np.full((28, 28), 255.0))
    with pytest.raises(ValueError, match="shape"):
        P.pack_images(np.zeros((28, 27)))


def test_trace_cost_levels_and_rotation_keys():
    params = cnn_params.cnn_parameters()
    t = P.trace(params)
    assert t.cost() == {"ct_ct_products": 24, "rotations": 34, "hoisted_rotations": 19, "rotation_keys": 28,
                        "relinearizations": 5, "rescales": 5, "depth": 5}
    assert set(t.rotation_steps) == set(cnn_params.CNN_ROTATIONS) and len(cnn_params.CNN_ROTATIONS) == 28
    assert t.output_level == 0
    levels = {name: level for name, (level, _) in t.specs.items()}
    assert levels["image"] == levels["conv0"] == 5 and levels["fc1_0"] == 3 and levels["fc1_bias"] == 2
    assert all(levels[f"fc2_{k}"] == 1 for k in range(10)) and levels["fc2_bias"] == 0
    # the plan's depth fits a shorter chain as well; one prime less does not
    assert P.trace(ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 5, 60, 53)).output_level == 0
    small = ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 4, 60, 53)
    with pytest.raises(ConfigError, match="depth 5"):
        P.trace(small)
    with pytest.raises(ConfigError, match="8192 slots"):
        P.trace(ckks.Parameters.from_literal(2 ** 13, [60] + [40] * 6, 60, 40, insecure=True))


# -- homomorphic evaluation ------------------------------------------------------------------

class RecordingEvaluator(ckks.Evaluator):
    """Records every rotation step the evaluation asks for."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.steps: list[int] = []

    def rotate(self, a, steps):
        self.steps.append(int(steps))
        return super().rotate(a, steps)

    def rotate_many(self, a, steps):
        steps = list(steps)
        self.steps.extend(int(s) for s in steps)
        return super().rotate_many(a, steps)


@pytest.fixture(scope="module")
def single():
    params = cnn_params.cnn_parameters()
    keys = ckks.KeySet(params, rotations=P.rotation_steps(params))
    return params, keys


@FULL
def test_single_key_predictions_equal_plaintext_on_100_images(single, data, model):
    params, keys = single
    images = data[0][:100]
    ev = RecordingEvaluator(params, keys.relin, keys.galois)
    cts = encrypt_images(keys.public, images, params)
    out = evaluate(ev, cts, encrypt_model(keys.public, model, params))
    logits = P.logits(np.stack([ev.encoder.decode(ckks.decrypt(keys.secret, c)) for c in out]))
    plain = model.forward(images)
    assert np.array_equal(np.argmax(logits, 1), np.argmax(plain, 1))
    assert np.max(np.abs(logits - plain)) < 1e-5
    # the keys derived from the plan are exactly the rotations performed (34 per image)
    assert len(ev.steps) == 34 * len(images)
    assert set(ev.steps) == set(P.rotation_steps(params))
    assert {ckks.galois_element(params, s) for s in ev.steps} == set(keys.galois)


@FULL
def test_image_or_model_in_the_clear(single, data, model):
    params, keys = single
    images = data[0][:3]
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    plain = model.forward(images)
    runs = {"model in the clear": evaluate(ev, encrypt_images(keys.public, images, params),
                                           encode_model(model, params)),
            "image in the clear": evaluate(ev, P.pack_images(images), encrypt_model(keys.public, model, params))}
    for what, out in runs.items():
        logits = P.logits(np.stack([ev.encoder.decode(ckks.decrypt(keys.secret, c)) for c in out]))
        assert np.max(np.abs(logits - plain)) < 1e-5, what
    with pytest.raises(ConfigError, match="both in the clear"):
        evaluate(ev, P.pack_images(images[:1]), encode_model(model, params))


@FULL
def test_a_missing_rotation_key_or_a_misplaced_weight_is_refused(single, data, model):
    params, keys = single
    weights = encrypt_model(keys.public, model, params)
    some = dict(keys.galois)
    some.pop(ckks.galois_element(params, 640))
    ev = ckks.Evaluator(params, keys.relin, some)
    ct = encrypt_images(keys.public, data[0][:1], params)
    with pytest.raises(ConfigError, match="no Galois key"):
        evaluate(ev, ct, weights)
    full = ckks.Evaluator(params, keys.relin, keys.galois)
    moved = dict(weights, fc2_3=ckks.encrypt(keys.public, ckks.Encoder(params).encode(np.ones(8), level=2)))
    with pytest.raises(ScaleError, match="'fc2_3' is at level 2"):
        evaluate(full, ct, moved)
    with pytest.raises(ConfigError, match="lacks packed weights fc2_bias"):
        evaluate(full, ct, {k: v for k, v in weights.items() if k != "fc2_bias"})
    low = ckks.Evaluator(params).drop_level(ct[0], 4)
    with pytest.raises(ConfigError, match="encrypt images at level 5"):
        evaluate(full, [low], weights)
    pk = tc.PublicKeys(params, keys.public, keys.relin, some)
    with pytest.raises(ConfigError, match="steps 640"):
        cnn_jobs.check_keys(pk)


# -- the n-party job under a threshold key -----------------------------------------------------

def _threshold_job(session, images, labels, model):
    from shaper.jobs.cnn import infer_job

    params = cnn_params.cnn_parameters()
    keys = tc.keygen(engine_for(session), params, rotations=P.rotation_steps(params), method="local", budget=128)
    first = infer_job(session, keys, images=images if session.index == 0 else None,
                      labels=labels if session.index == 0 else None,
                      model=model if session.index == 1 else None)
    # both in the clear is refused before anything is sent
    with pytest.raises(ConfigError, match="nothing would be private"):
        infer_job(session, keys, images=images, model=model, encrypt=())
    return first


@MPC
def test_threshold_predictions_equal_plaintext_on_100_images(data, model):
    from shaper.net import run_in_memory

    images, labels = data[0][:100], data[1][:100]
    results = run_in_memory(2, _threshold_job, images, labels, model, timeout=600)
    client, owner = results
    assert client["role"] == "client + evaluator" and owner["role"] == "model owner + evaluator"
    assert "logits" not in owner  # decrypted to the client only
    plain = model.forward(images)
    assert np.array_equal(client["predicted"], np.argmax(plain, 1))
    # the flood each party adds (sized by the model owner's declared bound) leaves about
    # precision_bits in the logits: the largest error stays within 4x its prediction
    error = float(np.max(np.abs(client["logits"] - plain)))
    assert error < 4 * 2.0 ** -client["precision_bits"], (error, client["precision_bits"])
    assert client["sigma"] == tc.flood_sigma(client["error_bound"], 128)  # the key's budget
    assert client["accuracy"] == pytest.approx(float(np.mean(np.argmax(plain, 1) == labels)))
    assert client["confusion"].sum() == 100
    assert client["cost"]["rotations"] == 34
