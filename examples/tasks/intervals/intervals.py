"""Merging of closed integer intervals."""


def merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merges overlapping or touching closed intervals; the result is sorted."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
