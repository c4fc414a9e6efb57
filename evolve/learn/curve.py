"""Success rate per session with intervals, and the learning-curve picture (learning on against off)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.evolve.intervals import SuccessRate

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class SessionPoint(SuccessRate):
    session: int  # 1-based position in the run
    successes: int
    episodes: int


def new_figure() -> tuple["Figure", "Axes"]:
    """A figure of the size every plot of the project has, drawn without a display."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers; must precede pyplot
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6.4, 4.0), dpi=120)


def save_png(fig: "Figure", out: Path) -> Path:
    """Writes the figure to `out` (its folder made) and closes it."""
    import matplotlib.pyplot as plt

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def curves_figure(curves: Mapping[str, Sequence[SessionPoint]], title: str = "Success per session") -> "Figure":
    """One line per condition (e.g. "learning on", "learning off") with shaded 95% intervals;
    the caller saves the figure (a PNG file, SVG for a page) and closes it."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = new_figure()
    for label, points in curves.items():
        if not points:
            continue
        xs = [p.session for p in points]
        ys = [p.rate for p in points]
        lo = [p.interval[0] for p in points]
        hi = [p.interval[1] for p in points]
        line = ax.plot(xs, ys, marker="o", label=label)[0]
        ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
    ax.set_xlabel("session")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("success rate (95% Wilson interval)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if any(curves.values()):
        ax.legend(loc="best")
    fig.tight_layout()
    return fig


def plot_curves(curves: Mapping[str, Sequence[SessionPoint]], out: Path, title: str = "Success per session") -> Path:
    return save_png(curves_figure(curves, title), out)
