"""The HTML report of an encrypted CNN run: a few images with their encrypted and plaintext
predictions, the confusion matrix, accuracy, per-phase times and bytes. Self-contained: the
images are embedded as PNG (written here with zlib; 8-bit greyscale needs nothing more)."""

from __future__ import annotations

import base64
import html
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np


def png(image: Any, scale: int = 3) -> bytes:
    """An 8-bit greyscale PNG of ``image`` (2-D, values in [0, 1]; ink dark), each pixel
    ``scale`` × ``scale``."""
    x = np.asarray(image, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"png takes a 2-D image, got shape {x.shape}")
    grey = (255 - np.clip(np.rint(x * 255), 0, 255)).astype(np.uint8)
    grey = np.repeat(np.repeat(grey, scale, axis=0), scale, axis=1)
    rows = b"".join(b"\x00" + row.tobytes() for row in grey)  # filter type 0 per row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", grey.shape[1], grey.shape[0], 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def _img(image: Any) -> str:
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(png(image)).decode()}">'


def _table(rows: list[tuple], header: tuple) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _confusion(matrix: np.ndarray) -> str:
    top = max(int(matrix.max()), 1)
    head = "<tr><th>true \\ predicted</th>" + "".join(f"<th>{k}</th>" for k in range(matrix.shape[1])) + "</tr>"
    rows = []
    for i, row in enumerate(matrix):
        cells = []
        for j, v in enumerate(row):
            shade = int(255 - 155 * v / top)
            color = f"rgb({shade},{shade},255)" if i == j else (f"rgb(255,{shade},{shade})" if v else "#fff")
            cells.append(f'<td style="background:{color}">{int(v)}</td>')
        rows.append(f"<tr><th>{i}</th>{''.join(cells)}</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


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
    """Write the report; returns its path. It shows every misclassified image first (the
    encrypted prediction differs from the label, or from the plaintext model's when there are
    no labels), then the others in order up to ``shown`` images in all (:func:`shown_order`)."""
    cards = []
    order = shown_order(predicted, labels, plain_predicted, shown)
    wrong = len(order) - sum(1 for k in order if _correct(k, predicted, labels, plain_predicted))
    for k in order:
        ok = _correct(k, predicted, labels, plain_predicted)
        caption = f"predicted <b>{int(predicted[k])}</b>"
        if labels is not None:
            caption += f"<br>label {int(labels[k])}"
        if plain_predicted is not None:
            caption += f"<br>plaintext {int(plain_predicted[k])}"
        cards.append(f'<div class="card" style="border-color:{"#8c8" if ok else "#e88"}">{_img(images[k])}'
                     f"<div>{caption}</div></div>")
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if summary:
        parts.append("<h2>Summary</h2>" + _table([(k, v) for k, v in summary.items()], ("measure", "value")))
    heading = f"Images ({len(cards)} of {len(images)}"
    heading += f", the {wrong} misclassified first)" if wrong else ")"
    parts.append(f"<h2>{heading}</h2><div class=\"cards\">{''.join(cards)}</div>")
    if confusion is not None:
        parts.append("<h2>Confusion matrix (encrypted predictions)</h2>" + _confusion(confusion))
    if phases:
        parts.append("<h2>Phases</h2>" + _table(
            [(p["name"], f"{p['seconds']:.2f}", f"{p['bytes_sent'] / 1e6:.1f}") for p in phases],
            ("phase", "seconds", "MB sent")))
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px;color:#222}}
table{{border-collapse:collapse;margin-bottom:1em}} td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
th{{background:#f3f3f3}} .cards{{display:flex;flex-wrap:wrap;gap:8px}}
.card{{border:3px solid;padding:4px;text-align:center;font-size:12px}}</style></head>
<body>{''.join(parts)}</body></html>"""
    path = Path(path)
    path.write_text(body)
    return path


__all__ = ["html_report", "png", "shown_order"]
