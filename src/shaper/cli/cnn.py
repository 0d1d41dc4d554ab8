"""``shaper cnn``: MNIST CNN inference under CKKS, single key or the joint key of ``shaper fhe``
(docs/cnn.md).

    shaper cnn demo                                  2 local parties: joint key, 20 images, report
    shaper cnn demo --single-key --mnist-sample 100  one key, one process
    shaper cnn plan                                  the packing plan's cost and rotation keys
    shaper cnn train --out model.npz                 retrain the model (numpy, MNIST 5k subset)
    shaper fhe keygen --local 2 --rotations cnn --out keys/
    shaper cnn infer --local 2 --keys keys/ --mnist-sample 50 --report cnn.html
    shaper cnn infer --parties p.toml --me bank --keys keys/bank --images x.npy     (the client)
    shaper cnn infer --parties p.toml --me lab --keys keys/lab --model model.npz    (the model owner)

The options are parsed here; the jobs are :mod:`shaper.jobs.cnn`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .common import (
    HelpFormatter,
    command,
    deprecated_alias,
    deprecation,
    json_option,
    local_count,
    out_option,
    party_options,
    where,
)

DEMO_PARTIES = 2
DEMO_IMAGES = 20
SAMPLE = 1000  # images in the bundled MNIST test sample


def add_parser(subparsers: Any) -> None:
    cnn = subparsers.add_parser("cnn", help="encrypted MNIST CNN inference (single key or the joint key of 'fhe')",
                                formatter_class=HelpFormatter,
                                description="A 5-layer CNN evaluated on CKKS ciphertexts, one image per ciphertext; "
                                            "under a threshold key the logits are decrypted jointly, to the client "
                                            "only (docs/cnn.md).")
    cnn.set_defaults(prog=cnn.prog)
    sub = cnn.add_subparsers(dest="cnn_command", required=True, metavar="COMMAND")

    demo = command(sub, "demo", run_demo, "n parties: joint key, encrypted images and model, joint decryption",
                   "Runs every party here (--local N, the default with 2 parties) or one party on each host "
                   "(--parties FILE --me NAME): joint key generation with the plan's 28 rotation keys, party0 "
                   "(the client) encrypts MNIST test images, the last party (the model owner) encrypts the "
                   "bundled model, party0 evaluates, all decrypt the logits jointly to party0. Prints accuracy, "
                   "per-phase times and bytes; writes an HTML report.")
    party_options(demo, local_help=f"run N parties here as processes over loopback TLS (2..16; {DEMO_PARTIES} "
                                   "when no parties file is given)")
    demo.add_argument("--mnist-sample", type=int, default=DEMO_IMAGES, metavar="K",
                      help=f"how many of the bundled MNIST test images to classify (1..{SAMPLE})")
    demo.add_argument("--images", type=int, dest="mnist_sample", action=_ImagesCount, help=argparse.SUPPRESS,
                      default=argparse.SUPPRESS)
    demo.add_argument("--method", choices=("exact", "local"), default="exact",
                      help="key generation: exact (every error sampled in MPC, GMPFHE) or local (each party adds "
                           "its own error; faster)")
    _encrypt_option(demo)
    demo.add_argument("--single-key", action="store_true",
                      help="one process under an ordinary single-key CKKS key instead of n parties")
    demo.add_argument("--report", default="cnn-report.html", metavar="FILE", help="HTML report to write")

    infer = command(sub, "infer", run_infer, "one party of an encrypted inference under a joint key",
                    "Every party runs this with its key directory from 'shaper fhe keygen --rotations cnn' (or "
                    "--local N --keys DIR runs every party here: party0 the client, the last the model owner). "
                    "The party with --images (or --mnist-sample) is the client and alone learns the "
                    "predictions; the party with --model is the model owner; the others hold key shares.")
    party_options(infer)
    infer.add_argument("--keys", metavar="DIR",
                       help="this party's key directory (with --local N: the directory holding party0 ..)")
    deprecated_alias(infer, "--local-keys", "--keys", metavar="DIR")
    infer.add_argument("--images", metavar="FILE", help="the client's images: .npy, (m, 28, 28), uint8 or [0, 1]")
    infer.add_argument("--labels", metavar="FILE", help="the client's labels (.npy) for an accuracy figure")
    infer.add_argument("--mnist-sample", type=int, metavar="K",
                       help="the client uses the first K bundled MNIST test images and their labels")
    infer.add_argument("--model", metavar="FILE", help="the model owner's weights (.npz from 'shaper cnn train')")
    infer.add_argument("--bundled-model", action="store_true", help="the model owner uses the bundled trained model")
    _encrypt_option(infer)
    infer.add_argument("--evaluator", metavar="NAME",
                       help="who evaluates when image and model are both encrypted (default: the client)")
    out_option(infer, "client: write the logits (.npy or .csv)", metavar="FILE")
    infer.add_argument("--report", metavar="FILE", help="client: write an HTML report")

    plan = command(sub, "plan", run_plan, "print the packing plan: cost, levels, rotation keys")
    json_option(plan, "also write the plan as JSON ('-': standard output, instead of the table)")

    train = command(sub, "train", run_train, "train the CNN in plaintext on the MNIST 5,000-image subset",
                    "numpy, mini-batch Adam with random pixel shifts; deterministic for a seed. Needs the MNIST "
                    "files (--mnist-dir, SHAPER_MNIST_DIR, or ../shared/data/mnist). Writes float32 weights with "
                    "the training settings and the test accuracy, as the bundled model was made.")
    out_option(train, "weights file to write (.npz)", metavar="FILE", required=True)
    train.add_argument("--mnist-dir", metavar="DIR", help="directory with the MNIST files")
    deprecated_alias(train, "--data", "--mnist-dir", metavar="DIR")
    train.add_argument("--epochs", type=int, default=None, metavar="E", help="epochs (default: the library's, 60)")
    train.add_argument("--seed", type=int, default=0, help="random seed")
    train.add_argument("--learning-rate", type=float, default=None, metavar="RATE",
                       help="Adam's initial step size (default: the library's, 0.004)")
    train.add_argument("--shift", type=int, default=None, metavar="PIXELS",
                       help="largest random shift of an image per epoch (default: the library's, 2)")
    train.add_argument("--float64", action="store_true", help="store float64 weights (default float32, half the size)")
    train.add_argument("--overwrite", action="store_true", help="replace an existing --out")


class _ImagesCount(argparse.Action):
    """The retired ``--images K`` of ``cnn demo`` (a count, now ``--mnist-sample K``): sets the
    count, prints the deprecation line and remembers the spelling for error messages."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        deprecation(parser.prog, "--images K (a count)", "--mnist-sample K")
        namespace.mnist_sample = values
        namespace.sample_flag = option_string


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


def _demo_local(args: argparse.Namespace) -> int | None:
    """The demo's parties: ``--local N`` (default 2 when no parties file is given), or None on
    real hosts."""
    local = local_count(args)
    if local is None and not args.parties and not args.me:
        args.local = DEMO_PARTIES
    return where(args)


def run_demo(args: argparse.Namespace) -> int:
    from ..ml.cnn import bundled, mnist
    from ..ml.cnn.inference import confusion, predictions, single_key
    from ..ml.cnn.report import html_report

    encrypt = _encrypt(args.encrypt)
    count = args.mnist_sample
    if not 1 <= count <= SAMPLE:
        flag = getattr(args, "sample_flag", "--mnist-sample")
        raise ConfigError(f"{flag} takes 1..{SAMPLE} (the bundled sample), got {count}")
    local = None if args.single_key else _demo_local(args)
    raw, labels = mnist.sample()
    images, labels = raw[:count] / 255.0, labels[:count]
    model = bundled()
    plain = model.forward(images)
    start = time.perf_counter()
    if args.single_key:
        print(f"single-key CKKS (N = 2^14), {' and '.join(encrypt)} encrypted, {count} images", flush=True)
        result = single_key(model, images, encrypt=encrypt, progress=_show)
        logits, phases = result.logits, [{"name": k, "seconds": v, "bytes_sent": 0} for k, v in result.seconds.items()]
        for p in phases:
            print(f"  {p['name']:<28s} {p['seconds']:8.2f} s")
        setting = "single key"
        extra: dict[str, Any] = {}
    else:
        from ..jobs.cnn import demo_job, demo_local

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
                     ("largest logit error", f"{error:.2e}"),
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


def _load_images(args: argparse.Namespace) -> tuple[np.ndarray | None, np.ndarray | None]:
    from ..ml.cnn import mnist

    if args.images and args.mnist_sample:
        raise ConfigError("pass --images or --mnist-sample, not both")
    if args.mnist_sample:
        if not 1 <= args.mnist_sample <= SAMPLE:
            raise ConfigError(f"--mnist-sample takes 1..{SAMPLE}, got {args.mnist_sample}")
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


def _infer_local(args: argparse.Namespace) -> int | None:
    """``--local N``, or, with neither --local nor a parties file, the count of party directories
    under ``--keys`` (what the retired ``--local-keys DIR`` meant)."""
    from ..jobs.fhe import local_key_dirs

    local = local_count(args)
    if local is None and not args.parties and not args.me and args.keys and (Path(args.keys) / "party0").is_dir():
        args.local = len(local_key_dirs(args.keys))
    return where(args)


def run_infer(args: argparse.Namespace) -> int:
    from ..jobs.cnn import infer_job, infer_local, infer_report

    encrypt = _encrypt(args.encrypt)
    local = _infer_local(args)
    if not args.keys:
        raise ConfigError("pass --keys DIR (this party's key directory; with --local N the one holding party0 ..)")
    images, labels = _load_images(args)
    model = _load_model(args)
    if local is not None:
        if images is None:
            raise ConfigError("with --local pass the client's --images or --mnist-sample")
        results = infer_local(args.keys, images, labels, model, encrypt, args.evaluator, parties=local,
                              progress=_show)
        report = results[0]
    else:
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
        print(f"report written to {infer_report(args.report, report, images)}")
    return 0


def run_plan(args: argparse.Namespace) -> int:
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


def run_train(args: argparse.Namespace) -> int:
    from ..jobs.cnn import train_job

    def progress(epoch: int, epochs: int, loss: float, accuracy: float) -> None:
        print(f"  epoch {epoch}/{epochs}: loss {loss:.4f}, training accuracy {accuracy:.2%}", flush=True)

    print("training on the MNIST 5,000-image subset", flush=True)
    r = train_job(args.out, mnist_dir=args.mnist_dir, epochs=args.epochs, seed=args.seed,
                  learning_rate=args.learning_rate, shift=args.shift, float64=args.float64, overwrite=args.overwrite,
                  progress=progress)
    print(f"trained in {r['seconds']:.1f} s on {r['images']} images ({r['data']})")
    print(f"accuracy on the {r['test_images']} MNIST test images: {r['test_accuracy']:.2%}")
    print(f"accuracy on the bundled {SAMPLE}-image sample: {r['sample_accuracy']:.2%}")
    for name, value in r["largest"].items():
        print(f"  largest |{name}| on the test set: {value:.3f}")
    print(f"weights written to {r['out']} ({r['bytes']} bytes, {r['dtype']})")
    return 0
