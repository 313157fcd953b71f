"""The default kernel tree (imported by scripts/setup.sh) as a mirror and a checkout."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.build.git import ensure_mirror, resolve, run_git

FIXTURES = Path(__file__).parent / "fixtures"
DEFAULT_TREE = (
    Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench")) / "trees/linux-6.12.git"
)
BASE_TAG = "v6.12.117-debian"


@pytest.fixture(scope="session")
def kernel_mirror(tmp_path_factory) -> Path:
    assert (DEFAULT_TREE / "HEAD").exists(), f"{DEFAULT_TREE} missing: run scripts/setup.sh"
    return ensure_mirror(tmp_path_factory.mktemp("mirrors"), str(DEFAULT_TREE), allow_local=True)


@pytest.fixture(scope="session")
def base_sha(kernel_mirror) -> str:
    return resolve(kernel_mirror, BASE_TAG)


@pytest.fixture(scope="session")
def _checkout(kernel_mirror, base_sha, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("checkout") / "linux"
    run_git(["clone", "--quiet", "--shared", "--no-checkout", "--", str(kernel_mirror), str(path)])
    run_git(["checkout", "--quiet", "--detach", base_sha], cwd=path)
    return path


@pytest.fixture
def checkout(_checkout, base_sha) -> Iterator[Path]:
    """The shared checkout at the base sha, reset again after each test."""
    yield _checkout
    run_git(["am", "--abort"], cwd=_checkout, check=False)
    run_git(["reset", "--quiet", "--hard", base_sha], cwd=_checkout)
    run_git(["clean", "-qfdx"], cwd=_checkout)
    shutil.rmtree(_checkout / ".git" / "rebase-apply", ignore_errors=True)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory the unprivileged build user can reach (pytest's tmp dirs are root's)."""
    path = Path(tempfile.mkdtemp(prefix="rcubench-scratch-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
