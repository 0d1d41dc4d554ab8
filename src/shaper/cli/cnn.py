"""``shaper cnn``: MNIST CNN inference under CKKS, single key or the joint key of ``shaper fhe``
(docs/cnn.md).

    shaper cnn demo                                  2 local parties: joint key, 20 images, report
    shaper cnn demo --single-key --mnist-sample 100  one key, one process
    shaper cnn plan                                  the packing plan's cost and rotation keys
    shaper cnn train --out model.npz                 retrain the model (numpy, MNIST 5k subset)
    shaper fhe keygen --local 2 --rotations cnn --out keys/
    shaper cnn infer --local 2 --keys keys/ --mnist-sample 50 --report cnn.html
    shaper cnn infer --local 2 --keys keys/ --mnist-sample 50 --reveal label      (only the argmax to the client)
    shaper cnn infer --parties p.toml --me bank --keys keys/bank --images x.npy     (the client)
    shaper cnn infer --parties p.toml --me lab --keys keys/lab --model model.npz    (the model owner)

The options are parsed here; the jobs are :mod:`shaper.jobs.cnn`.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    command,
    deprecated_alias,
    deprecation,
    file_security,
    group,
    json_option,
    local_count,
    local_from_keys,
    out_option,
    party_options,
    where,
)

DEMO_PARTIES = 2
DEMO_IMAGES = 20
SAMPLE = 1000  # images in the bundled MNIST test sample (shaper.ml.cnn.mnist.SAMPLE_COUNT; the parser does not import it)


def add_parser(subparsers: Any) -> None:
    sub = group(subparsers, "cnn", "encrypted MNIST CNN inference (single key or the joint key of 'fhe')",
                "A 5-layer CNN evaluated on CKKS ciphertexts, one image per ciphertext; "
                "under a threshold key the logits are decrypted jointly, to the client "
                "only (docs/cnn.md).")

    demo = command(sub, "demo", run_demo, "n parties: joint key, encrypted images and model, joint decryption",
                   "Runs every party here (--local N, the default with 2 parties) or one party on each host "
                   "(--parties FILE --me NAME): joint key generation with the plan's 28 rotation keys, party0 "
                   "(the client) encrypts MNIST test images, the last party (the model owner) encrypts the "
                   "bundled model, every party evaluates the plan itself, all decrypt the logits jointly to party0 "
                   "(each decrypts only what it computed). Prints accuracy, "
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
    infer.add_argument("--evaluator", metavar="NAME", help=argparse.SUPPRESS)  # retired: every party evaluates
    infer.add_argument("--reveal", choices=("label", "logits"), default=None,
                       help="what the client gets: label (the argmax of each image's logits, computed inside the "
                            "MPC; no party sees a logit, no flood) or logits (decrypted jointly, flooded). Default: "
                            "label on a key made with --security active, where logits are refused (their derived "
                            "worst case leaves no precision), logits otherwise")
    deprecated_alias(infer, "--output", "--reveal", choices=("label", "logits"))
    out_option(infer, "client: write the labels or logits (.npy or .csv)", metavar="FILE")
    infer.add_argument("--report", metavar="FILE", help="client: write an HTML report")
    infer.set_defaults(active_engine=True)  # the engine follows the key (a parties file's security must match it)

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
                   help="what is encrypted: image,model (both), image (the model goes to every party in the "
                        "clear) or model (the images go to every party in the clear); every party evaluates")


def _demo_local(args: argparse.Namespace) -> int | None:
    """The demo's parties: ``--local N`` (default 2 when no parties file is given), or None on
    real hosts."""
    local = local_count(args)
    if local is None and not args.parties and not args.me:
        args.local = DEMO_PARTIES
    return where(args)




def run_demo(args: argparse.Namespace) -> int:
    from ..jobs import cnn

    return cnn.demo_command(args, None if args.single_key else _demo_local(args))


def run_infer(args: argparse.Namespace) -> int:
    from ..jobs import cnn

    file_security(args)
    return cnn.infer_command(args, local_from_keys(args))


def run_plan(args: argparse.Namespace) -> int:
    from ..jobs import cnn

    return cnn.plan_command(args)


def run_train(args: argparse.Namespace) -> int:
    from ..jobs import cnn

    return cnn.train_command(args)
