"""Pictures for the pages: matplotlib figures as inline SVG images, and the lineage drawing."""
from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from skillgraft.evolve.cycleqd import Archive
    from skillgraft.skills.schema import SkillVersion


def image(fig: "Figure", alt: str) -> Markup:
    """The figure as an <img> holding its SVG (closed afterwards); an image element keeps each
    figure's SVG ids to itself, however many share a page."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode()
    return Markup(f'<img class="chart" alt="{escape(alt)}" src="data:image/svg+xml;base64,{data}">')


def norms_figure(norms: Mapping[str, float], title: str) -> "Figure":
    """A bar per adapted module: ‖ΔW‖_F, in the order of the model's layers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(norms)
    fig, ax = plt.subplots(figsize=(7.5, max(2.2, 0.16 * len(names) + 1.0)), dpi=100)
    ax.barh(range(len(names)), [norms[n] for n in names], color="#4c72b0")
    ax.set_yticks(range(len(names)), names, fontsize=6 if len(names) > 24 else 8)
    ax.invert_yaxis()
    ax.set_xlabel("‖ΔW‖ (Frobenius norm)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


_ORIGIN_COLOURS = {"imported": "#4c72b0", "authored": "#55a868", "summarised": "#dd8452",
                   "refined": "#8172b3", "merged": "#c44e52"}


def lineage_svg(versions: Sequence["SkillVersion"]) -> Markup:
    """Versions top to bottom; a version whose parent already has a child starts a new lane to the
    right, so a fork shows as a branch. Each node links to that version on the page."""
    lane_of: dict[int | None, int] = {}
    continued: set[int] = set()  # parents whose lane a child already carries on
    lanes = 0
    for v in versions:
        parent = v.parent_id
        if parent in lane_of and parent not in continued:
            lane_of[v.id] = lane_of[parent]
        else:  # a first version, or a fork
            lane_of[v.id], lanes = lanes, lanes + 1
        if parent is not None:
            continued.add(parent)
    step, left, top = 44, 24, 22
    row = {v.id: i for i, v in enumerate(versions)}
    width = left * 2 + 40 * max(1, lanes) + 260
    height = top * 2 + step * max(0, len(versions) - 1)
    parts = [f'<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="lineage of {len(versions)} versions">']
    for v in versions:
        if v.parent_id in row:
            x1, y1 = left + 40 * lane_of[v.parent_id], top + step * row[v.parent_id]
            x2, y2 = left + 40 * lane_of[v.id], top + step * row[v.id]
            parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#888" stroke-width="2"/>')
    for v in versions:
        x, y = left + 40 * lane_of[v.id], top + step * row[v.id]
        colour = _ORIGIN_COLOURS.get(v.origin, "#777")
        label = escape(f"v{v.number} · {v.origin} · {v.created_at:%Y-%m-%d %H:%M}")
        parts.append(f'<a href="#v{v.number}" class="node" data-version="{v.number}">'
                     f'<circle cx="{x}" cy="{y}" r="9" fill="{colour}"/>'
                     f'<text x="{left + 40 * max(1, lanes) + 4}" y="{y + 4}">{label}</text></a>')
    parts.append("</svg>")
    return Markup("".join(parts))


def archive_svg(archive: "Archive", vmin: float, vmax: float, size: int = 300) -> Markup:
    """The archive as a grid of cells coloured by quality (viridis, the scale the PNG heatmaps
    use); each occupied cell links to its elite's adapter and names its scores on hover. With
    more than two coordinate tasks a shown cell holds the best elite over the hidden ones."""
    from matplotlib import colormaps

    from skillgraft.evolve.cycleqd import shown_elites

    def colour(at: float) -> str:
        r, g, b, _ = colormaps["viridis"](at)
        return f"rgb({r * 255:.0f},{g * 255:.0f},{b * 255:.0f})"

    coords = archive.coordinate_tasks
    bins = archive.binning.bins
    rows = bins if len(coords) >= 2 else 1
    shown = shown_elites(archive)
    side = size / bins
    pad_left, pad_bottom, legend = 46, 34, 54
    width, height = pad_left + size + legend, rows * side + pad_bottom + 8
    parts = [f'<svg class="archive" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'role="img" aria-label="archive of {escape(archive.task)}">',
             f'<rect x="{pad_left}" y="4" width="{size}" height="{rows * side:.1f}" fill="#f3f4f7" stroke="#999"/>']
    span = (vmax - vmin) or 1.0
    for (x, y), elite in sorted(shown.items()):
        fill = colour((archive.quality(elite) - vmin) / span)
        scores = ", ".join(f"{t} {s:.3f}" for t, s in sorted(elite.scores.items()))
        top = 4 + (rows - 1 - y) * side
        adapter = escape(str(elite.adapter_id))
        parts.append(f'<a href="/adapters/{adapter}" class="cell"><title>adapter {adapter}: {escape(scores)}</title>'
                     f'<rect x="{pad_left + x * side:.1f}" y="{top:.1f}" width="{side:.1f}" height="{side:.1f}" '
                     f'fill="{fill}"/></a>')
    base = 4 + rows * side
    if coords:
        lo, hi = archive.binning.ranges[coords[0]]
        parts.append(f'<text x="{pad_left}" y="{base + 14:.0f}" class="tick">{lo:.2f}</text>'
                     f'<text x="{pad_left + size}" y="{base + 14:.0f}" class="tick" text-anchor="end">{hi:.2f}</text>'
                     f'<text x="{pad_left + size / 2}" y="{base + 28:.0f}" text-anchor="middle">{escape(coords[0])} score</text>')
    if len(coords) >= 2:
        lo, hi = archive.binning.ranges[coords[1]]
        parts.append(f'<text x="{pad_left - 4}" y="{base:.0f}" class="tick" text-anchor="end">{lo:.2f}</text>'
                     f'<text x="{pad_left - 4}" y="14" class="tick" text-anchor="end">{hi:.2f}</text>'
                     f'<text transform="translate(12,{4 + rows * side / 2:.0f}) rotate(-90)" text-anchor="middle">'
                     f'{escape(coords[1])} score</text>')
    steps = 24
    for i in range(steps):
        parts.append(f'<rect x="{pad_left + size + 12}" y="{4 + i * (rows * side) / steps:.1f}" width="12" '
                     f'height="{rows * side / steps + 0.5:.1f}" fill="{colour(1 - i / (steps - 1))}"/>')
    parts.append(f'<text x="{pad_left + size + 27}" y="14" class="tick">{vmax:.2f}</text>'
                 f'<text x="{pad_left + size + 27}" y="{base:.0f}" class="tick">{vmin:.2f}</text></svg>')
    return Markup("".join(parts))
