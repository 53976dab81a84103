"""Output that reads well in JupyterLab and Colab: tables shown rendered (printed as text outside a notebook), a
one-line "what is running now" message before a long cell, and readable plot fonts."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
from IPython import get_ipython
from IPython.display import display

# Font sizes in points: matplotlib's defaults (10, and 8-ish ticks at notebook DPI) read small in a browser.
COURSE_STYLE = {
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "figure.titlesize": 14,
}


class TableText(str):
    """Text that has been shown (a table, an announcement): a cell ending with `show_table(...)` or `announce(...)`
    does not echo it a second time."""

    def _ipython_display_(self) -> None:
        pass  # already displayed by show_table; the text is for record_result and the report


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, Colab, nbclient, nbval), False in a terminal or a script."""
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        size = abs(value)
        if size >= 1000:
            return f"{value:,.0f}"
        if size >= 100:
            return f"{value:.1f}"
        return f"{value:.2f}" if size >= 1 else f"{value:.3g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def rows_to_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of dict rows (columns from the first row; numbers right-aligned)."""
    if not rows:
        raise ValueError("show_table needs at least one row (got an empty list)")
    columns = list(rows[0])
    numeric = [all(isinstance(r.get(c), (int, float)) for r in rows) for c in columns]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
        *("| " + " | ".join(_cell(r.get(c, "")) for c in columns) + " |" for r in rows),
    ]
    return "\n".join(lines)


def show_table(rows_or_markdown: Sequence[Mapping[str, Any]] | str, *, title: str | None = None) -> TableText:
    """Show a table rendered in a notebook (printed as text elsewhere); return its markdown, under its title in bold,
    for `record_result`."""
    markdown = rows_or_markdown if isinstance(rows_or_markdown, str) else rows_to_markdown(rows_or_markdown)
    markdown = markdown.strip()
    text = f"**{title}**\n\n{markdown}" if title else markdown  # the report keeps the title: it names data and device
    if not in_notebook():
        print(f"{title}\n\n{markdown}" if title else markdown, flush=True)
        return TableText(text)
    display({"text/markdown": text, "text/plain": text}, raw=True)  # Lab, Colab and nbconvert render markdown
    return TableText(text)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    return f"about {seconds / 60:.0f} min" if seconds < 5400 else f"about {seconds / 3600:.1f} h"


@dataclass
class Part:
    """An announced part of a lesson: what it was, the seconds announced (None: no estimate) and those it took."""

    message: str
    announced_s: float | None
    started: float
    took_s: float | None = None  # None while it runs

    def end(self) -> None:
        """Stop its clock (once)."""
        if self.took_s is None:
            self.took_s = time.perf_counter() - self.started

    @property
    def off_by(self) -> float | None:
        """How many times the time taken and the time announced differ, the larger over the smaller (1.0: on time)."""
        if self.announced_s is None or self.took_s is None:
            return None
        low, high = sorted((max(self.announced_s, 1.0), max(self.took_s, 1.0)))  # below a second, nobody waits
        return high / low


PARTS: list[Part] = []  # this kernel's announced parts, in order; each ends with its cell (or at the next announce)


def _end_parts(*_: Any) -> None:
    for part in PARTS:
        part.end()


def announce(message: str, seconds: float | None = None) -> str:
    """Print one line saying what runs now (and roughly how long it takes) before a long cell; return the line. The
    part is timed until its cell ends (in a notebook) or the next announce, for `parts_text` at the lesson's end."""
    _end_parts()
    line = f"▶ running now: {message}" + (f" ({_duration(seconds)})" if seconds is not None else "")
    print(line, flush=True)
    PARTS.append(Part(message, seconds, time.perf_counter()))
    shell = get_ipython()
    if shell is not None and _end_parts not in shell.events.callbacks.get("post_run_cell", []):
        shell.events.register("post_run_cell", _end_parts)
    return TableText(line)


def parts_text(parts: Sequence[Part] | None = None) -> str:
    """Each announced part with the time announced and the time it took, marking those more than 2x off; empty when
    nothing was announced."""
    parts = PARTS if parts is None else parts
    _end_parts()
    lines = []
    for part in parts:
        announced = (
            _duration(part.announced_s).removeprefix("about ") if part.announced_s is not None else "no estimate"
        )
        off = part.off_by
        flag = f" ({off:.1f}x off what was announced)" if off is not None and off > 2 else ""
        lines.append(f"- {part.message}: announced {announced}, took {part.took_s:.0f} s{flag}")
    return "\n".join(["announced parts, as timed here:", *lines]) if lines else ""


def use_course_style() -> dict[str, Any]:
    """Set readable matplotlib font sizes for the notebooks' charts; return the settings applied."""
    # matplotlib's stubs key rcParams by a Literal of every name; COURSE_STYLE's valid names are a plain dict[str, int]
    mpl.rcParams.update(COURSE_STYLE)  # type: ignore[arg-type]
    return dict(COURSE_STYLE)
