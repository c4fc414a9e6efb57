"""One PNG per archive: the quality of the elite in each cell over the grid of the other tasks' scores."""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from skillgraft.evolve.cycleqd.archive import Archive, Elite

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def shown_elites(archive: Archive) -> dict[tuple[int, int], Elite]:
    """The elite a flat picture shows at each (column, row): the 1st coordinate task across, the
    2nd up. With one coordinate task there is a single row; with more than two, each shown cell
    holds the best elite over the hidden coordinates."""
    dims = len(archive.coordinate_tasks)
    shown: dict[tuple[int, int], Elite] = {}
    for cell, elite in archive.elites.items():
        at = (cell[0] if dims >= 1 else 0, cell[1] if dims >= 2 else 0)
        if at not in shown or archive.quality(elite) > archive.quality(shown[at]):
            shown[at] = elite
    return shown


def quality_grid(archive: Archive) -> np.ndarray:
    """Qualities as a 2-D array (NaN where empty): rows = 2nd coordinate task, columns = 1st."""
    bins = archive.binning.bins
    grid = np.full((bins if len(archive.coordinate_tasks) >= 2 else 1, bins), np.nan)
    for (x, y), elite in shown_elites(archive).items():
        grid[y, x] = archive.quality(elite)
    return grid


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "task"


def quality_range(archives: Mapping[str, Archive]) -> tuple[float, float]:
    """One colour scale for a set of archives, so their pictures compare."""
    finite = [a.quality(e) for a in archives.values() for e in a.elites.values()]
    vmin, vmax = (min(finite), max(finite)) if finite else (0.0, 1.0)
    return vmin, vmax if vmax > vmin else vmin + 1e-9


def heatmap_figure(task: str, archive: Archive, vmin: float, vmax: float) -> "Figure":
    """The archive's picture; the caller saves it (PNG file, SVG for a page) and closes it."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    grid = quality_grid(archive)
    coords = archive.coordinate_tasks
    fig, ax = plt.subplots(figsize=(5.5, 4.5 if len(coords) >= 2 else 2.0), dpi=110)
    x_lo, x_hi = archive.binning.ranges[coords[0]] if coords else (0.0, 1.0)
    y_lo, y_hi = archive.binning.ranges[coords[1]] if len(coords) >= 2 else (0.0, 1.0)
    image = ax.imshow(np.ma.masked_invalid(grid), origin="lower", aspect="auto", cmap="viridis",
                      vmin=vmin, vmax=vmax, extent=(x_lo, x_hi, y_lo, y_hi))
    fig.colorbar(image, ax=ax, label=f"quality: {task} score")
    ax.set_xlabel(f"{coords[0]} score" if coords else "")
    if len(coords) >= 2:
        ax.set_ylabel(f"{coords[1]} score")
    else:
        ax.set_yticks([])
    hidden = f" (best over {', '.join(coords[2:])})" if len(coords) > 2 else ""
    stats = archive.stats()
    ax.set_title(f"{task}: {stats.elites} elites, coverage {stats.coverage:.0%}{hidden}", fontsize=9)
    fig.tight_layout()
    return fig


def write_heatmaps(archives: Mapping[str, Archive], out_dir: Path, *, prefix: str = "archive") -> list[Path]:
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vmin, vmax = quality_range(archives)
    paths = []
    for task, archive in archives.items():
        fig = heatmap_figure(task, archive, vmin, vmax)
        path = out_dir / f"{prefix}-{_slug(task)}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths
