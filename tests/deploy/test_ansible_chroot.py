"""The Ansible roles applied for real (issue 20): a Debian 12 debootstrap chroot per host,
reached with community.general's chroot connection (from the pinned `ansible` package).
`playbooks/worker.yml` makes one a worker for build, bench.qemu-x86_64 and bench.lab-standin;
`playbooks/lab_host.yml` makes the other a lab host. Secrets come from a vault encrypted here
with a throwaway password. The second run of each playbook changes nothing, and the tasks that
need a running init (or a root of its own) are skipped, their names saying why. ansible-lint
passes on ansible/.

Nothing is mounted into the chroots. The .debs are cached across runs under
/var/lib/rcubench/debootstrap-cache (debootstrap's --cache-dir, and apt-archives/ for what the
roles install), so a second run of this file does not download them again."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # tests/deploy/ -> the repository
ANSIBLE_DIR = ROOT / "ansible"
VENV_BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("RCUBENCH_DEBOOTSTRAP_CACHE", "/var/lib/rcubench/debootstrap-cache"))
APT_CACHE = CACHE / "apt-archives"
MIRROR = os.environ.get("RCUBENCH_DEBIAN_MIRROR", "http://deb.debian.org/debian")
WORKER_QUEUES = ["build", "bench.qemu-x86_64", "bench.lab-standin"]
WORKER_SERVE = "qemu-x86_64,lab-standin"
# Set to 0 to skip the virtualenv (pip from PyPI inside the chroot).
WITH_VENV = os.environ.get("RCUBENCH_ANSIBLE_TEST_VENV", "1") != "0"
# A directory to keep the playbooks' outputs in (for reading what they did).
KEEP_LOGS = os.environ.get("RCUBENCH_ANSIBLE_TEST_LOGS")

# Tasks skipped in a chroot, and the words of their names that say why.
NO_INIT_TASKS = {
    "rcubench_worker : Start libvirtd": "needs a running init",
    "rcubench_worker : Start the worker": "needs a running init",
    "rcubench_worker : Restart rcubench worker": "needs a running init",
    "rcubench_worker : Check that builds can be sandboxed": "skipped in a chroot",
    "rcubench_lab_host : Start sshd": "needs a running init",
}


def _chroot_test(test):
    """Only as root with debootstrap (ansible-lint needs neither)."""
    test = pytest.mark.skipif(shutil.which("debootstrap") is None, reason="no debootstrap")(test)
    return pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap and chroot need root")(test)


def _log(message: str) -> None:
    print(f"test_ansible_chroot: {message}", file=sys.stderr, flush=True)


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{argv}: {result.stdout[-4000:]}{result.stderr[-4000:]}"
    return result


def _link_debs(src: Path, dst: Path) -> int:
    """Hard-link (or copy, across file systems) the .debs of src missing from dst."""
    dst.mkdir(parents=True, exist_ok=True)
    count = 0
    for deb in src.glob("*.deb"):
        target = dst / deb.name
        if target.exists():
            continue
        try:
            os.link(deb, target)
        except OSError:
            shutil.copy2(deb, target)
        count += 1
    return count


def _mounts_under(path: Path) -> list[str]:
    with open("/proc/mounts") as f:
        points = [line.split()[1] for line in f]
    prefix = str(path.resolve()) + "/"
    return [p for p in points if p.startswith(prefix)]


def _recap(output: str) -> dict[str, int]:
    match = re.search(r"PLAY RECAP \*+\n(.*?)$", output, re.S)
    assert match, output[-4000:]
    counts: dict[str, int] = {}
    for key, value in re.findall(r"(\w+)=(\d+)", match.group(1)):
        counts[key] = counts.get(key, 0) + int(value)
    return counts


def _task_results(output: str, name: str) -> list[str]:
    """The result lines (ok/changed/skipping/failed...) under every TASK/RUNNING HANDLER
    header whose name starts with `name`."""
    results: list[str] = []
    for block in re.split(r"\n(?=(?:TASK|RUNNING HANDLER) \[)", output):
        header = block.split("\n", 1)[0]
        if re.match(r"(?:TASK|RUNNING HANDLER) \[" + re.escape(name), header):
            results += [
                line
                for line in block.split("\n")[1:]
                if re.match(r"(ok|changed|skipping|failed|fatal): ", line)
            ]
    return results


@dataclass
class Applied:
    worker: Path
    lab: Path
    runner_pubkey: str
    outputs: dict[str, list[str]] = field(default_factory=dict)  # playbook -> [run 1, run 2]
    seconds: dict[str, float] = field(default_factory=dict)


def _inventory(tmp: Path, worker: Path, lab: Path, version: str, pubkey: str, key: str) -> Path:
    inv = tmp / "inventory"
    (inv / "group_vars" / "all").mkdir(parents=True)
    venv = "true" if WITH_VENV else "false"
    (inv / "hosts.yml").write_text(
        f"""all:
  vars:
    ansible_connection: community.general.chroot
    ansible_python_interpreter: /usr/bin/python3
    # No sudo in a minbase chroot; su from root asks for no password.
    ansible_become_method: ansible.builtin.su
    rcubench_no_init: true
    rcubench_chroot: true
    rcubench_repo: file:///srv/rcubench.git
    rcubench_version: {version}
    rcubench_venv: {venv}
  children:
    vm_hosts:
      hosts:
        worker:
          ansible_host: {worker}
          rcubench_queues: {WORKER_QUEUES}
          rcubench_serve: "{WORKER_SERVE}"
    build_hosts:
    lab_workers:
    lab_hosts:
      hosts:
        labhost:
          ansible_host: {lab}
"""
    )
    (inv / "group_vars" / "all" / "main.yml").write_text(
        """rcubench_database_url: >-
  postgres://rcubench:{{ vault_db_password }}@db.invalid:5432/rcubench
rcubench_broker_url: "redis://:{{ vault_broker_password }}@broker.invalid:6379/0"
rcubench_secret_key: "{{ vault_secret_key }}"
rcubench_lab_runner_key: "{{ vault_lab_runner_key }}"
"""
        + f"rcubench_runner_pubkey: {pubkey}\n"
    )
    plain = tmp / "vault-plain.yml"
    indented = "".join("  " + line + "\n" for line in key.strip().splitlines())
    plain.write_text(
        "vault_db_password: db-Secret-1\n"
        "vault_broker_password: broker-Secret-2\n"
        "vault_secret_key: " + "s" * 50 + "\n"
        "vault_lab_runner_key: |\n" + indented
    )
    _run(
        [
            str(VENV_BIN / "ansible-vault"),
            "encrypt",
            "--vault-password-file",
            str(tmp / "vault-password"),
            "--output",
            str(inv / "group_vars" / "all" / "vault.yml"),
            str(plain),
        ]
    )
    plain.unlink()
    return inv


def _playbook(playbook: str, inv: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        # Seconds per task, for the logs (RCUBENCH_ANSIBLE_TEST_LOGS).
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    return subprocess.run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            str(inv),
            "--vault-password-file",
            str(tmp / "vault-password"),
            playbook,
        ],
        cwd=ANSIBLE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def applied() -> Iterator[Applied]:
    tmp = Path(tempfile.mkdtemp(prefix="rcubench-ansible-", dir="/var/tmp"))
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        worker, lab = tmp / "worker", tmp / "labhost"
        started = time.monotonic()
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--cache-dir={CACHE}",
                "--include=python3,python3-apt,ca-certificates",
                "bookworm",
                str(worker),
                MIRROR,
            ]
        )
        debootstrap_seconds = time.monotonic() - started
        _log(f"debootstrap {debootstrap_seconds:.0f} s")
        # Package scripts must not start daemons: a chroot shares the host's network and
        # processes (the usual policy-rc.d of a build root; the roles skip starting them).
        policy = worker / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        # This machine reaches PyPI through a TLS-intercepting egress proxy: its local CAs go
        # into the chroot's bundle too (the controller's PIP_CERT etc. name that bundle).
        local_cas = list(Path("/usr/local/share/ca-certificates").glob("*.crt"))
        for ca in local_cas:
            shutil.copy(ca, worker / "usr/local/share/ca-certificates" / ca.name)
        if local_cas:
            _run(["chroot", str(worker), "update-ca-certificates"])
        _run(["cp", "-a", str(worker), str(lab)])
        # The checkout: a bare clone of this repository's HEAD, reached as a file:// URL.
        _run(
            [
                "git",
                "clone",
                "--quiet",
                "--bare",
                "--no-hardlinks",
                str(ROOT),
                str(worker / "srv/rcubench.git"),
            ]
        )
        version = _run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).stdout.strip()
        _link_debs(APT_CACHE, worker / "var/cache/apt/archives")
        _link_debs(APT_CACHE, lab / "var/cache/apt/archives")

        keyfile = tmp / "runner_key"
        _run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "rcubench-lab-runner",
                "-f",
                str(keyfile),
            ]
        )
        pubkey = keyfile.with_suffix(".pub").read_text().strip()
        (tmp / "vault-password").write_text(os.urandom(16).hex() + "\n")
        inv = _inventory(tmp, worker, lab, version, pubkey, keyfile.read_text())

        result = Applied(worker=worker, lab=lab, runner_pubkey=pubkey)
        result.seconds["debootstrap"] = debootstrap_seconds
        for playbook in ("playbooks/worker.yml", "playbooks/lab_host.yml"):
            runs = []
            for attempt in (1, 2):
                started = time.monotonic()
                run = _playbook(playbook, inv, tmp)
                seconds = time.monotonic() - started
                result.seconds[f"{playbook} run {attempt}"] = seconds
                _log(f"{playbook} run {attempt}: {seconds:.0f} s, rc {run.returncode}")
                if attempt == 1:  # keep what the roles downloaded for the next test run
                    _link_debs(worker / "var/cache/apt/archives", APT_CACHE)
                    _link_debs(lab / "var/cache/apt/archives", APT_CACHE)
                if KEEP_LOGS:
                    Path(KEEP_LOGS).mkdir(parents=True, exist_ok=True)
                    name = f"{Path(playbook).stem}-{attempt}.log"
                    (Path(KEEP_LOGS) / name).write_text(run.stdout + run.stderr)
                assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
                _log(f"{playbook} run {attempt}: {_recap(run.stdout)}")
                runs.append(run.stdout)
            result.outputs[playbook] = runs
        yield result
    finally:
        mounted = _mounts_under(tmp)
        assert not mounted, f"left mounted under {tmp}, not removing it: {mounted}"
        shutil.rmtree(tmp, ignore_errors=True)


@_chroot_test
@pytest.mark.parametrize("playbook", ["playbooks/worker.yml", "playbooks/lab_host.yml"])
def test_second_run_changes_nothing(applied, playbook):
    first, second = applied.outputs[playbook]
    assert _recap(first)["changed"] > 0, first[-4000:]
    recap = _recap(second)
    assert recap["changed"] == 0, second[-8000:]
    assert recap["failed"] == 0
    assert recap["unreachable"] == 0


@_chroot_test
def test_tasks_needing_init_are_skipped_and_say_why(applied):
    output = "".join(run for runs in applied.outputs.values() for run in runs)
    for name, reason in NO_INIT_TASKS.items():
        header = re.search(r"(?:TASK|RUNNING HANDLER) \[" + re.escape(name) + r"[^\]]*\]", output)
        assert header, f"no task {name!r}"
        assert reason in header.group(0), header.group(0)
        results = _task_results(output, name)
        assert results, name
        assert all(r.startswith("skipping") for r in results), (name, results)


@_chroot_test
def test_worker_effects(applied):
    root = applied.worker
    passwd = (root / "etc/passwd").read_text()
    assert re.search(r"^rcubench:x:\d+:\d+:[^:]*:/var/lib/rcubench:", passwd, re.M), passwd
    group = (root / "etc/group").read_text()
    for name in ("libvirt", "kvm"):
        assert re.search(rf"^{name}:x:\d+:.*\brcubench\b", group, re.M), group

    env_file = root / "etc/rcubench.env"
    assert env_file.stat().st_mode & 0o777 == 0o640
    env = env_file.read_text()
    assert f"RCUBENCH_SERVE={WORKER_SERVE}\n" in env
    assert "DATABASE_URL=postgres://rcubench:db-Secret-1@db.invalid:5432/rcubench\n" in env

    unit = (root / "etc/systemd/system/rcubench-worker.service").read_text()
    assert f"-Q {','.join(WORKER_QUEUES)} " in unit
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "rcubench-worker.service").is_symlink()

    key = root / "etc/rcubench/lab_runner_key"
    user = re.search(r"^rcubench:x:(\d+):", passwd, re.M)
    assert user, passwd
    uid = int(user.group(1))
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.stat().st_uid == uid
    assert key.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    for tool in ("socat", "ipmitool", "bwrap", "qemu-system-x86_64", "ccache", "git"):
        assert (root / "usr/bin" / tool).exists(), tool

    assert (root / "opt/rcubench/workers/celery_app.py").exists()
    if WITH_VENV:
        assert (root / "opt/rcubench/.venv/bin/celery").exists()


@_chroot_test
def test_lab_host_effects(applied):
    root = applied.lab
    assert re.search(r"^LOAD_KEXEC=false$", (root / "etc/default/kexec").read_text(), re.M)
    assert (root / "usr/sbin/kexec").exists()
    assert (root / "usr/sbin/sshd").exists()
    # Kernels are staged on the host's tmpfs per run, never on its disk (docs/lab.md).
    assert not (root / "var/lib/rcubench-lab").exists()
    authorized = (root / "root/.ssh/authorized_keys").read_text()
    assert applied.runner_pubkey in authorized


def test_ansible_lint_is_clean():
    result = subprocess.run(
        [str(VENV_BIN / "ansible-lint"), "--nocolor"],
        cwd=ANSIBLE_DIR,
        env={**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
