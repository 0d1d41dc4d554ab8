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
* :mod:`.params` — the CKKS parameters (:data:`~.params.CNN_CHAIN`, :func:`~.params.cnn_parameters`)
  and the plan's rotation steps (:data:`~.params.CNN_ROTATIONS`);
* :mod:`.inference` — encrypt images and/or the model, evaluate, decrypt (single key).

The n-party job (threshold key, encrypted inputs from the client and the model owner,
evaluation, joint decryption to the client; ``shaper cnn infer`` / ``demo`` / ``train``) and its
HTML report (images, misclassified first; predictions, confusion matrix, timings) are
:mod:`shaper.jobs.cnn`.

Example (single key, both image and model encrypted)::

    from shaper.ml import cnn
    images, labels = cnn.mnist.sample()
    result = cnn.single_key(cnn.bundled(), images[:10] / 255.0)
    result.predicted, result.agree          # predictions; 1.0 = same as the plaintext model
"""

from . import mnist, params, plan
from .inference import Result, encode_model, encrypt_images, encrypt_model, evaluate, single_key
from .model import CnnModel, bundled, train
from .params import CNN_CHAIN, CNN_ROTATIONS, cnn_parameters

__all__ = ["CNN_CHAIN", "CNN_ROTATIONS", "CnnModel", "Result", "bundled", "cnn_parameters", "encode_model",
           "encrypt_images", "encrypt_model", "evaluate", "mnist", "params", "plan", "single_key", "train"]
