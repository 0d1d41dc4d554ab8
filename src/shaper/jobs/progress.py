"""Progress of a training job: the live display shared by ``shaper demo`` and ``shaper lr train``
(guest side), the one line an event deserves in a log, and events written as JSON lines."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any, Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


class TrainingProgress:
    """A progress bar over all iterations, with the latest epoch's losses and AUC beside it; use
    the instance as the ``progress`` callback of ``fit`` inside ``with``."""

    def __init__(self, console: Console | None = None) -> None:
        self.bar = Progress(TextColumn("[bold]secure training[/bold] epoch {task.fields[epoch]}"), BarColumn(),
                            MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                            console=console)
        self.task: Any = None

    def __enter__(self) -> "TrainingProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "iteration":
            total = event["iterations"] * event["epochs"]
            done = (event["epoch"] - 1) * event["iterations"] + event["iteration"]
            if self.task is None:
                self.task = self.bar.add_task("train", total=total, epoch=event["epoch"], info="")
            self.bar.update(self.task, completed=done, epoch=f"{event['epoch']}/{event['epochs']}")
        elif kind == "epoch":
            if self.task is not None:
                self.bar.update(self.task, info=epoch_line(event))
        elif (notice := event_line(event)) is not None:
            self.bar.console.print(notice, markup=False)


def event_line(event: dict) -> str | None:
    """The one line a progress event deserves in a log (None for per-iteration events)."""
    kind = event["event"]
    if kind == "epoch":
        return f"epoch {event['epoch']}/{event['epochs']}: {epoch_line(event)} ({event['seconds']:.1f} s)"
    if kind == "resume":
        return f"resuming from the checkpoint of epoch {event['epoch']} (of {event['epochs']})"
    if kind == "warning":
        return f"warning: {event['message']}"
    if kind == "backoff":
        return (f"epoch {event['epoch']}: {event['reason']}; restarting with learning rate "
                f"{event['learning_rate']:.3g}")
    return None


def epoch_line(record: dict, measures: dict[str, str] | None = None) -> str:
    """'train loss 0.0712 (squared error of the linear sigmoid, sampled rows)  validation log-loss
    0.1033  AUC 0.9931' from an epoch record (what is known): each loss is named for what it
    measures (``measures``, or the ``"measures"`` an epoch event carries), since the training loss
    a job watches and the loss of its monitored rows are different quantities."""
    measures = measures or record.get("measures") or {}
    parts = []
    if record.get("train_loss") is not None:
        what = measures.get("train_loss")
        parts.append(f"train loss {record['train_loss']:.4f}" + (f" ({what})" if what else ""))
    if record.get("loss") is not None:
        parts.append(f"{measures.get('loss', 'validation loss')} {record['loss']:.4f}")
    for key, name in (("auc", "AUC"), ("r2", "R²"), ("accuracy", "accuracy")):
        if record.get(key) is not None:
            parts.append(f"{name} {record[key]:.4f}")
    return "  ".join(parts)


def jsonl_writer(target: str | Path | IO[str]) -> Callable[[dict], None]:
    """A progress callback writing each event as one JSON line (with a wall-clock time)."""
    fh = open(target, "a", buffering=1) if isinstance(target, (str, Path)) else target

    def write(event: dict) -> None:
        fh.write(json.dumps({"time": round(time.time(), 3), **event}) + "\n")
        fh.flush()

    return write
