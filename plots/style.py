"""One consistent, grayscale-readable style and deterministic saving."""

from __future__ import annotations

from itertools import cycle
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no screen
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402

HATCHES = ["", "//", "..", "xx", "\\\\", "++", "oo", "--"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", ":", "-."]
GRAYS = ["0.15", "0.45", "0.7", "0.3", "0.6", "0.85"]

plt.rcParams.update({
    "figure.dpi": 100, "savefig.dpi": 100, "font.size": 9, "axes.titlesize": 10,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
})


def figure(width: float = 6.4, height: float = 3.6, **kw):
    """A new figure and axes in the house style (inches)."""
    return plt.subplots(figsize=(width, height), constrained_layout=True, **kw)


def save(fig, out_dir: Path, name: str, pdf: bool = False) -> list[Path]:
    """Save ``fig`` as PNG (and PDF) with no timestamps, so reruns give identical files.

    Args:
        fig: the matplotlib figure.
        out_dir: folder (created).
        name: file name without extension.
        pdf: also write a PDF.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png"]
    fig.savefig(paths[0], metadata={"Software": None})
    if pdf:
        paths.append(out_dir / f"{name}.pdf")
        fig.savefig(paths[1], metadata={"Creator": None, "Producer": None, "CreationDate": None})
    plt.close(fig)
    return paths


def texts_outside(fig, tolerance_px: float = 1.0) -> list[str]:
    """The drawn, non-empty texts of ``fig`` (titles, labels, tick labels, legends, annotations) that
    reach outside the figure: a label cut off at the edge of the saved file."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    hidden = set()  # tick labels of ticks outside the view: matplotlib keeps them but does not draw them
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not lo - slack <= loc <= hi + slack:
                    hidden.update({id(tick.label1), id(tick.label2)})
    box, out = fig.bbox, []
    for text in fig.findobj(matplotlib.text.Text):
        if id(text) in hidden or not text.get_visible() or not text.get_text().strip():
            continue
        ext = text.get_window_extent(renderer)
        if (ext.x0 < box.x0 - tolerance_px or ext.y0 < box.y0 - tolerance_px or ext.x1 > box.x1 + tolerance_px
                or ext.y1 > box.y1 + tolerance_px):
            out.append(text.get_text())
    return out


def styles():
    """Endless (gray, hatch, marker, linestyle) tuples, distinguishable without colour."""
    return cycle(zip(cycle(GRAYS), cycle(HATCHES), cycle(MARKERS), cycle(LINESTYLES)))
