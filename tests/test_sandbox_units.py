"""Parts of the sandbox that need no engine: apt sources, output capping, copy-in, error messages."""
from __future__ import annotations

import tarfile
import textwrap

import pytest

from skillgraft.sandbox.apt_sources import debian_mirror, parse_deb822, parse_one_line
from skillgraft.sandbox.base import SandboxError, SandboxUnavailable, open_sandbox
from skillgraft.sandbox.copy_in import repo_tarball
from skillgraft.sandbox.docker_backend import DockerSandbox
from skillgraft.sandbox.exec_server import OutputCap
from skillgraft.sandbox.base import parse_bytes


def test_deb822_sources_skip_disabled_and_keep_signed_by():
    text = textwrap.dedent(
        """\
        # a comment
        Types: deb deb-src
        URIs: http://mirror.example/debian http://second.example/debian/
        Suites: bookworm bookworm-updates
        Components: main contrib
        Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

        Types: deb
        Enabled: no
        URIs: http://off.example/debian
        Suites: bookworm
        Components: main

        Types: deb-src
        URIs: http://src-only.example/debian
        Suites: bookworm
        Components: main
        """
    )
    sources = parse_deb822(text)
    assert [s.uri for s in sources] == ["http://mirror.example/debian", "http://second.example/debian"]
    assert sources[0].suites == ("bookworm", "bookworm-updates")
    assert sources[0].signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg"


def test_one_line_sources_with_options():
    text = "deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main non-free # tail\n#deb http://x y z\ndeb-src http://s bookworm main\n"
    (source,) = parse_one_line(text)
    assert source.uri == "http://m.example/debian"
    assert source.suites == ("bookworm",) and source.components == ("main", "non-free")
    assert source.signed_by == "/k.gpg"


def test_mirror_is_the_one_serving_the_suite_itself(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb http://security.example/debian-security bookworm-security main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://snapshot.example/archive/debian/20250520T000000Z\nSuites: bookworm\nComponents: main\n"
    )
    (tmp_path / "sources.list.d" / "other.list.disabled").write_text("deb http://ignored.example bookworm main\n")
    assert debian_mirror("bookworm", tmp_path).uri == "http://snapshot.example/archive/debian/20250520T000000Z"
    assert debian_mirror("trixie", tmp_path).uri == "http://deb.debian.org/debian"


def test_output_cap_keeps_head_and_tail_and_counts_the_rest():
    cap = OutputCap(10)
    for chunk in (b"abcdefgh", b"ijklmnop", b"qrstuvwxyz"):
        cap.feed(chunk)
    text, elided = cap.result()
    assert elided == 16
    assert text == "abcde\n[... 16 characters elided ...]\nvwxyz"


def test_output_cap_short_output_is_untouched_and_utf8_split_across_chunks():
    cap = OutputCap(100)
    data = "héllo wörld ✓".encode()
    for i in range(len(data)):
        cap.feed(data[i : i + 1])
    assert cap.result() == ("héllo wörld ✓", 0)


def test_repo_tarball_owns_everything_by_the_agent(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "link").symlink_to("pkg/mod.py")
    stream = repo_tarball(tmp_path, "repo", 1000, {"opt/tool.py": b"print(1)\n"})
    with tarfile.open(fileobj=stream) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert {"repo", "repo/pkg", "repo/pkg/mod.py", "repo/link", "opt/tool.py"} <= set(members)
    assert all(m.uid == 1000 for name, m in members.items() if name.startswith("repo"))
    assert members["repo"].mode & 0o755 == 0o755
    assert members["repo/link"].issym() and members["repo/link"].linkname == "pkg/mod.py"
    assert members["opt/tool.py"].uid == 0


def test_memory_sizes_parse_like_docker():
    assert parse_bytes("512m") == 512 * 2**20
    assert parse_bytes("1g") == 2**30
    assert parse_bytes("1.5G") == int(1.5 * 2**30)
    assert parse_bytes("2048") == 2048


def test_unreachable_engine_says_how_to_start_it_or_use_bwrap(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SandboxUnavailable) as raised:
        DockerSandbox(tmp_path, None)
    message = str(raised.value)
    assert "dockerd" in message and "--sandbox bwrap" in message


def test_unknown_backend_is_refused(tmp_path):
    with pytest.raises(SandboxError, match="choose 'docker' or 'bwrap'"):
        open_sandbox("podman", tmp_path)
