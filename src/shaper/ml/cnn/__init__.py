"""Encrypted CNN inference on MNIST under CKKS (GMPFHE's application; docs/cnn.md).

The pieces, each in its own module:

* :mod:`.model` — :class:`CnnModel` (conv 5×4×4 stride 2 → x² → FC 845→64 → x² → FC 64→10),
  its numpy forward pass, the weights file format, and :func:`train` (numpy, the 5,000-image
  MNIST subset with shift augmentation); :func:`bundled` loads the trained weights shipped here;
* :mod:`.mnist` — the MNIST files (IDX test set, CSV training subset) and the bundled
  1,000-image test sample;
* :mod:`.plan` — the packing plan (one image per ciphertext, 8,192 slots): the network written
  once over backends that evaluate it in the clear, trace its levels, scales, rotation keys and
  cost, or evaluate it homomorphically;
* :mod:`.inference` — encrypt images and/or the model, evaluate, decrypt (single key);
* :mod:`.jobs` — the n-party job: threshold key, encrypted inputs from the client and the model
  owner, evaluation, joint decryption to the client (``shaper cnn infer`` / ``shaper cnn demo``);
* :mod:`.report` — the HTML report (sample images, predictions, confusion matrix, timings).

Example (single key, both image and model encrypted)::

    from shaper.ml import cnn
    images, labels = cnn.mnist.sample()
    result = cnn.single_key(cnn.bundled(), images[:10] / 255.0)
    result.predicted, result.agree          # predictions; 1.0 = same as the plaintext model
"""

from . import jobs, mnist, plan, report
from .inference import Result, encode_model, encrypt_images, encrypt_model, evaluate, single_key
from .model import CnnModel, bundled, train

__all__ = ["CnnModel", "Result", "bundled", "encode_model", "encrypt_images", "encrypt_model", "evaluate", "jobs", "mnist",
           "plan", "report", "single_key", "train"]
