"""The Debian mirror this machine already uses, read from its apt sources.

The sandbox rootfs is bootstrapped from the same mirror apt uses here, because on a locked-down
machine that is often the one host allowed through (a snapshot, a proxy, a local mirror).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

APT_DIR = Path("/etc/apt")
DEFAULT_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class AptSource:
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...] = ()
    signed_by: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    """Splits a deb822 file into stanzas of Key -> value (continuation lines joined)."""
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key = None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
            continue
        if raw[0] in " \t" and key is not None:
            current[key] += "\n" + raw.strip()
            continue
        name, sep, value = raw.partition(":")
        if not sep:
            continue
        key = name.strip().lower()
        current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def parse_deb822(text: str) -> list[AptSource]:
    sources = []
    for stanza in _deb822_stanzas(text):
        if "deb" not in stanza.get("types", "").split():
            continue
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        for uri in stanza.get("uris", "").split():
            sources.append(
                AptSource(
                    uri=uri.rstrip("/"),
                    suites=tuple(stanza.get("suites", "").split()),
                    components=tuple(stanza.get("components", "").split()),
                    # Signed-By may hold an inline key block; only a path is useful to debootstrap.
                    signed_by=stanza.get("signed-by") if stanza.get("signed-by", "").startswith("/") else None,
                )
            )
    return sources


_ONE_LINE = re.compile(r"^deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)(?P<comps>(?:\s+\S+)*)\s*$")


def parse_one_line(text: str) -> list[AptSource]:
    sources = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        match = _ONE_LINE.match(line)
        if not match:
            continue
        options = dict(opt.split("=", 1) for opt in (match["opts"] or "").split() if "=" in opt)
        sources.append(
            AptSource(
                uri=match["uri"].rstrip("/"),
                suites=(match["suite"],),
                components=tuple(match["comps"].split()),
                signed_by=options.get("signed-by"),
                options=options,
            )
        )
    return sources


def machine_sources(apt_dir: Path = APT_DIR) -> list[AptSource]:
    """Every enabled `deb` source, in the order apt reads them."""
    sources: list[AptSource] = []
    main_list = apt_dir / "sources.list"
    if main_list.is_file():
        sources += parse_one_line(main_list.read_text(errors="replace"))
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        for path in sorted(parts.iterdir()):
            if path.suffix == ".list":
                sources += parse_one_line(path.read_text(errors="replace"))
            elif path.suffix == ".sources":
                sources += parse_deb822(path.read_text(errors="replace"))
    return sources


def debian_mirror(suite: str = "bookworm", apt_dir: Path = APT_DIR) -> AptSource:
    """The source that serves `suite` itself with `main` (not -security or -updates), else deb.debian.org."""
    for source in machine_sources(apt_dir):
        if suite in source.suites and (not source.components or "main" in source.components):
            return source
    return AptSource(uri=DEFAULT_MIRROR, suites=(suite,), components=("main",))
