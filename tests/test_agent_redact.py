"""Secrets never reach a trajectory file: environment values by name, known key shapes anywhere."""
from __future__ import annotations

import json

from skillgraft.agent.redact import REDACTED, redact, secret_values
from skillgraft.agent.trajectory import TrajectoryWriter, read_trajectory


def test_environment_secrets_are_found_by_name_and_short_flags_are_left_alone():
    env = {"OPENAI_API_KEY": "abcdefgh12345678", "MY_TOKEN": "tok-tok-tok-tok", "DB_PASSWORD": "hunter2hunter2",
           "USE_KEY_CACHE": "1", "HOME": "/root/very/long/path/name"}
    assert secret_values(env) == ["abcdefgh12345678", "tok-tok-tok-tok", "hunter2hunter2"]


def test_known_credential_shapes_are_redacted_wherever_they_appear():
    samples = ["sk-" + "A1b2" * 8, "sk-ant-api03-" + "x9" * 20, "ghp_" + "Z" * 36, "AKIA" + "ABCDEFGHIJKLMNOP",
               "hf_" + "q" * 34, "xoxb-1234567890-abcdef", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"]
    for sample in samples:
        assert redact(f"found <{sample}> in a file", secrets=[]) == f"found <{REDACTED}> in a file"
    assert redact("Authorization: Bearer abcdefghijklmnopqrstu", secrets=[]) == f"Authorization: Bearer {REDACTED}"
    assert redact("the word skeleton and sk-short stay", secrets=[]) == "the word skeleton and sk-short stay"


def test_planted_secret_never_reaches_the_file(tmp_path, monkeypatch):
    planted = "planted-secret-6f1c2a"
    monkeypatch.setenv("ACME_SERVICE_TOKEN", planted)
    path = tmp_path / "run.json"
    writer = TrajectoryWriter(path, {"task": {"id": "t"}, "note": [f"x{planted}y"]})
    writer.write([{"role": "user", "content": f"echo {planted}"},
                  {"role": "assistant", "content": "ok", "tool_calls": [{"function": {"arguments": json.dumps({"command": planted})}}]}])
    text = path.read_text()
    assert planted not in text and text.count(REDACTED) == 3
    doc = read_trajectory(path)
    assert doc["messages"][0]["content"] == f"echo {REDACTED}" and doc["info"]["note"] == [f"x{REDACTED}y"]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left behind
