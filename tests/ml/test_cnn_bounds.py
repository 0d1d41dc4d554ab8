"""The CNN plan's worst-case output bound (plan.output_bound, plan.BoundBackend) against the
error measured on real encrypted inference at the CNN's parameters (N = 2^14, single-key keys,
the bundled model, two bundled MNIST images).

Soundness: every decrypted output slot (the logits and the 64 copies around them) differs from
the packed plan in the clear by at most the bound's error / scale, for the declared bounds the
report uses (one number for the model: max |packed weight|; pixels within 1) and for per-slot
declarations (|packed weights| slot by slot, the image layout's support), slot by slot, in the
three encryption modes, with public-key and joint inputs. The bound / measured factors are
printed (``pytest -s``): the one-number declaration is very loose (worst case over every model
with that largest weight, through two squares), the per-slot one much less so.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.ckks import bounds as B
from shaper.errors import ConfigError
from shaper.ml import cnn
from shaper.ml.cnn import plan as P
from shaper.ml.cnn.inference import (
    encode_model,
    encrypt_images,
    encrypt_model,
    evaluate,
)
from shaper.ml.cnn.params import cnn_parameters

from ..crypto.test_ckks_bounds import joint_encrypt
from shaper.kernels.rns import native_selected

FULL = pytest.mark.skipif(not native_selected(), reason="N = 2^14 CKKS needs the native RNS kernels (extension absent "
                          "or SHAPER_NATIVE=off); the plan on bounds runs everywhere")


@pytest.fixture(scope="module")
def setup():
    params = cnn_parameters()
    keys = ckks.KeySet(params, rotations=P.rotation_steps(params))
    model = cnn.bundled()
    images = cnn.mnist.sample()[0][:2] / 255.0
    return params, keys, model, images


def output_errors(keys, outputs, want):
    """|decrypted slot - packed plan in the clear| x scale, per image and slot."""
    enc = ckks.Encoder(keys.params)
    got = np.stack([enc.decode(ckks.decrypt(keys.secret, ct), complex=True) for ct in outputs])
    return np.abs(got - want) * outputs[0].scale


def report(what, bound, errs):
    b = bound.bound()
    worst = float(np.max(errs))
    print(f"  {what:<48s} bound 2^{math.log2(b.error):6.2f} (slot 2^{b.log2_slot_error:6.2f})  "
          f"measured 2^{math.log2(worst):6.2f} (slot 2^{math.log2(worst / b.scale):6.2f})  "
          f"factor 2^{math.log2(b.error / worst):5.2f}")
    assert worst <= b.error
    return b.error / worst


@pytest.mark.parametrize("encrypt", [("image", "model"), ("image",), ("model",)])
@FULL
def test_output_bound_covers_encrypted_inference(setup, encrypt):
    params, keys, model, images = setup
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    weights = encrypt_model(keys.public, model, params) if "model" in encrypt else encode_model(model, params)
    inputs = encrypt_images(keys.public, images, params) if "image" in encrypt else P.pack_images(images)
    outputs = evaluate(ev, inputs, weights)
    want = P.packed_forward(model, images)
    errs = output_errors(keys, outputs, want)
    nm = B.NoiseModel(params, 1, "local")  # the single-key KeySet's laws
    peak = max(float(np.max(np.abs(v))) for v in P.pack_model(model).values())
    scalar = P.output_bound(params, nm, peak, encrypt, encryption="public")
    assert (scalar.level, scalar.scale) == (0, P.trace(params).output_scale)
    tag = "+".join(encrypt)
    report(f"{tag}: model bound max|w| = {peak:.3f}", scalar, errs)
    report(f"{tag}: logits only", scalar, errs[:, :P.CLASSES])
    # per slot: the same evaluation on SlotBounds, every slot within its own bound
    be = P.BoundBackend(P.slot_bounds(model), nm, encrypt, P.IMAGE_SUPPORT, encryption="public")
    slots = P.forward(be, P.IMAGE_SUPPORT)
    assert isinstance(slots, B.SlotBound)
    assert np.all(errs <= slots.error[None, :])
    assert np.all(np.abs(want) * slots.scale <= slots.message[None, :] * (1 + 1e-9))  # the messages too
    factor = report(f"{tag}: per-slot model and image bounds", slots, errs)
    assert slots.bound().error < scalar.error
    assert factor < 2.0 ** 40


@pytest.mark.parametrize("encrypt", [("image", "model"), ("image",)])
@FULL
def test_tail_rules_and_declared_activations_cover_encrypted_inference(setup, encrypt):
    """The heuristic rounding rule ("tail") and activation bounds declared from other images of
    the owner's data (images 2..101, margin 4: the two evaluated images are not among them)
    still cover every measured output slot, alone and together, and each tightens the bound."""
    params, keys, model, images = setup
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    weights = encrypt_model(keys.public, model, params) if "model" in encrypt else encode_model(model, params)
    inputs = encrypt_images(keys.public, images, params) if "image" in encrypt else P.pack_images(images)
    want = P.packed_forward(model, images)
    errs = output_errors(keys, evaluate(ev, inputs, weights), want)
    acts = P.activation_bounds(model, cnn.mnist.sample()[0][2:102] / 255.0, 4.0)
    mine = P.activation_bounds(model, images, 1.0)  # what the evaluated images reach: within the declaration
    assert all(m <= a for m, a in zip(mine.values, acts.values, strict=True))
    tag = "+".join(encrypt)
    found = {}
    for rounding in ("worst", "tail"):
        nm = B.NoiseModel(params, 1, "local", rounding=rounding)
        for act in (None, acts):
            be = P.BoundBackend(P.slot_bounds(model), nm, encrypt, P.IMAGE_SUPPORT, encryption="public",
                                activations=act)
            out = P.forward(be, P.IMAGE_SUPPORT)
            assert np.all(errs <= out.error[None, :])
            assert np.all(np.abs(want) * out.scale <= out.message[None, :] * (1 + 1e-9))
            found[rounding, act is not None] = report(f"{tag}: {rounding}, per-slot w" + (", act x4" if act else ""),
                                                      out, errs)
    assert found["tail", False] < found["worst", False] and found["worst", True] < found["worst", False]
    assert found["tail", True] < min(found["tail", False], found["worst", True])


def test_activation_bounds():
    model = cnn.bundled()
    images = cnn.mnist.sample()[0] / 255.0
    acts = P.activation_bounds(model, images[:100], 4.0)
    assert len(acts) == len(acts.ops) == len(acts.values) and acts.images == 100 and not acts.per_slot
    assert acts.ops[-1] == "add_weight" and acts.ops.count("square") == 2
    once = P.activation_bounds(model, images[:100], 1.0)
    assert all(a == pytest.approx(4.0 * b) for a, b in zip(acts.values, once.values, strict=True))
    # 400 other bundled images stay within the margin (all 900 reach at most ~1.43x)
    rest = P.activation_bounds(model, images[100:500], 1.0)
    assert max(r / b for r, b in zip(rest.values, once.values, strict=True) if b > 0) < 2.0
    # per slot, the first 100 images do not predict the rest (slots zero on them are not zero
    # later): why the per-operation declaration is the one to use
    slots = P.activation_bounds(model, images[:100], 4.0, per_slot=True)
    slots_rest = P.activation_bounds(model, images[100:500], 1.0, per_slot=True)
    assert any(np.any(r > s) for r, s in zip(slots_rest.values, slots.values, strict=True))
    # the declarations tighten the output bound; the message of each op is at most the declaration
    params = cnn_parameters()
    nm = B.NoiseModel(params, 2)
    be = P.BoundBackend(P.slot_bounds(model), nm, activations=acts)
    out = P.forward(be, P.IMAGE_SUPPORT)
    assert np.max(out.message) / out.scale <= acts.values[-1] * (1 + 1e-12)
    plain = P.output_bound(params, nm, P.slot_bounds(model), image_bound=P.IMAGE_SUPPORT)
    assert out.bound().error < plain.error
    assert P.output_bound(params, nm, P.slot_bounds(model), image_bound=P.IMAGE_SUPPORT,
                          activations=acts).error == out.bound().error
    # declarations that do not follow the plan, bad margins
    short = P.Activations(acts.ops[:3], acts.values[:3], 4.0, 100, False)
    with pytest.raises(ConfigError, match="do not follow"):
        P.forward(P.BoundBackend(1.0, nm, activations=short), 1.0)
    with pytest.raises(ConfigError, match="margin"):
        P.activation_bounds(model, images[:2], 0.5)


@FULL
def test_output_bound_with_joint_inputs(setup):
    """Image and weights encrypted jointly (the design's symmetric joint encryption, 2 parties,
    simulated here) under the single-key evaluation keys."""
    params, keys, model, images = setup
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    trace = P.trace(params)
    packed = P.pack_model(model)
    weights = {name: joint_encrypt(params, keys.secret, v, *trace.specs[name], 2) for name, v in packed.items()}
    image = joint_encrypt(params, keys.secret, P.pack_images(images[:1])[0], *trace.specs["image"], 2)
    errs = output_errors(keys, evaluate(ev, [image], weights), P.packed_forward(model, images[:1]))
    nm = B.NoiseModel(params, 2, "local")  # covers single-key keys (one party's error <= two's)
    peak = max(float(np.max(np.abs(v))) for v in packed.values())
    report("joint inputs: model bound max|w|", P.output_bound(params, nm, peak), errs)
    report("joint inputs: per-slot bounds", P.output_bound(params, nm, P.slot_bounds(model),
                                                           image_bound=P.IMAGE_SUPPORT), errs)


def test_reported_bounds_at_the_default_parameters():
    """The bounds the flood of a 2-party CNN job is sized by (printed for the record)."""
    params = cnn_parameters()
    model = cnn.bundled()
    peak = max(float(np.max(np.abs(v))) for v in P.pack_model(model).values())
    for method in ("exact", "local"):
        b = P.output_bound(params, 2, peak, key_method=method)
        s = P.output_bound(params, 2, P.slot_bounds(model), key_method=method, image_bound=P.IMAGE_SUPPORT)
        print(f"  2 parties, {method} keys, joint inputs: max|w| = {peak:.4f}: error 2^{math.log2(b.error):.2f}, "
              f"slot 2^{b.log2_slot_error:.2f}, message/scale 2^{math.log2(b.message / b.scale):.2f}; per slot: "
              f"error 2^{math.log2(s.error):.2f}, slot 2^{s.log2_slot_error:.2f}, "
              f"message/scale 2^{math.log2(s.message / s.scale):.2f}")
        assert s.error < b.error and b.level == 0
    # the NoiseModel form (what an agreed evaluation passes) gives the same bound
    nm = B.NoiseModel(params, 2, "exact")
    assert P.output_bound(params, nm, peak) == P.output_bound(params, 2, peak)


def test_bound_backend_refuses_what_the_ckks_backend_refuses():
    params = cnn_parameters()
    nm = B.NoiseModel(params, 2)
    for encrypt in ((), ("weights",)):
        with pytest.raises(ConfigError, match="encrypt"):
            P.BoundBackend(1.0, nm, encrypt)
    with pytest.raises(ConfigError, match="lacks"):
        P.BoundBackend({"conv0": 1.0}, nm)
    with pytest.raises(ConfigError, match="joint"):
        P.BoundBackend(1.0, nm, encryption="none")
    other = ckks.Parameters.from_literal(2 ** 14, [60] + [50] * 6, 60, 50)
    with pytest.raises(ConfigError, match="other parameters"):
        P.output_bound(params, B.NoiseModel(other, 2), 1.0)
