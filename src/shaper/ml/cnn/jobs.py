"""The n-party CNN inference job under a threshold CKKS key (``shaper cnn infer`` / ``demo``).

Every party runs :func:`infer_job` in its own session with its own key directory (from
``shaper fhe keygen --rotations cnn``). Exactly one party passes ``images`` (the *client*) and
exactly one passes ``model`` (the *model owner*; it may be the client). Then:

1. the parties agree on the setting (parameters and public key fingerprint, what is encrypted,
   who evaluates) and on the roles;
2. the model owner packs the model and encrypts each vector at the level the plan consumes it
   at (or, with the model in the clear, evaluates itself); the client encrypts its images (or,
   with the images in the clear, evaluates itself); both send their ciphertexts to the evaluator
   (by default the client when both are encrypted: the model is smaller than a batch of images);
3. the evaluator runs the plan on every image and sends the level-0 output ciphertexts to all;
4. all parties decrypt them jointly in one batch (one consent round, smudging sampled in the MPC)
   *to the client only*: every party consents only to a request whose recipient is the client.

Security model (semi-honest, n-out-of-n threshold key; docs/cnn.md): the evaluator and every
key holder see only ciphertexts under the joint key, the number of images and the timing; the
client learns the logits of its images (the 64 copies of them in the output slots, plus smudged
CKKS noise) and nothing else of the model; the model owner learns nothing of the images. What is
in the clear is the choice of the parties: an image in the clear is seen by the evaluator (the
client itself), a model in the clear by its owner only (who then evaluates).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ...crypto import ckks
from ...errors import ConfigError
from ...protocols import threshold_ckks as tc
from . import plan as P
from .inference import check_encrypt, confusion, encode_model, encrypt_images, encrypt_model, evaluate

Progress = Callable[[dict], None]


class _Phases:
    """Wall time and bytes this party sent, per phase."""

    def __init__(self, session: Any, progress: Progress | None) -> None:
        self.session, self.progress, self.rows = session, progress, []

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.progress is not None:
            self.progress({"phase": name, "status": "start"})
        t, b = time.perf_counter(), self.session.stats.bytes_sent
        yield
        row = {"name": name, "seconds": time.perf_counter() - t, "bytes_sent": self.session.stats.bytes_sent - b}
        self.rows.append(row)
        if self.progress is not None:
            self.progress({"phase": name, "status": "done", "seconds": row["seconds"], "bytes": row["bytes_sent"]})


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
              smudge_bits: int = tc.SMUDGE_BITS, progress: Progress | None = None) -> dict:
    """One party's part of the encrypted inference (see the module docstring). Returns the phases
    (seconds, bytes sent) and, at the client, the logits, predictions and (with ``labels``) the
    accuracy and confusion matrix."""
    if not isinstance(keys, tc.JointKeys):
        keys = tc.JointKeys.load(keys)
    if keys.share.parties != session.n or keys.share.index != session.index:
        raise ConfigError(f"the key directory holds party {keys.share.index}'s share of a {keys.share.parties}-party "
                          f"key; this is party {session.index} of {session.n}")
    encrypt = check_encrypt(encrypt)
    trace = check_keys(keys)
    params = keys.params
    phase = _Phases(session, progress)
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

    with phase("agree on the setting"):
        hello = {"images": 0 if images is None else int(len(images)), "model": model is not None,
                 "encrypt": list(encrypt), "evaluator": evaluator, "key": _key_fingerprint(keys)}
        session.broadcast(hello, "cnn-hello")
        hellos = {session.name: hello, **session.gather("cnn-hello")}
    names = list(session.parties)

    def index_of(name: str) -> int:
        if name not in names:
            raise ConfigError(f"no party is called {name!r}; the parties are {', '.join(names)}")
        return names.index(name)

    for name, h in hellos.items():
        for k in ("encrypt", "evaluator", "key"):
            if h.get(k) != hello[k]:
                raise ConfigError(f"party {name!r} runs with {k} = {h.get(k)!r}, we with {hello[k]!r}")
    clients = [n for n in names if hellos[n]["images"]]
    owners = [n for n in names if hellos[n]["model"]]
    if len(clients) != 1 or len(owners) != 1:
        raise ConfigError(f"exactly one party must bring images and one the model; images: {clients or 'none'}, "
                          f"model: {owners or 'none'}")
    client, owner = index_of(clients[0]), index_of(owners[0])
    count = hellos[clients[0]]["images"]
    if "image" not in encrypt:
        ev_index = client
    elif "model" not in encrypt:
        ev_index = owner
    else:
        ev_index = client if evaluator is None else index_of(evaluator)
    if evaluator is not None and index_of(evaluator) != ev_index:
        raise ConfigError(f"with the {'image' if ev_index == client else 'model'} in the clear, its owner "
                          f"{names[ev_index]!r} must evaluate, not {evaluator!r}")
    me = session.index

    weights: dict[str, Any] | None = None
    inputs: Any = None
    with phase("encrypt model" if "model" in encrypt else "encode model"):
        if me == owner:
            if "model" in encrypt:
                weights = encrypt_model(keys.public, model, params, trace)
                if owner != ev_index:
                    _send_all(session, ev_index, (weights[n] for n in P.WEIGHT_NAMES), "cnn-model")
            else:
                weights = encode_model(model, params, trace)
        if me == ev_index and weights is None:
            weights = dict(zip(P.WEIGHT_NAMES, _recv_all(session, owner, len(P.WEIGHT_NAMES), params, "cnn-model")))
    with phase("encrypt images" if "image" in encrypt else "pack images"):
        if me == client:
            if "image" in encrypt:
                inputs = encrypt_images(keys.public, images, params, progress=progress)
                if client != ev_index:
                    _send_all(session, ev_index, inputs, "cnn-images")
            else:
                inputs = P.pack_images(images)
        if me == ev_index and inputs is None:
            inputs = _recv_all(session, client, count, params, "cnn-images")
    with phase("evaluate"):
        if me == ev_index:
            outputs = evaluate(keys.evaluator(), inputs, weights, trace=trace, progress=progress)
            for peer in range(session.n):
                if peer != me:
                    _send_all(session, peer, outputs, "cnn-logits")
        else:
            outputs = _recv_all(session, ev_index, count, params, "cnn-logits")
    with phase("joint decryption"):
        slots = tc.decrypt_many(tc.engine_for(session), keys.share, outputs, to=client, smudge_bits=smudge_bits,
                                approve=lambda request: request["to"] == client)
    report: dict[str, Any] = {
        "party": session.name, "parties": session.n, "role": _role(me, client, owner, ev_index),
        "client": names[client], "model_owner": names[owner], "evaluator": names[ev_index],
        "encrypt": list(encrypt), "images": count, "phases": phase.rows, "cost": trace.cost(),
        "bytes_sent": session.stats.bytes_sent, "output_bytes": len(ckks.to_bytes(outputs[0])),
        "precision_bits": tc.decryption_precision(params, outputs[0].scale, smudge_bits)}
    if slots is not None:
        logits = P.logits(slots)
        report["logits"] = logits
        report["predicted"] = np.argmax(logits, axis=1)
        if labels is not None:
            report["labels"] = labels
            report["accuracy"] = float(np.mean(report["predicted"] == labels))
            report["confusion"] = confusion(labels, report["predicted"])
    return report


def _role(me: int, client: int, owner: int, ev: int) -> str:
    roles = [r for r, i in (("client", client), ("model owner", owner), ("evaluator", ev)) if i == me]
    return " + ".join(roles) or "key holder"


def demo_job(session: Any, count: int, method: str, encrypt: tuple[str, ...], progress: bool) -> dict:
    """``shaper cnn demo`` in one party: joint key generation with the plan's rotation keys, then
    :func:`infer_job` with party 0 as the client (the first ``count`` bundled MNIST test images)
    and the last party as the model owner (the bundled trained model)."""
    from .mnist import sample
    from .model import bundled

    def show(event: dict) -> None:
        if not progress or session.index != 0:
            return
        if event.get("status") == "done":
            print(f"  {event['phase']:<28s} {event['seconds']:8.2f} s {event['bytes'] / 1e6:9.1f} MB sent by "
                  f"{session.name}", flush=True)
        elif "done" in event and (event["done"] == event["total"] or event["done"] % 10 == 0):
            print(f"    {event['phase']}: {event['done']}/{event['total']}", flush=True)

    params = tc.cnn_parameters()
    steps = P.trace(params).rotation_steps
    engine = tc.engine_for(session)
    t = time.perf_counter()
    keys = tc.keygen(engine, params, rotations=steps, method=method,
                     progress=lambda e: show({**e, "phase": "key generation: " + e["phase"]}))
    keygen = {"seconds": time.perf_counter() - t, "phases": [p.__dict__ for p in keys.phases], "sizes": keys.sizes(),
              "method": method, "rotation_keys": len(keys.galois)}
    images = labels = model = None
    if session.index == 0:
        raw, labels = sample()
        images = raw[:count] / 255.0
        labels = labels[:count]
    if session.index == session.n - 1:
        model = bundled()
    report = infer_job(session, keys, images=images, labels=labels, model=model, encrypt=encrypt, progress=show)
    report["keygen"] = keygen
    if session.index == 0:
        report["images_used"] = images
    return report


__all__ = ["check_keys", "demo_job", "infer_job"]
