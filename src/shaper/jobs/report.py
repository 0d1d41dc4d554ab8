"""The one writer of the HTML reports jobs leave behind: a self-contained page (inline SVG charts,
images as PNG data URIs, tables; no plotting dependency, nothing fetched when it is opened),
written atomically (:func:`shaper.files.write_atomic`).

    page = Report("shaper fl demo")
    page.heading("Vertical logistic regression")
    page.charts(line_chart("vertical logistic regression: validation AUC", {"secure": [(1, 0.97), ...]}))
    page.table([("test AUC", "0.9950", "0.9960")], ("measure", "shaper", "scikit-learn"))
    page.record(summary)                      # a run record: figures, parameters, one row per epoch
    page.images([(image, ["predicted 7", "label 7"], True), ...])   # an image grid
    page.confusion(matrix)
    page.write("report.html")

:func:`html_report` is the training report of ``shaper demo`` (loss and AUC curves, results next
to a reference, the run record); ``shaper fl demo`` builds its page from the same parts, one
section per job. Values read as text the way :func:`value_text` writes them; nested records
become tables, never Python literals.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import struct
import sys
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..files import write_atomic

__all__ = ["Report", "html_report", "line_chart", "png", "value_text", "write_json", "write_scores"]

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1000px;color:#222} table{border-collapse:collapse;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:4px 10px;text-align:right} td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3} h3{margin-bottom:0.3em} .row{display:flex;gap:2em;flex-wrap:wrap}
.cards{display:flex;flex-wrap:wrap;gap:8px} .card{border:3px solid #ccc;padding:4px;text-align:center;font-size:12px}
.card.ok{border-color:#8c8} .card.wrong{border-color:#e88}"""

_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


# -- values and tables -----------------------------------------------------------------------------
def value_text(value: Any) -> str:
    """A value as a report shows it: yes/no/–, thousands separators, four decimals below 1."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return {True: "yes", False: "no", None: "–"}[None if value is None else bool(value)]
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value != value:
            return "–"
        if abs(value) < 1:
            return f"{value:.4f}"  # AUCs, losses, rates: the same decimals down a column
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(value_text(v) for v in value)
    return str(value)


def table_html(rows: Iterable[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """A table of text cells (escaped); cells that are not text read as :func:`value_text`."""
    head = "<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>" if header else ""
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c if isinstance(c, str) else value_text(c))}</td>"
                                     for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{cells}</table>"


# How a run record's keys read in a report; other keys read with "_" as a space.
LABELS = {
    "auc": "test AUC", "sklearn_auc": "scikit-learn test AUC", "accuracy": "test accuracy",
    "sklearn_accuracy": "scikit-learn test accuracy", "seconds": "wall time (s)", "bytes": "bytes on the wire",
    "crypto_operations": "cryptographic operations", "compute_seconds": "computation (s)",
    "communication_seconds": "waiting for the peer (s)", "params": "parameters", "key_bits": "key bits",
    "ciphertext_products": "ciphertext products", "packed_values": "packed values", "r2": "test R²",
    "sklearn_r2": "scikit-learn test R²",
}
EPOCH_LABELS = {"loss": "validation log-loss", "auc": "validation AUC", "seconds": "seconds"}
_EPOCH_FIRST = ("epoch", "loss", "auc", "seconds")


def label(key: str, labels: dict[str, str] = LABELS) -> str:
    return labels.get(key, key.replace("_", " "))


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _is_grid(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, dict) for v in value.values())


def _columns(rows: list[dict], first: Sequence[str] = ()) -> list[str]:
    keys = [k for k in first if any(k in r for r in rows)]
    seen = set(keys)
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                keys.append(k)
    return keys


def record_html(summary: dict[str, Any], *, epoch_labels: dict[str, str] = EPOCH_LABELS, level: int = 3) -> str:
    """A run record as tables: its figures (a nested dict of values flattened to "group: key"
    rows), its parameters (``params``), one row per epoch (``history``), and a table of its own
    for every other list of records or dict of dicts (rows by key, a column per field)."""
    figures: list[tuple[str, str]] = []
    params: list[tuple[str, str]] = []
    epochs: list[dict] = []
    more: list[str] = []
    h = f"h{level}"
    for key, value in summary.items():
        if key == "params" and isinstance(value, dict):
            params = [(label(k), value_text(v)) for k, v in value.items()]
        elif key == "history" and isinstance(value, list):
            epochs = [e for e in value if isinstance(e, dict)]
        elif _is_rows(value):
            keys = _columns(value)
            more.append(f"<{h}>{html.escape(label(key))}</{h}>" + table_html(
                [[r.get(k) for k in keys] for r in value], [label(k) for k in keys]))
        elif _is_grid(value):
            keys = _columns(list(value.values()))
            more.append(f"<{h}>{html.escape(label(key))}</{h}>" + table_html(
                [[str(name), *(row.get(k) for k in keys)] for name, row in value.items()], ["", *map(label, keys)]))
        elif isinstance(value, dict):
            figures += [(f"{label(key)}: {label(str(k))}", value_text(v)) for k, v in value.items()
                        if not isinstance(v, (dict, list))]
            nested = {k: v for k, v in value.items() if isinstance(v, (dict, list))}
            if nested:
                more.append(f"<{h}>{html.escape(label(key))}</{h}>" + record_html(nested, level=level + 1))
        else:
            figures.append((label(key), value_text(value)))
    out = []
    if figures:
        out.append(f"<{h}>Figures</{h}>" + table_html(figures))
    if params:
        out.append(f"<{h}>Parameters</{h}>" + table_html(params))
    if epochs:
        keys = _columns(epochs, _EPOCH_FIRST)
        out.append(f"<{h}>Per epoch</{h}>" + table_html([[e.get(k) for k in keys] for e in epochs],
                                                       [label(k, epoch_labels) for k in keys]))
    return "\n".join(out + more)


# -- charts ----------------------------------------------------------------------------------------
def line_chart(title: str, series: dict[str, list[tuple[float, float]]], reference: dict[str, float] | None = None,
               y_label: str = "", x_label: str = "epoch", width: int = 460, height: int = 270) -> str:
    """An SVG line chart over epochs: integer epoch ticks on the x axis, three value ticks on the
    y axis, dashed horizontal lines for the reference values, a legend under the title."""
    left, right, top, bottom = 52, 18, 48, 46
    points = [p for values in series.values() for p in values]
    refs = list((reference or {}).values())
    if not points:
        return f"<p>{html.escape(title)}: no data</p>"
    xs = [p[0] for p in points]
    ys = [p[1] for p in points] + refs
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys)
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 0.5, y1 + 0.5
    margin = 0.08 * (y1 - y0)
    y0, y1 = y0 - margin, y1 + margin

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    base = height - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{html.escape(title)}" font-family="sans-serif">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
             f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#444"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#444"/>']
    for frac in (0.0, 0.5, 1.0):
        yv = y0 + frac * (y1 - y0)
        parts.append(f'<line x1="{left - 4}" y1="{sy(yv):.1f}" x2="{left}" y2="{sy(yv):.1f}" stroke="#444"/>')
        parts.append(f'<text x="{left - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end" font-size="10">{yv:.3g}</text>')
    first, last = math.ceil(x0), math.floor(x1)
    step = max(1, math.ceil((last - first + 1) / 12))  # at most about a dozen labelled epochs
    for tick in range(first, last + 1, step):
        parts.append(f'<line class="epoch-tick" x1="{sx(tick):.1f}" y1="{base}" x2="{sx(tick):.1f}" '
                     f'y2="{base + 4}" stroke="#444"/>')
        parts.append(f'<text class="epoch-label" x="{sx(tick):.1f}" y="{base + 16}" text-anchor="middle" '
                     f'font-size="10">{tick}</text>')
    parts.append(f'<text x="{left + (width - left - right) / 2}" y="{height - 8}" text-anchor="middle" '
                 f'font-size="11">{html.escape(x_label)}</text>')
    if y_label:
        parts.append(f'<text x="12" y="{top + (base - top) / 2}" text-anchor="middle" font-size="11" '
                     f'transform="rotate(-90 12 {top + (base - top) / 2})">{html.escape(y_label)}</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y in values:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>')
    for name, value in (reference or {}).items():
        parts.append(f'<line x1="{left}" y1="{sy(value):.1f}" x2="{width - right}" y2="{sy(value):.1f}" '
                     'stroke="#888" stroke-dasharray="5,4"/>')
    # the legend sits between the title and the plot, one entry per series and reference line
    legend = [(name, colour, "") for name, colour in zip(series, _COLOURS * len(series))]
    legend += [(f"{name} {value:.4f}", "#888", ' stroke-dasharray="5,4"') for name, value in (reference or {}).items()]
    x = left
    for text, colour, dash in legend:
        parts.append(f'<line x1="{x}" y1="33" x2="{x + 18}" y2="33" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 22}" y="37" font-size="11">{html.escape(text)}</text>')
        x += 30 + 6.5 * len(text)
    parts.append("</svg>")
    return "".join(parts)


# -- images ----------------------------------------------------------------------------------------
def png(image: Any, scale: int = 3) -> bytes:
    """An 8-bit greyscale PNG of ``image`` (2-D, values in [0, 1]; ink dark), each pixel
    ``scale`` x ``scale`` (written here with zlib: 8-bit greyscale needs nothing more)."""
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


def image_html(image: Any, scale: int = 3, alt: str = "") -> str:
    """An ``<img>`` holding ``image`` as a PNG data URI."""
    data = base64.b64encode(png(image, scale)).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


# -- the page --------------------------------------------------------------------------------------
class Report:
    """An HTML page built section by section (see the module notes); :meth:`write` saves it."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]

    def heading(self, text: str, level: int = 2) -> "Report":
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
        return self

    def paragraph(self, text: str) -> "Report":
        self.parts.append(f"<p>{html.escape(text)}</p>")
        return self

    def table(self, rows: Iterable[Sequence[Any]], header: Sequence[str] | None = None) -> "Report":
        self.parts.append(table_html(rows, header))
        return self

    def charts(self, *charts: str) -> "Report":
        """Charts (from :func:`line_chart`) side by side."""
        self.parts.append('<div class="row">\n' + "\n".join(charts) + "\n</div>")
        return self

    def record(self, summary: dict[str, Any], *, epoch_labels: dict[str, str] = EPOCH_LABELS,
               level: int = 3) -> "Report":
        """A run record as tables (:func:`record_html`)."""
        self.parts.append(record_html(summary, epoch_labels=epoch_labels, level=level))
        return self

    def images(self, cards: Iterable[tuple[Any, Sequence[str], bool | None]], scale: int = 3) -> "Report":
        """An image grid: (image, caption lines, right/wrong/None) per card; the first caption
        line is bold, a right card has a green frame, a wrong one red."""
        out = []
        for image, caption, ok in cards:
            lines = [html.escape(str(c)) for c in caption]
            if lines:
                lines[0] = f"<b>{lines[0]}</b>"
            kind = "" if ok is None else (" ok" if ok else " wrong")
            out.append(f'<div class="card{kind}">{image_html(image, scale)}<div>{"<br>".join(lines)}</div></div>')
        self.parts.append(f'<div class="cards">{"".join(out)}</div>')
        return self

    def confusion(self, matrix: Any, true_label: str = "true", predicted_label: str = "predicted") -> "Report":
        """A confusion matrix, rows true classes and columns predicted ones, shaded by count."""
        matrix = np.asarray(matrix)
        top = max(int(matrix.max()) if matrix.size else 0, 1)
        head = (f"<tr><th>{html.escape(true_label)} \\ {html.escape(predicted_label)}</th>"
                + "".join(f"<th>{k}</th>" for k in range(matrix.shape[1])) + "</tr>")
        rows = []
        for i, row in enumerate(matrix):
            cells = []
            for j, v in enumerate(row):
                shade = int(255 - 155 * v / top)
                colour = f"rgb({shade},{shade},255)" if i == j else (f"rgb(255,{shade},{shade})" if v else "#fff")
                cells.append(f'<td style="background:{colour}">{int(v)}</td>')
            rows.append(f"<tr><th>{i}</th>{''.join(cells)}</tr>")
        self.parts.append(f"<table>{head}{''.join(rows)}</table>")
        return self

    def html(self) -> str:
        body = "\n".join(self.parts)
        return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(self.title)}</title>\n'
                f"<style>{_STYLE}</style></head>\n<body>{body}\n</body></html>")

    def write(self, path: str | Path) -> Path:
        """Save the page (atomically: a reader never sees half of it); returns its path."""
        path = Path(path)
        write_atomic(path, self.html().encode(), private=False)
        return path


def html_report(path: str | Path, *, title: str, history: list[dict], summary: dict[str, Any],
                reference: dict[str, float] | None = None, table: list[tuple[str, str, str]] | None = None,
                columns: tuple[str, str] = ("shaper (secure)", "reference")) -> Path:
    """The training report: validation loss and AUC per epoch (``reference``: name -> AUC drawn
    as a dashed line), a results table (``table``: rows of measure, shaper's value, the
    reference's value, under the headings ``columns``), and the run record ``summary`` as
    tables (figures, parameters, one row per epoch)."""
    loss = [(h["epoch"], h["loss"]) for h in history if h.get("loss") is not None]
    auc = [(h["epoch"], h["auc"]) for h in history if h.get("auc") is not None]
    page = Report(title)
    page.charts(line_chart("validation log-loss", {"secure training": loss}, y_label="log-loss"),
                line_chart("validation AUC", {"secure training": auc}, reference, y_label="AUC"))
    if table:
        page.heading("Results").table([tuple(r) for r in table], ("measure", *columns))
    page.heading("Run").record(summary)
    return page.write(path)


def write_json(path: str | Path, figures: Any) -> str:
    """The figures as JSON at ``path`` (atomically), or on standard output for ``"-"``; returns
    where they went, for the line that says so."""
    text = json.dumps(figures, indent=1, default=_plain)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return "standard output"
    write_atomic(path, (text + "\n").encode(), private=False)
    return str(path)


def _plain(value: Any) -> Any:
    """JSON for what ``json`` does not know: numpy scalars and arrays."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return float(value)


def write_scores(path: str | Path, ids: Any, scores: np.ndarray, model: str, *, id_column: str = "id") -> str:
    """Scores of rows as CSV (atomically; ``"-"``: standard output): the id, the linear score
    and, for a logistic model, the probability of class 1; returns where they went."""
    import csv

    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    scores = np.asarray(scores, dtype=np.float64)
    if model == "logistic":
        out.writerow([id_column, "score", "probability"])
        proba = 0.5 * (1.0 + np.tanh(0.5 * scores))  # the logistic function, without overflow
        out.writerows(zip(np.asarray(ids).tolist(), map(repr, scores.tolist()), map(repr, proba.tolist())))
    else:
        out.writerow([id_column, "prediction"])
        out.writerows(zip(np.asarray(ids).tolist(), map(repr, scores.tolist())))
    if str(path) == "-":
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
        return "standard output"
    write_atomic(path, buf.getvalue().encode(), private=False)
    return str(path)
