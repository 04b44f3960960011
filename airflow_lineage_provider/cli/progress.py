"""The CLI's progress bar: rich on a terminal (stderr), silent otherwise (a pipe, a log, a test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: What :func:`progress_bar` yields: (set the total, advance by n).
Steps = tuple[Callable[[int], None], Callable[[int], None]]


@contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[Steps]:
    """A bar for ``total`` steps (None or 0: not known yet); yields (set the total, advance by n)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=False,
    ) as progress:
        task_id = progress.add_task(description, total=total or None)
        yield (lambda n: progress.update(task_id, total=n)), (lambda n: progress.advance(task_id, n))
