"""``shaper cnn``: MNIST CNN inference under CKKS, single key or the joint key of ``shaper fhe``
(docs/cnn.md).

    shaper cnn demo                                  2 local parties: joint key, 20 images, report
    shaper cnn demo --single-key --images 100        one key, one process
    shaper cnn plan                                  the packing plan's cost and rotation keys
    shaper cnn train --out model.npz                 retrain the model (numpy, MNIST 5k subset)
    shaper fhe keygen --local 2 --rotations cnn --out keys/
    shaper cnn infer --local-keys keys/ --mnist-sample 50 --report cnn.html
    shaper cnn infer --parties p.toml --me bank --keys keys/bank --images x.npy     (the client)
    shaper cnn infer --parties p.toml --me lab --keys keys/lab --model model.npz    (the model owner)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .common import HelpFormatter, command


def add_parser(subparsers: Any) -> None:
    cnn = subparsers.add_parser("cnn", help="encrypted MNIST CNN inference (single key or the joint key of 'fhe')",
                                formatter_class=HelpFormatter,
                                description="A 5-layer CNN evaluated on CKKS ciphertexts, one image per ciphertext; "
                                            "under a threshold key the logits are decrypted jointly, to the client "
                                            "only (docs/cnn.md).")
    cnn.set_defaults(prog=cnn.prog)
    sub = cnn.add_subparsers(dest="cnn_command", required=True, metavar="COMMAND")

    demo = command(sub, "demo", run_demo, "n local parties: joint key, encrypted images and model, joint decryption",
                   "Runs every party here as a process over loopback TLS: joint key generation with the "
                   "plan's 28 rotation keys, party0 (the client) encrypts MNIST test images, the last party "
                   "(the model owner) encrypts the bundled model, party0 evaluates, all decrypt the logits "
                   "jointly to party0. Prints accuracy, per-phase times and bytes; writes an HTML report.")
    demo.add_argument("--parties", type=int, default=2, metavar="N", help="parties, as local processes (2..16)")
    demo.add_argument("--images", type=int, default=20, metavar="K",
                      help="how many of the bundled MNIST test images to classify (1..1000)")
    demo.add_argument("--method", choices=("exact", "local"), default="exact",
                      help="key generation: exact (every error sampled in MPC, GMPFHE) or local (each party adds "
                           "its own error; faster)")
    _encrypt_option(demo)
    demo.add_argument("--single-key", action="store_true",
                      help="one process under an ordinary single-key CKKS key instead of n parties")
    demo.add_argument("--report", default="cnn-report.html", metavar="FILE", help="HTML report to write")

    infer = command(sub, "infer", run_infer, "one party of an encrypted inference under a joint key",
                    "Every party runs this with its key directory from 'shaper fhe keygen --rotations cnn'. "
                    "The party with --images (or --mnist-sample) is the client and alone learns the "
                    "predictions; the party with --model is the model owner; the others hold key shares.")
    infer.add_argument("--parties", metavar="FILE", help="parties file (TOML), see docs/net.md")
    infer.add_argument("--me", metavar="NAME", help="this party's name in the parties file")
    infer.add_argument("--key", metavar="FILE", help="TLS private key (overrides the parties file)")
    infer.add_argument("--keys", metavar="DIR", help="this party's key directory")
    infer.add_argument("--local-keys", metavar="DIR",
                       help="run every party here from DIR/party0 ..: party0 the client, the last the model owner")
    infer.add_argument("--images", metavar="FILE", help="the client's images: .npy, (m, 28, 28), uint8 or [0, 1]")
    infer.add_argument("--labels", metavar="FILE", help="the client's labels (.npy) for an accuracy figure")
    infer.add_argument("--mnist-sample", type=int, metavar="K",
                       help="the client uses the first K bundled MNIST test images and their labels")
    infer.add_argument("--model", metavar="FILE", help="the model owner's weights (.npz from 'shaper cnn train')")
    infer.add_argument("--bundled-model", action="store_true", help="the model owner uses the bundled trained model")
    _encrypt_option(infer)
    infer.add_argument("--evaluator", metavar="NAME",
                       help="who evaluates when image and model are both encrypted (default: the client)")
    infer.add_argument("--out", metavar="FILE", help="client: write the logits (.npy or .csv)")
    infer.add_argument("--report", metavar="FILE", help="client: write an HTML report")

    plan = command(sub, "plan", run_plan, "print the packing plan: cost, levels, rotation keys")
    plan.add_argument("--json", action="store_true", help="print the trace as JSON")

    train = command(sub, "train", run_train, "train the CNN in plaintext on the MNIST 5,000-image subset",
                    "numpy, mini-batch Adam with random pixel shifts; deterministic for a seed. Needs the MNIST "
                    "files (--data, SHAPER_MNIST_DIR, or ../shared/data/mnist).")
    train.add_argument("--out", required=True, metavar="FILE", help="weights file to write (.npz)")
    train.add_argument("--data", metavar="DIR", help="directory with the MNIST files")
    train.add_argument("--epochs", type=int, default=None, metavar="E", help="epochs (default: the library's)")
    train.add_argument("--seed", type=int, default=0, help="random seed")


def _encrypt_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encrypt", default="image,model", metavar="WHAT",
                   help="what is encrypted: image,model (both), image (the model owner evaluates) or model "
                        "(the client evaluates)")


def _encrypt(text: str) -> tuple[str, ...]:
    from ..ml.cnn.inference import check_encrypt

    return check_encrypt(e.strip() for e in text.split(",") if e.strip())


def _show(event: dict) -> None:
    if event.get("status") == "done":
        print(f"  {event['phase']:<28s} {event['seconds']:8.2f} s {event['bytes'] / 1e6:9.1f} MB sent", flush=True)
    elif "done" in event and (event["done"] == event["total"] or event["done"] % 10 == 0):
        print(f"    {event['phase']}: {event['done']}/{event['total']}", flush=True)


def _accuracy_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"  {name:<{width}s}  {value}")


def run_demo(args: argparse.Namespace) -> int:
    from ..ml.cnn import bundled, mnist
    from ..ml.cnn.inference import confusion, predictions, single_key
    from ..ml.cnn.report import html_report

    encrypt = _encrypt(args.encrypt)
    if not 1 <= args.images <= 1000:
        raise ConfigError(f"--images takes 1..1000 (the bundled sample), got {args.images}")
    raw, labels = mnist.sample()
    images, labels = raw[:args.images] / 255.0, labels[:args.images]
    model = bundled()
    plain = model.forward(images)
    start = time.perf_counter()
    if args.single_key:
        print(f"single-key CKKS (N = 2^14), {' and '.join(encrypt)} encrypted, {args.images} images", flush=True)
        result = single_key(model, images, encrypt=encrypt, progress=_show)
        logits, phases = result.logits, [{"name": k, "seconds": v, "bytes_sent": 0} for k, v in result.seconds.items()]
        for p in phases:
            print(f"  {p['name']:<28s} {p['seconds']:8.2f} s")
        setting = "single key"
        extra: dict[str, Any] = {}
    else:
        from ..ml.cnn.jobs import demo_job
        from ..net import launch

        if not 2 <= args.parties <= 16:
            raise ConfigError(f"--parties takes 2..16, got {args.parties}")
        print(f"{args.parties} parties as local processes over TLS: joint CKKS key in MPC ({args.method} method), "
              f"party0 = client ({args.images} images), party{args.parties - 1} = model owner; "
              f"{' and '.join(encrypt)} encrypted", flush=True)
        results = launch(args.parties, demo_job, args.images, args.method, encrypt, True, timeout=None)
        r = results[0]
        logits, phases = r["logits"], [{"name": "key generation (" + r["keygen"]["method"] + ")",
                                        "seconds": r["keygen"]["seconds"],
                                        "bytes_sent": sum(p["bytes_sent"] for p in r["keygen"]["phases"])}] + r["phases"]
        setting = f"{args.parties}-party threshold key ({args.method} key generation)"
        extra = {"evaluator": r["evaluator"], "joint decryption to": r["client"],
                 "busiest party sent (MB)": f"{max(x['bytes_sent'] for x in results) / 1e6:.0f}",
                 "decryption precision (bits)": f"{r['precision_bits']:.1f}"}
    total = time.perf_counter() - start
    evaluate = next(p["seconds"] for p in phases if p["name"] == "evaluate")
    predicted, plain_predicted = predictions(logits), predictions(plain)
    acc, plain_acc = float(np.mean(predicted == labels)), float(np.mean(plain_predicted == labels))
    same = int(np.sum(predicted == plain_predicted))
    error = float(np.max(np.abs(logits - plain)))
    print(f"accuracy on {args.images} MNIST test images ({setting}):")
    _accuracy_table([("encrypted inference", f"{acc:.2%}"), ("plaintext model", f"{plain_acc:.2%}"),
                     ("same prediction as plaintext", f"{same}/{args.images}"),
                     ("largest logit error", f"{error:.2e}"),
                     ("evaluation per image", f"{evaluate / args.images * 1e3:.0f} ms"),
                     ("total wall time", f"{total:.1f} s")])
    summary = {"setting": setting, "encrypted": " and ".join(encrypt), "images": args.images,
               "accuracy (encrypted)": f"{acc:.2%}", "accuracy (plaintext)": f"{plain_acc:.2%}",
               "same prediction as plaintext": f"{same}/{args.images}", "largest logit error": f"{error:.2e}",
               "evaluation per image (ms)": f"{evaluate / args.images * 1e3:.0f}", **extra}
    path = html_report(args.report, title="shaper: encrypted MNIST CNN inference", images=images, labels=labels,
                       predicted=predicted, plain_predicted=plain_predicted,
                       confusion=confusion(labels, predicted), phases=phases, summary=summary)
    print(f"report written to {path}")
    if same != args.images:
        raise ConfigError(f"{args.images - same} encrypted predictions differ from the plaintext model's")
    return 0


def _load_images(args: argparse.Namespace) -> tuple[np.ndarray | None, np.ndarray | None]:
    from ..ml.cnn import mnist

    if args.images and args.mnist_sample:
        raise ConfigError("pass --images or --mnist-sample, not both")
    if args.mnist_sample:
        if not 1 <= args.mnist_sample <= 1000:
            raise ConfigError(f"--mnist-sample takes 1..1000, got {args.mnist_sample}")
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


def _load_model(args: argparse.Namespace) -> Any:
    from ..ml.cnn import CnnModel, bundled

    if args.model and args.bundled_model:
        raise ConfigError("pass --model or --bundled-model, not both")
    if args.model:
        return CnnModel.load(args.model)
    return bundled() if args.bundled_model else None


def _infer_local(session: Any, root: str, images: Any, labels: Any, model: Any, encrypt: tuple, evaluator: Any) -> dict:
    from ..ml.cnn.jobs import infer_job

    return infer_job(session, str(Path(root) / session.name), images=images if session.index == 0 else None,
                     labels=labels if session.index == 0 else None,
                     model=model if session.index == session.n - 1 else None, encrypt=encrypt, evaluator=evaluator,
                     progress=_show if session.index == 0 else None)


def run_infer(args: argparse.Namespace) -> int:
    encrypt = _encrypt(args.encrypt)
    images, labels = _load_images(args)
    model = _load_model(args)
    if args.local_keys:
        from ..net import launch

        root = Path(args.local_keys)
        parties = sorted(p.name for p in root.glob("party*") if p.is_dir())
        if len(parties) < 2:
            raise ConfigError(f"{root} holds no party directories (party0, party1, ...) from 'shaper fhe keygen --local'")
        if images is None:
            raise ConfigError("with --local-keys pass the client's --images or --mnist-sample")
        model = model if model is not None else _bundled()
        results = launch(len(parties), _infer_local, str(root), images, labels, model, encrypt, args.evaluator,
                         timeout=None)
        report = results[0]
    else:
        if not (args.parties and args.me and args.keys):
            raise ConfigError("pass --parties FILE --me NAME --keys DIR (or --local-keys DIR)")
        from ..ml.cnn.jobs import infer_job
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            report = infer_job(session, args.keys, images=images, labels=labels, model=model, encrypt=encrypt,
                               evaluator=args.evaluator, progress=_show)
            print(session.stats.table(f"traffic of {args.me}"))
    print(f"{report['images']} images, {' and '.join(report['encrypt'])} encrypted; client {report['client']}, "
          f"model owner {report['model_owner']}, evaluator {report['evaluator']}; this party: {report['role']}")
    if "logits" not in report:
        print("the logits were decrypted jointly for the client; nothing learnt here")
        return 0
    predicted = report["predicted"]
    shown = ", ".join(str(int(p)) for p in predicted[:20])
    print(f"predictions: {shown}{', ...' if len(predicted) > 20 else ''}")
    if "accuracy" in report:
        print(f"accuracy {report['accuracy']:.2%} on {report['images']} images")
    if args.out:
        if args.out.endswith(".npy"):
            np.save(args.out, report["logits"])
        else:
            np.savetxt(args.out, report["logits"], delimiter=",")
        print(f"logits written to {args.out}")
    if args.report:
        from ..ml.cnn.report import html_report

        path = html_report(args.report, title="shaper: encrypted MNIST CNN inference", images=images,
                           labels=report.get("labels"), predicted=predicted, confusion=report.get("confusion"),
                           phases=report["phases"], summary={"images": report["images"], "client": report["client"],
                                                             "model owner": report["model_owner"],
                                                             "evaluator": report["evaluator"]})
        print(f"report written to {path}")
    return 0


def _bundled() -> Any:
    from ..ml.cnn import bundled

    return bundled()


def run_plan(args: argparse.Namespace) -> int:
    import json
    import math

    from ..ml.cnn import plan
    from ..protocols.threshold_ckks import cnn_parameters

    params = cnn_parameters()
    t = plan.trace(params)
    if args.json:
        print(json.dumps({"params": repr(params), "cost": t.cost(), "rotation_steps": list(t.rotation_steps),
                          "weights": {k: {"level": v[0], "scale_bits": math.log2(v[1])} for k, v in t.specs.items()}},
                         indent=1))
        return 0
    print(params)
    print("one image per ciphertext (8192 slots); cost of one image, image and model encrypted:")
    for k, v in t.cost().items():
        print(f"  {k.replace('_', ' '):<22s} {v}")
    print(f"rotation keys ({len(t.rotation_steps)}): {', '.join(map(str, t.rotation_steps))}")
    print("levels at which each input is encrypted (scale in bits):")
    for k, (level, scale) in t.specs.items():
        print(f"  {k:<10s} level {level}  2^{math.log2(scale):.4f}")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from ..ml.cnn import mnist, train

    x, y = mnist.load_train_subset(args.data)
    options = {"seed": args.seed} | ({"epochs": args.epochs} if args.epochs is not None else {})
    start = time.perf_counter()

    def progress(epoch: int, epochs: int, loss: float, accuracy: float) -> None:
        print(f"  epoch {epoch}/{epochs}: loss {loss:.4f}, training accuracy {accuracy:.2%}", flush=True)

    print(f"training on {len(x)} images ({mnist.data_dir(args.data)})", flush=True)
    model = train(x / 255.0, y, progress=progress, **options)
    print(f"trained in {time.perf_counter() - start:.0f} s")
    tx, ty = mnist.load_test(args.data)
    print(f"accuracy on the {len(tx)} MNIST test images: {model.accuracy(tx / 255.0, ty):.2%}")
    path = model.save(args.out)
    print(f"weights written to {path}")
    return 0
