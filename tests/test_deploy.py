"""Deployment files: docker-compose.yml validates and serves every queue; Ansible parses."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workers.routing import all_queues

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
DEFAULT_TARGETS = ["qemu-x86_64", "qemu-ppc64le"]


def _compose(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "docker-compose"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_compose_file_validates():
    result = _compose("config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_compose_validation_rejects_a_broken_file(tmp_path):
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    with (tmp_path / "docker-compose.yml").open("a") as f:
        f.write("  oops:\n    image: redis:7\n    restart: sometimes\n")
    result = _compose("config", "--quiet", cwd=tmp_path)
    assert result.returncode != 0
    assert "restart" in result.stderr


@pytest.fixture(scope="module")
def compose_config() -> dict:
    result = _compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_has_the_designed_services(compose_config):
    assert {"postgres", "redis", "web", "beat"} <= set(compose_config["services"])


def test_every_queue_has_a_compose_worker(compose_config):
    served = []
    for service in compose_config["services"].values():
        command = service.get("command") or []
        if "worker" in command and "-Q" in command:
            served += command[command.index("-Q") + 1].split(",")
    assert sorted(served) == sorted(all_queues(DEFAULT_TARGETS))


def test_ansible_worker_playbook_parses():
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "--syntax-check", "playbooks/worker.yml"],
        cwd=ROOT / "ansible",
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
