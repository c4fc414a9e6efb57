"""`skillgraft sandbox build|reap|doctor` and the image import path, against the real engine."""
from __future__ import annotations

import json

import docker
import pytest
from typer.testing import CliRunner

from skillgraft.sandbox.image import IMAGE_TAG, import_rootfs, verify
from skillgraft.cli import app

runner = CliRunner()


@pytest.mark.docker
def test_build_if_missing_keeps_the_existing_image():
    result = runner.invoke(app, ["sandbox", "build", "--if-missing", "--json"])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output)
    assert outcome["tag"] == IMAGE_TAG and outcome["method"] == "existing"
    assert outcome["image_id"] == docker.from_env().images.get(IMAGE_TAG).id


def test_build_rejects_unknown_method():
    result = runner.invoke(app, ["sandbox", "build", "--method", "kaniko"])
    assert result.exit_code == 2
    assert "kaniko" in result.output


@pytest.mark.docker
def test_doctor_reports_every_check_and_is_ready():
    result = runner.invoke(app, ["sandbox", "doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    names = [check["name"] for check in report["checks"]]
    assert names == ["docker engine", "sandbox image", "sandbox disk limit", "bubblewrap", "debootstrap", "rootfs cache"]
    assert report["docker_ready"] and report["usable"]


def test_doctor_without_engine_says_how_to_start_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    result = runner.invoke(app, ["sandbox", "doctor", "--json"])
    report = json.loads(result.output)
    engine = report["checks"][0]
    assert not engine["ok"] and "dockerd" in engine["fix"]
    bwrap = next(check for check in report["checks"] if check["name"] == "bubblewrap")
    assert result.exit_code == (0 if bwrap["ok"] else 1)  # bwrap may still serve


@pytest.mark.docker
def test_reap_dry_run_lists_without_removing():
    result = runner.invoke(app, ["sandbox", "reap", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert all(not item["removed"] for item in json.loads(result.output))


@pytest.mark.docker
@pytest.mark.slow
def test_rootfs_tarball_imports_as_a_working_image(tmp_path):
    """The last step of the debootstrap path: a rootfs tar streamed into `docker import`.

    The rootfs here is the sandbox image's own filesystem exported, which stands in for a fresh
    debootstrap (minutes, and a mirror) while exercising the same import and checks.
    """
    client = docker.from_env()
    container = client.containers.create(IMAGE_TAG, ["true"], network_mode="none")
    tarball = tmp_path / "rootfs.tar"
    try:
        with tarball.open("wb") as sink:
            for chunk in container.export():
                sink.write(chunk)
    finally:
        container.remove(force=True)
    tag = "skillgraft-sandbox:import-test"
    try:
        image_id = import_rootfs(client, tarball, tag, report=lambda message: None)
        verify(client, tag)
        config = client.images.get(tag).attrs["Config"]
        assert config["WorkingDir"] == "/repo" and config["Cmd"] == ["sleep", "infinity"]
        assert image_id.startswith("sha256:")
    finally:
        client.images.remove(tag, force=True)
