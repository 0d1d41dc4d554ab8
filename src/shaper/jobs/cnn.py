"""The jobs of ``shaper cnn``: the n-party inference under a threshold CKKS key (``infer``,
``demo``), its report, and training the model (``train``).

Every party runs :func:`infer_job` in its own session with its own key directory (from
``shaper fhe keygen --rotations cnn``). Exactly one party passes ``images`` (the *client*) and
exactly one passes ``model`` (the *model owner*; it may be the client). Then:

1. the parties agree on the setting (parameters and public key fingerprint, what is encrypted)
   and on the roles; the model owner announces its model's digest and the bound of its weights
   (a power of two);
2. the weights (model encrypted) and the images (images encrypted) are encrypted *jointly*
   (:func:`~shaper.protocols.threshold_ckks.encrypt_jointly`): their owner brings the values,
   the ciphertexts' randomness is chosen by no party, and every party holds every ciphertext.
   A part in the clear goes to every party;
3. *every* party evaluates the plan itself (:func:`~shaper.protocols.threshold_ckks.evaluate`):
   the outputs are byte-identical, and each party records them with their worst-case error
   bound (the plan run on bounds);
4. all parties decrypt the outputs jointly in one batch *to the client only*: with
   ``output="logits"`` each flooding its share by that bound; with ``output="label"`` the plan's
   output is folded to period 16 and only each image's argmax is computed inside the MPC and
   opened (:func:`~shaper.protocols.threshold_ckks.decrypt_argmax`), within the key's budget.

Security model (docs/cnn.md, docs/threshold-ckks.md). Under a passive key the MPC and joint
steps are followed, everything else may be chosen by a deviating party; the logits' flood is
sized by the model owner's declared bound. Under a key made on the active engine (the job then
runs on that engine) any n - 1 parties may deviate arbitrarily: every opening is MAC-checked
and every input a range-checked one, each party records the outputs' bound *derived* from its
own ledger's enforced input bounds (nothing declared), and since that worst case leaves the
logits no precision the output is the label (logits refused with the figures). No party can get a ciphertext
decrypted that is not the plan's output on jointly encrypted inputs. The client learns the
logits of its images plus the flood (logits), or only their argmax (label: at most log2 10
bits per image), and nothing else of the model but the bound of its weights; the model owner
and every other party learn nothing of the images. A part in the clear is seen by every party.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..crypto import ckks
from ..errors import ConfigError
from ..ml.cnn import mnist
from ..ml.cnn import plan as P
from ..ml.cnn.inference import (
    check_encrypt,
    cnn_circuit,
    confusion,
    declared_output_bound,
    encode_model_packed,
    model_bound,
)
from ..ml.cnn.model import bundled, train
from ..ml.cnn.params import CNN_BUDGET, cnn_parameters
from ..net.phases import Phases, Progress
from ..protocols import threshold_ckks as tc
from .fhe import engine_for, key_security, local_key_dirs
from .report import Report

__all__ = ["OUTPUTS", "check_keys", "check_output", "demo_job", "demo_local", "derived_logit_error", "image_packing",
           "infer_job", "infer_local", "infer_report", "train_job"]


def _rows(phases: Phases) -> list[dict]:
    """The phases as the reports show them: name, seconds, bytes this party sent."""
    return [{"name": p.name, "seconds": p.seconds, "bytes_sent": p.bytes_sent} for p in phases.done]


def _key_fingerprint(keys: tc.PublicKeys) -> str:
    return hashlib.sha256(keys.params.fingerprint + ckks.to_bytes(keys.public)).hexdigest()


def check_keys(keys: tc.PublicKeys) -> P.Trace:
    """The plan's trace under the keys' parameters, after checking that every rotation key the plan
    uses is there (ConfigError naming the missing steps otherwise)."""
    trace = P.trace(keys.params)
    have = set(keys.galois)
    missing = [s for s in trace.rotation_steps if ckks.galois_element(keys.params, s) not in have]
    if missing:
        raise ConfigError(f"the key has no rotation keys for steps {', '.join(map(str, missing))} that the CNN uses; "
                          "generate the key with 'shaper fhe keygen --rotations cnn'")
    if keys.relin is None:
        raise ConfigError("the key has no relinearisation key")
    return trace


def _send_all(session: Any, peer: int, cts: Iterable[ckks.Ciphertext], tag: str) -> None:
    for ct in cts:
        session.send(peer, ckks.to_bytes(ct), tag)


def _recv_all(session: Any, peer: int, count: int, params: ckks.Parameters, tag: str) -> list[ckks.Ciphertext]:
    return [ckks.from_bytes(session.recv_bytes(peer, tag), params) for _ in range(count)]


def infer_job(session: Any, keys: tc.JointKeys | str | os.PathLike, *, images: Any = None, labels: Any = None,
              model: Any = None, encrypt: Iterable[str] = ("image", "model"), evaluator: str | None = None,
              policy: tc.FloodPolicy = tc.FloodPolicy(), progress: Progress | None = None,
              output: str | None = None) -> dict:
    """One party's part of the encrypted inference (see the module docstring). ``output``:
    "logits" (flooded, decrypted to the client) or "label" (only the argmax, computed inside the
    MPC, reaches the client); default "label" on a key made on the active engine, "logits"
    otherwise. Returns the phases (seconds, bytes sent) and, at the client, the predictions,
    the logits (``output="logits"``) and (with ``labels``) the accuracy and confusion matrix."""
    if evaluator is not None:
        raise ConfigError("every party evaluates the CNN itself (it decrypts only what it computed), so there is "
                          "no --evaluator to choose")
    if not isinstance(keys, tc.JointKeys):
        keys = tc.JointKeys.load(keys)
    if keys.share.parties != session.n or keys.share.index != session.index:
        raise ConfigError(f"the key directory holds party {keys.share.index}'s share of a {keys.share.parties}-party "
                          f"key; this is party {session.index} of {session.n}")
    checked = key_security(keys) == "active"
    output = check_output(output, checked)
    encrypt = check_encrypt(encrypt)
    trace = check_keys(keys)
    params = keys.params
    phases = Phases(session, progress)
    if images is not None:
        images = np.asarray(images, dtype=np.float64)
        images = images[None] if images.ndim == 2 else images
        P.pack_images(images)  # validates every image's shape and range before anyone waits on us
        if len(images) == 0:
            raise ConfigError("the client brings no images")
        if labels is not None:
            labels = np.asarray(labels)
            if labels.shape != (len(images),) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
                raise ConfigError(f"labels must be {len(images)} digits 0..9, got shape {labels.shape}")

    with phases.phase("agree on the setting"):
        hello = {"images": 0 if images is None else int(len(images)), "model": model is not None,
                 "encrypt": list(encrypt), "key": _key_fingerprint(keys), "output": output,
                 "model_digest": None if model is None else _model_digest(model),
                 "bound": None if model is None else model_bound(model),
                 "declared": None if model is None or checked else
                 declared_output_bound(model, params, session.n, keys.ledger.key_method, encrypt)}
        session.broadcast(hello, "cnn-hello")
        hellos = {session.name: hello, **session.gather("cnn-hello")}
    names = list(session.parties)
    for name, h in hellos.items():
        for k in ("encrypt", "key", "output"):
            if h.get(k) != hello[k]:
                raise ConfigError(f"party {name!r} runs with {k} = {h.get(k)!r}, we with {hello[k]!r}")
    clients = [n for n in names if hellos[n]["images"]]
    owners = [n for n in names if hellos[n]["model"]]
    if len(clients) != 1 or len(owners) != 1:
        raise ConfigError(f"exactly one party must bring images and one the model; images: {clients or 'none'}, "
                          f"model: {owners or 'none'}")
    client, owner = names.index(clients[0]), names.index(owners[0])
    count = hellos[clients[0]]["images"]
    digest, bound = hellos[owners[0]]["model_digest"], float(hellos[owners[0]]["bound"])
    # a key made on the active engine derives the outputs' bound from what its range checks enforced;
    # only a passive key takes the model owner's declaration (docs/cnn.md, "Bounds")
    declared = None if checked else _declared(hellos[owners[0]]["declared"], names[owner])
    if checked and output == "logits":
        _refuse_active_logits(keys, encrypt, bound)
    me = session.index
    engine = engine_for(session, key_security(keys))  # a key made on the active engine runs on it

    cts: list[ckks.Ciphertext] = []
    plain_weights = plain_images = None
    images_digest = ""
    with phases.phase("encrypt model" if "model" in encrypt else "share the model"):
        if "model" in encrypt:  # one joint encryption per (level, scale) the plan consumes weights at
            packed = P.pack_model(model) if me == owner else None
            by_spec: dict[tuple[int, float], list[str]] = {}
            for name in P.WEIGHT_NAMES:
                by_spec.setdefault(trace.specs[name], []).append(name)
            weights: dict[str, ckks.Ciphertext] = {}
            for (level, scale), group in by_spec.items():
                values = np.stack([packed[n] for n in group]) if packed is not None else None
                for n, ct in zip(group, tc.encrypt_jointly(engine, keys, values, owner=owner, value_bound=bound,
                                                          level=level, scale=scale, tag=f"cnn weights {level}"),
                                 strict=True):
                    weights[n] = ct
            cts += [weights[n] for n in P.WEIGHT_NAMES]
        else:  # every party evaluates, so a model in the clear goes to every party
            packed = _share_arrays(session, owner, P.pack_model(model) if me == owner else None, "cnn-model")
            if _model_digest_packed(packed) != digest:
                raise ConfigError(f"the model party {names[owner]!r} sent is not the one it announced")
            _check_clear(packed, bound, f"the weights party {names[owner]!r} sent")
            plain_weights = encode_model_packed(packed, params, trace)
    with phases.phase("encrypt images" if "image" in encrypt else "share the images"):
        if "image" in encrypt:
            level, scale = trace.specs["image"]
            if checked:  # the 784 pixels are what is range-checked (8 bits each), the layout a public map of them
                mine = images.reshape(len(images), -1) if me == client else None
                cts += tc.encrypt_jointly(engine, keys, mine, owner=client, value_bound=1.0, level=level, scale=scale,
                                          tag="cnn images", packing=image_packing())
            else:
                cts += tc.encrypt_jointly(engine, keys, P.pack_images(images) if me == client else None,
                                          owner=client, value_bound=1.0, level=level, scale=scale, tag="cnn images")
        else:
            plain_images = _share_arrays(session, client, {"images": P.pack_images(images)} if me == client else None,
                                         "cnn-images")["images"]
            _check_clear({"images": plain_images}, 1.0, f"the images party {names[client]!r} sent", low=0.0)
            images_digest = hashlib.sha256(np.ascontiguousarray(plain_images).tobytes()).hexdigest()
    with phases.phase("evaluate"):
        circuit = cnn_circuit(params, encrypt=encrypt, model_digest=digest, bound=bound, declared=declared,
                              weights=plain_weights, images=plain_images, images_digest=images_digest,
                              fold=output == "label")
        outputs = tc.evaluate(keys, circuit, cts) if cts else None
        if outputs is None:
            raise ConfigError("nothing is encrypted")
    ours = [tc.ciphertext_digest(ct) for ct in outputs]

    def approve(request: dict) -> bool:  # our own outputs, to the client only
        return request["to"] == client and request["digests"] == ours

    report: dict[str, Any] = {}
    predicted = slots = None
    with phases.phase("joint decryption" if output == "logits" else "joint decryption to labels"):
        if output == "label":
            plan = tc.argmax_plan(params, min(ct.scale for ct in outputs), P.CLASSES, P.LABEL_PERIOD)
            predicted = tc.decrypt_argmax(engine, keys, outputs, classes=P.CLASSES, period=P.LABEL_PERIOD,
                                          to=client, approve=approve)
            report["resolution"] = plan.resolution
        else:
            flood = tc.plan_flood(keys, outputs, policy)
            slots = tc.decrypt_many(engine, keys, outputs, to=client, policy=policy, approve=approve)
            report.update(precision_bits=flood.precision_bits, sigma=flood.sigma, error_bound=flood.error_bound)
    report.update({
        "party": session.name, "parties": session.n, "role": _role(me, client, owner),
        "client": names[client], "model_owner": names[owner], "evaluator": "every party", "output": output,
        "security": "active" if checked else "passive",
        "encrypt": list(encrypt), "images": count, "phases": _rows(phases), "cost": trace.cost(),
        "bytes_sent": session.stats.bytes_sent, "output_bytes": len(ckks.to_bytes(outputs[0])),
        "output_scale": outputs[0].scale, "budget": keys.ledger.budget, "budget_left": keys.ledger.remaining})
    if output == "label" and predicted is not None:
        report["predicted"] = np.asarray(predicted)
        if labels is not None:
            report["labels"] = labels
            report["accuracy"] = float(np.mean(report["predicted"] == labels))
            report["confusion"] = confusion(labels, report["predicted"])
    if slots is not None:
        logits = P.logits(slots)
        report["logits"] = logits
        report["predicted"] = np.argmax(logits, axis=1)
        if labels is not None:
            report["labels"] = labels
            report["accuracy"] = float(np.mean(report["predicted"] == labels))
            report["confusion"] = confusion(labels, report["predicted"])
    return report


def image_packing() -> tc.Packing:
    """The plan's image layout as a packing of a joint input (:class:`~shaper.protocols.
    threshold_ckks.Packing`): pixel p of the flattened 28 x 28 image into the slots the plan
    writes it to, as multiples of 1/255 (MNIST's own 8-bit values; other pixels in [0, 1] are
    rounded to them). On a key made on the active engine the client's 784 pixels per image are
    then the range-checked inputs, instead of 16,384 coefficients of 54 bits."""
    return tc.Packing("cnn image", P.IMAGE_PIXELS, P.IMAGE_SLOTS, 28 * 28, 1 / 255)


#: what ``shaper cnn infer`` gives the client
OUTPUTS = ("logits", "label")


def check_output(output: str | None, checked: bool) -> str:
    """The output of an inference: ``output`` validated, or the default for the key (label on a
    key made on the active engine, logits otherwise)."""
    if output is None:
        return "label" if checked else "logits"
    if output not in OUTPUTS:
        raise ConfigError(f"the output is one of {', '.join(OUTPUTS)}, got {output!r}")
    return output


def derived_logit_error(keys: Any, encrypt: Iterable[str], bound: float, *, enforced: bool = True) -> Any:
    """The logits' worst-case bound derived, nothing declared, for a key's parties: the plan on
    the bounds the joint inputs' range checks enforce (``enforced``: every coefficient within
    its range, so every slot within W times the value bound) or on the declared values slot by
    slot (the pixels in [0, 1], every packed weight within ``bound``)."""
    from dataclasses import replace as with_

    from ..ml.cnn.inference import derived_output_bound
    from ..protocols.threshold_ckks.inputs import enforced_value_bound

    nm = tc.noise_model(keys)
    trace = P.trace(keys.params)

    def given(name: str, value: float) -> Any:
        level, scale = trace.specs[name]
        fresh = nm.joint_input(level, scale, value)
        return with_(fresh, message=float(scale) * enforced_value_bound(keys, scale, value)) if enforced else fresh

    encrypt = check_encrypt(encrypt)
    weights = {n: given(n, bound) for n in P.WEIGHT_NAMES} if "model" in encrypt else None
    image = given("image", 1.0) if "image" in encrypt else 1.0
    return derived_output_bound(nm, encrypt, bound, weights, image)


def _refuse_active_logits(keys: Any, encrypt: tuple[str, ...], bound: float) -> None:
    """Logits on a key made on the active engine: their flood would be sized by the derived
    worst case, which leaves no precision; refused with the figures (docs/cnn.md, "Bounds")."""
    import math

    wide, slotwise = (derived_logit_error(keys, encrypt, bound, enforced=e) for e in (True, False))
    q0 = math.log2(keys.params.moduli[0])
    raise ConfigError(
        "logits under a key made on the active engine are flooded by their worst-case error derived from the "
        f"enforced bounds: 2^{math.log2(wide.error):.1f} (2^{math.log2(slotwise.error):.1f} even with every slot of "
        f"every input within its declared value; the logits' scale is 2^{math.log2(wide.scale):.0f}, q_0 "
        f"2^{q0:.0f}), so no precision would be left. Use --reveal label: the argmax is computed inside the MPC "
        "and only it reaches the client, with no flood")


def _declared(value: Any, owner: str) -> tuple[float, float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)):
        raise ConfigError(f"the model owner {owner!r} announced a malformed output bound {value!r}")
    return float(value[0]), float(value[1])


def _check_clear(arrays: dict[str, np.ndarray], bound: float, what: str, low: float | None = None) -> None:
    """A part in the clear checked at every party against the bound the outputs' bound assumes
    (finite, within +-bound, or [low, bound]): nothing another party sends is taken on its word."""
    for name, x in arrays.items():
        x = np.asarray(x, dtype=np.float64)
        lo = -bound if low is None else low
        if x.size and (not np.all(np.isfinite(x)) or x.min() < lo or x.max() > bound):
            raise ConfigError(f"{what} ({name}) holds values outside [{lo:g}, {bound:g}] or not finite")


def _model_digest(model: Any) -> str:
    return _model_digest_packed(P.pack_model(model))


def _model_digest_packed(packed: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in P.WEIGHT_NAMES:
        h.update(name.encode() + np.ascontiguousarray(packed[name], dtype="<f8").tobytes())
    return h.hexdigest()


def _share_arrays(session: Any, owner: int, arrays: dict[str, np.ndarray] | None, tag: str) -> dict[str, np.ndarray]:
    """``owner``'s float arrays at every party (a model or images in the clear, which every
    party needs to evaluate), by name, as the session's array frames (dtype checked)."""
    if session.index == owner:
        session.broadcast(list(arrays), tag + "-names")
        for k in arrays:
            session.broadcast(np.ascontiguousarray(arrays[k], dtype=np.float64), tag)
        return arrays
    names = session.recv_meta(owner, tag + "-names")
    if not (isinstance(names, list) and all(isinstance(k, str) for k in names)):
        raise ConfigError(f"party {session.parties[owner]!r} sent malformed array names")
    return {k: session.recv_array(owner, tag, dtype=np.float64) for k in names}


def cnn_budget(images: int) -> int:
    """The decryption budget of a key made for one CNN job: its images and the key check, at
    least :data:`CNN_BUDGET` (the flood grows with its square root)."""
    return max(CNN_BUDGET, int(images) + 2)


def _role(me: int, client: int, owner: int) -> str:
    roles = [r for r, i in (("client", client), ("model owner", owner)) if i == me]
    return " + ".join(roles + ["evaluator"])


def demo_job(session: Any, count: int, method: str, encrypt: tuple[str, ...], progress: bool) -> dict:
    """``shaper cnn demo`` in one party: joint key generation with the plan's rotation keys, then
    :func:`infer_job` with party 0 as the client (the first ``count`` bundled MNIST test images)
    and the last party as the model owner (the bundled trained model)."""
    def show(event: dict) -> None:
        if not progress or session.index != 0:
            return
        if event.get("status") == "done":
            print(f"  {event['phase']:<28s} {event['seconds']:8.2f} s {event['bytes'] / 1e6:9.1f} MB sent by "
                  f"{session.name}", flush=True)
        elif "done" in event and (event["done"] == event["total"] or event["done"] % 10 == 0):
            print(f"    {event['phase']}: {event['done']}/{event['total']}", flush=True)

    params = cnn_parameters()
    steps = P.trace(params).rotation_steps
    engine = engine_for(session)
    t = time.perf_counter()
    keys = tc.keygen(engine, params, rotations=steps, method=method, budget=cnn_budget(count),
                     progress=lambda e: show({**e, "phase": "key generation: " + e["phase"]}))
    keygen = {"seconds": time.perf_counter() - t, "sizes": keys.sizes(),
              "phases": [{"name": p.name, "seconds": p.seconds, "bytes_sent": p.bytes_sent, "items": p.items}
                         for p in keys.phases],
              "method": method, "rotation_keys": len(keys.galois)}
    images = labels = model = None
    if session.index == 0:
        raw, labels = mnist.sample()
        images = raw[:count] / 255.0
        labels = labels[:count]
    if session.index == session.n - 1:
        model = bundled()
    report = infer_job(session, keys, images=images, labels=labels, model=model, encrypt=encrypt, progress=show)
    report["keygen"] = keygen
    if session.index == 0:
        report["images_used"] = images
    return report



def demo_local(parties: int, count: int, method: str, encrypt: tuple[str, ...], progress: bool = True) -> list[dict]:
    """:func:`demo_job` at every party here, as processes over loopback TLS."""
    from ..net import launch

    return launch(parties, demo_job, count, method, encrypt, progress, timeout=None)


def infer_local(root: str | os.PathLike, images: Any, labels: Any, model: Any, encrypt: tuple[str, ...],
                evaluator: str | None = None, *, parties: int | None = None,
                progress: Progress | None = None, output: str | None = None) -> list[dict]:
    """:func:`infer_job` at every party here from the key directories ``root/party0 ..``: party 0
    the client (``images``, ``labels``), the last the model owner (``model``, default the bundled
    one); ``progress`` gets the client's events."""
    from ..net import launch

    dirs = local_key_dirs(root, parties)
    if images is None:
        raise ConfigError("with --local pass the client's --images or --mnist-sample")
    model = model if model is not None else bundled()
    return launch(len(dirs), _infer_party, str(root), images, labels, model, encrypt, evaluator, progress, output,
                  timeout=None)


def _infer_party(session: Any, root: str, images: Any, labels: Any, model: Any, encrypt: tuple, evaluator: Any,
                 progress: Progress | None, output: str | None = None) -> dict:
    return infer_job(session, str(Path(root) / session.name), images=images if session.index == 0 else None,
                     labels=labels if session.index == 0 else None,
                     model=model if session.index == session.n - 1 else None, encrypt=encrypt, evaluator=evaluator,
                     progress=progress if session.index == 0 else None, output=output)


def infer_report(path: str | os.PathLike, report: dict, images: Any) -> Path:
    """The client's HTML report of :func:`infer_job`: the images (misclassified ones first when
    the labels are known), the setting, the accuracy when the labels are known, the confusion
    matrix and the phases."""
    summary: dict[str, Any] = {"images": report["images"], "client": report["client"],
                               "model owner": report["model_owner"], "evaluator": report["evaluator"]}
    if "accuracy" in report:
        summary["accuracy (encrypted)"] = f"{report['accuracy']:.2%}"
    return html_report(path, title="shaper: encrypted MNIST CNN inference", images=images,
                       labels=report.get("labels"), predicted=report["predicted"], confusion=report.get("confusion"),
                       phases=report["phases"], summary=summary)


# -- training ---------------------------------------------------------------------------------------

def train_job(out: str | os.PathLike, *, mnist_dir: str | os.PathLike | None = None, epochs: int | None = None,
              seed: int = 0, learning_rate: float | None = None, shift: int | None = None, float64: bool = False,
              overwrite: bool = False, progress: Callable[[int, int, float, float], None] | None = None) -> dict:
    """Trains the CNN on the 5,000-image MNIST subset (``shaper cnn train``), evaluates it on the
    10,000-image test set and writes the weights file ``out`` (float32 unless ``float64``; the
    training settings, data hash and test accuracy in it). ``None`` options take
    :func:`shaper.ml.cnn.train`'s defaults. Returns the figures: seconds, images, accuracies,
    largest absolute value per layer on the test set, the file and its size."""
    target = Path(out)
    if target.exists() and not overwrite:
        raise ConfigError(f"{target} exists; pass --overwrite to replace it")
    directory = mnist.data_dir(mnist_dir)
    train_images, train_labels = mnist.load_train_subset(directory)
    test_images, test_labels = mnist.load_test(directory)
    options = {k: v for k, v in (("epochs", epochs), ("learning_rate", learning_rate), ("shift", shift))
               if v is not None}
    started = time.perf_counter()
    model = train(train_images / 255.0, train_labels, seed=seed, progress=progress, **options)
    seconds = time.perf_counter() - started
    dtype = np.float64 if float64 else np.float32
    model = model.rounded(dtype)
    test_x = test_images / 255.0
    accuracy = model.accuracy(test_x, test_labels)
    layers = model.layers(test_x)
    training = dict(model.training or {})
    training.update(data=mnist.TRAIN_SUBSET, data_sha256=mnist.sha256(directory / mnist.TRAIN_SUBSET),
                    seconds=round(seconds, 1), dtype=np.dtype(dtype).name)
    model = replace(model, training=training, test_accuracy=accuracy)
    model.save(target, overwrite=overwrite, dtype=dtype)
    sample_images, sample_labels = mnist.sample()
    return {"out": str(target), "bytes": target.stat().st_size, "dtype": np.dtype(dtype).name, "seconds": seconds,
            "images": len(train_images), "data": str(directory), "test_images": len(test_images),
            "test_accuracy": accuracy, "sample_accuracy": model.accuracy(sample_images / 255.0, sample_labels),
            "largest": {name: float(np.abs(layers[name]).max()) for name in ("conv", "act1", "fc1", "act2", "logits")}}


# -- the report ------------------------------------------------------------------------------------
def _correct(k: int, predicted: np.ndarray, labels: np.ndarray | None, plain_predicted: np.ndarray | None) -> bool:
    if labels is not None:
        return bool(predicted[k] == labels[k])
    return plain_predicted is None or bool(predicted[k] == plain_predicted[k])


def shown_order(predicted: Any, labels: Any = None, plain_predicted: Any = None, shown: int = 16) -> list[int]:
    """The indices of the images a report shows: every misclassified one (against the labels,
    or the plaintext model's predictions when there are no labels), however many, then the
    others in order up to ``shown`` in all."""
    predicted = np.asarray(predicted)
    ok = [_correct(k, predicted, labels, plain_predicted) for k in range(len(predicted))]
    wrong = [k for k, good in enumerate(ok) if not good]
    right = [k for k, good in enumerate(ok) if good]
    return wrong + right[:max(shown - len(wrong), 0)]


def html_report(path: str | Path, *, title: str, images: np.ndarray, labels: np.ndarray | None,
                predicted: np.ndarray, plain_predicted: np.ndarray | None = None, confusion: np.ndarray | None = None,
                phases: list[dict] | None = None, summary: dict[str, Any] | None = None, shown: int = 16) -> Path:
    """The HTML report of an encrypted CNN run (the one report writer, :mod:`shaper.jobs.report`):
    a summary, the images (every misclassified one first, then the others up to ``shown``;
    :func:`shown_order`) with the encrypted and plaintext predictions, the confusion matrix and
    the phases. Returns its path."""
    page = Report(title)
    if summary:
        page.heading("Summary").table([(k, v) for k, v in summary.items()], ("measure", "value"))
    order = shown_order(predicted, labels, plain_predicted, shown)
    cards = []
    for k in order:
        caption = [f"predicted {int(predicted[k])}"]
        if labels is not None:
            caption.append(f"label {int(labels[k])}")
        if plain_predicted is not None:
            caption.append(f"plaintext {int(plain_predicted[k])}")
        cards.append((images[k], caption, _correct(k, predicted, labels, plain_predicted)))
    wrong = sum(1 for _, _, ok in cards if not ok)
    page.heading(f"Images ({len(cards)} of {len(images)}" + (f", the {wrong} misclassified first)" if wrong else ")"))
    page.images(cards)
    if confusion is not None:
        page.heading("Confusion matrix (encrypted predictions)").confusion(confusion)
    if phases:
        page.heading("Phases").table([(p["name"], f"{p['seconds']:.2f}", f"{p['bytes_sent'] / 1e6:.1f}")
                                      for p in phases], ("phase", "seconds", "MB sent"))
    return page.write(path)


# -- the commands (cli/cnn.py resolves the options and calls these) ----------------------------------
def encrypt_option(text: str) -> tuple[str, ...]:
    from ..ml.cnn.inference import check_encrypt

    return check_encrypt(e.strip() for e in text.split(",") if e.strip())


def show(event: dict) -> None:
    if event.get("status") == "done":
        print(f"  {event['phase']:<28s} {event['seconds']:8.2f} s {event['bytes'] / 1e6:9.1f} MB sent", flush=True)
    elif "done" in event and (event["done"] == event["total"] or event["done"] % 10 == 0):
        print(f"    {event['phase']}: {event['done']}/{event['total']}", flush=True)


def _accuracy_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"  {name:<{width}s}  {value}")


def demo_command(args: Any, local: int | None) -> int:
    """``shaper cnn demo``: ``local`` parties here (``None``: this party of a parties file, or one key)."""
    from ..ml.cnn import bundled, mnist
    from ..ml.cnn.inference import confusion, predictions, single_key

    encrypt = encrypt_option(args.encrypt)
    count = args.mnist_sample
    if not 1 <= count <= mnist.SAMPLE_COUNT:
        flag = getattr(args, "sample_flag", "--mnist-sample")
        raise ConfigError(f"{flag} takes 1..{mnist.SAMPLE_COUNT} (the bundled sample), got {count}")
    raw, labels = mnist.sample()
    images, labels = raw[:count] / 255.0, labels[:count]
    model = bundled()
    plain = model.forward(images)
    start = time.perf_counter()
    if args.single_key:
        print(f"single-key CKKS (N = 2^14), {' and '.join(encrypt)} encrypted, {count} images", flush=True)
        result = single_key(model, images, encrypt=encrypt, progress=show)
        logits, phases = result.logits, [{"name": k, "seconds": v, "bytes_sent": 0} for k, v in result.seconds.items()]
        for p in phases:
            print(f"  {p['name']:<28s} {p['seconds']:8.2f} s")
        setting = "single key"
        extra: dict[str, Any] = {}
    else:
        if local is not None:
            print(f"{local} parties as local processes over TLS: joint CKKS key in MPC ({args.method} method), "
                  f"party0 = client ({count} images), party{local - 1} = model owner; "
                  f"{' and '.join(encrypt)} encrypted", flush=True)
            results = demo_local(local, count, args.method, encrypt)
            parties, busiest = local, max(x["bytes_sent"] for x in results)
            r = results[0]
        else:
            from ..net import Session

            with Session.from_config(args.parties, me=args.me, key=args.key) as session:
                parties = session.n
                print(f"{parties} parties: joint CKKS key in MPC ({args.method} method), {session.parties[0]} = "
                      f"client ({count} images), {session.parties[-1]} = model owner; "
                      f"{' and '.join(encrypt)} encrypted", flush=True)
                r = demo_job(session, count, args.method, encrypt, True)
                print(session.stats.table(f"traffic of {args.me}"))
            busiest = r["bytes_sent"]
            if "logits" not in r:
                print(f"the logits were decrypted jointly for the client {r['client']}; nothing learnt here")
                return 0
        logits, phases = r["logits"], [{"name": "key generation (" + r["keygen"]["method"] + ")",
                                        "seconds": r["keygen"]["seconds"],
                                        "bytes_sent": sum(p["bytes_sent"] for p in r["keygen"]["phases"])}] + r["phases"]
        setting = f"{parties}-party threshold key ({args.method} key generation)"
        extra = {"evaluator": r["evaluator"], "joint decryption to": r["client"],
                 ("busiest party sent (MB)" if local is not None else f"{args.me} sent (MB)"): f"{busiest / 1e6:.0f}",
                 "decryption precision (bits)": f"{r['precision_bits']:.1f}"}
    total = time.perf_counter() - start
    evaluate = next(p["seconds"] for p in phases if p["name"] == "evaluate")
    predicted, plain_predicted = predictions(logits), predictions(plain)
    acc, plain_acc = float(np.mean(predicted == labels)), float(np.mean(plain_predicted == labels))
    same = int(np.sum(predicted == plain_predicted))
    error = float(np.max(np.abs(logits - plain)))
    print(f"accuracy on {count} MNIST test images ({setting}):")
    _accuracy_table([("encrypted inference", f"{acc:.2%}"), ("plaintext model", f"{plain_acc:.2%}"),
                     ("same prediction as plaintext", f"{same}/{count}"),
                     ("largest logit error", f"{error:.2e}" + (
                         f" ({-np.log2(error):.1f} bits; the flood predicts {extra['decryption precision (bits)']})"
                         if "decryption precision (bits)" in extra else "")),
                     ("evaluation per image", f"{evaluate / count * 1e3:.0f} ms"),
                     ("total wall time", f"{total:.1f} s")])
    summary = {"setting": setting, "encrypted": " and ".join(encrypt), "images": count,
               "accuracy (encrypted)": f"{acc:.2%}", "accuracy (plaintext)": f"{plain_acc:.2%}",
               "same prediction as plaintext": f"{same}/{count}", "largest logit error": f"{error:.2e}",
               "evaluation per image (ms)": f"{evaluate / count * 1e3:.0f}", **extra}
    path = html_report(args.report, title="shaper: encrypted MNIST CNN inference", images=images, labels=labels,
                       predicted=predicted, plain_predicted=plain_predicted,
                       confusion=confusion(labels, predicted), phases=phases, summary=summary)
    print(f"report written to {path}")
    if same != count:
        raise ConfigError(f"{count - same} encrypted predictions differ from the plaintext model's")
    return 0


def _load_images(args: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
    if args.images and args.mnist_sample:
        raise ConfigError("pass --images or --mnist-sample, not both")
    if args.mnist_sample:
        if not 1 <= args.mnist_sample <= mnist.SAMPLE_COUNT:
            raise ConfigError(f"--mnist-sample takes 1..{mnist.SAMPLE_COUNT}, got {args.mnist_sample}")
        raw, labels = mnist.sample()
        return raw[:args.mnist_sample] / 255.0, labels[:args.mnist_sample]
    if not args.images:
        return None, None
    path = Path(args.images)
    if path.suffix != ".npy" or not path.is_file():
        raise ConfigError(f"--images {path}: expected an existing .npy file of shape (m, 28, 28)")
    x = np.load(path, allow_pickle=False)
    if x.dtype == np.uint8:
        x = x / 255.0
    labels = None
    if args.labels:
        labels = np.load(args.labels, allow_pickle=False)
    return np.asarray(x, dtype=np.float64), labels


def _load_model(args: Any) -> Any:
    from ..ml.cnn import CnnModel, bundled

    if args.model and args.bundled_model:
        raise ConfigError("pass --model or --bundled-model, not both")
    if args.model:
        return CnnModel.load(args.model)
    return bundled() if args.bundled_model else None


def infer_command(args: Any, local: int | None) -> int:
    """``shaper cnn infer``: ``local`` parties here from ``--keys``, or this party of a parties file."""
    encrypt = encrypt_option(args.encrypt)
    if not args.keys:
        raise ConfigError("pass --keys DIR (this party's key directory; with --local N the one holding party0 ..)")
    images, labels = _load_images(args)
    model = _load_model(args)
    if local is not None:
        if images is None:
            raise ConfigError("with --local pass the client's --images or --mnist-sample")
        results = infer_local(args.keys, images, labels, model, encrypt, args.evaluator, parties=local,
                              progress=show, output=getattr(args, "reveal", None))
        report = results[0]
    else:
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            report = infer_job(session, args.keys, images=images, labels=labels, model=model, encrypt=encrypt,
                               evaluator=args.evaluator, progress=show, output=getattr(args, "reveal", None))
            print(session.stats.table(f"traffic of {args.me}"))
    print(f"{report['images']} images, {' and '.join(report['encrypt'])} encrypted; client {report['client']}, "
          f"model owner {report['model_owner']}, evaluator {report['evaluator']}; this party: {report['role']}; "
          f"{report['security']} key")
    if report["output"] == "label":
        what = "labels"
        told = (f"only the argmax of each image's logits, computed inside the MPC, was opened to the client (no "
                f"flood; two logits within {report['resolution']:.1e} of each other may come out either way); "
                f"{report['budget_left']} of {report['budget']} decryptions left")
    else:
        what = "logits"
        told = (f"each party flooded its share with sigma 2^{np.log2(report['sigma']):.1f} (the outputs' error bound "
                f"2^{np.log2(report['error_bound']):.1f}): about {report['precision_bits']:.1f} bits of logit "
                f"precision; {report['budget_left']} of {report['budget']} decryptions left")
    if "predicted" not in report:
        print(f"the {what} were decrypted jointly for the client; nothing learnt here ({told})")
        return 0
    print(told)
    predicted = report["predicted"]
    shown = ", ".join(str(int(p)) for p in predicted[:20])
    print(f"predictions: {shown}{', ...' if len(predicted) > 20 else ''}")
    if "accuracy" in report:
        print(f"accuracy {report['accuracy']:.2%} on {report['images']} images")
    if args.out:
        values = report["logits"] if what == "logits" else np.asarray(report["predicted"], dtype=np.int64)
        if args.out.endswith(".npy"):
            np.save(args.out, values)
        else:
            np.savetxt(args.out, values, delimiter=",", fmt="%.18e" if what == "logits" else "%d")
        print(f"{what} written to {args.out}")
    if args.report:
        print(f"report written to {infer_report(args.report, report, images)}")
    return 0


def plan_command(args: Any) -> int:
    """``shaper cnn plan``: the plan's parameters, cost, rotation keys and input levels."""
    import json
    import math

    from ..ml.cnn import plan
    from ..ml.cnn.params import cnn_parameters

    params = cnn_parameters()
    t = plan.trace(params)
    if args.json:
        text = json.dumps({"params": repr(params), "cost": t.cost(), "rotation_steps": list(t.rotation_steps),
                           "weights": {k: {"level": v[0], "scale_bits": math.log2(v[1])} for k, v in t.specs.items()}},
                          indent=1)
        if args.json == "-":
            print(text)
            return 0
        Path(args.json).write_text(text + "\n")
    print(params)
    print("one image per ciphertext (8192 slots); cost of one image, image and model encrypted:")
    for k, v in t.cost().items():
        print(f"  {k.replace('_', ' '):<22s} {v}")
    print(f"rotation keys ({len(t.rotation_steps)}): {', '.join(map(str, t.rotation_steps))}")
    print("levels at which each input is encrypted (scale in bits):")
    for k, (level, scale) in t.specs.items():
        print(f"  {k:<10s} level {level}  2^{math.log2(scale):.4f}")
    if args.json:
        print(f"plan written to {args.json}")
    return 0


def train_command(args: Any) -> int:
    """``shaper cnn train``: train, report the accuracies, write the weights."""
    def progress(epoch: int, epochs: int, loss: float, accuracy: float) -> None:
        print(f"  epoch {epoch}/{epochs}: loss {loss:.4f}, training accuracy {accuracy:.2%}", flush=True)

    print("training on the MNIST 5,000-image subset", flush=True)
    r = train_job(args.out, mnist_dir=args.mnist_dir, epochs=args.epochs, seed=args.seed,
                  learning_rate=args.learning_rate, shift=args.shift, float64=args.float64, overwrite=args.overwrite,
                  progress=progress)
    print(f"trained in {r['seconds']:.1f} s on {r['images']} images ({r['data']})")
    print(f"accuracy on the {r['test_images']} MNIST test images: {r['test_accuracy']:.2%}")
    print(f"accuracy on the bundled {mnist.SAMPLE_COUNT}-image sample: {r['sample_accuracy']:.2%}")
    for name, value in r["largest"].items():
        print(f"  largest |{name}| on the test set: {value:.3f}")
    print(f"weights written to {r['out']} ({r['bytes']} bytes, {r['dtype']})")
    return 0
