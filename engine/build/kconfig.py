"""Kernel configuration: the arch base plus the benchmarks' fragments, merged and verified.

Kconfig silently drops a requested option whose dependencies are not met, so after
olddefconfig every requested option is checked against the final .config and a build
whose config lost one fails with the list, rather than booting a kernel that cannot run
the benchmark.
"""

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.build import safefile
from engine.build.arch import ArchProfile

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")

FRAGMENT_NAME = "rcubench.fragment"
_HZ_CHOICE = re.compile(r"^CONFIG_HZ_[1-9][0-9]*$")
MAX_CONFIG_BYTES = 16 * 2**20  # a real .config is ~100 KB


class ConfigError(ValueError):
    """A fragment line that is not `CONFIG_X=value` or `# CONFIG_X is not set`."""


@dataclass(frozen=True)
class Dropped:
    option: str
    requested: str
    got: str  # "n" when absent or "is not set"

    def __str__(self) -> str:
        return f"{self.option} (requested {self.requested}, got {self.got})"


class ConfigDropped(RuntimeError):
    def __init__(self, dropped: list[Dropped]) -> None:
        self.dropped = dropped
        super().__init__(
            f"{len(dropped)} requested Kconfig option(s) did not survive olddefconfig "
            f"(unmet dependencies): {', '.join(map(str, dropped))}"
        )


def parse(text: str) -> dict[str, str]:
    """Options a fragment or .config sets, in order; "n" for `# CONFIG_X is not set`."""
    options: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if m := _SET.match(line):
            options[m.group(1)] = m.group(2)
        elif m := _UNSET.match(line):
            options[m.group(1)] = "n"
        elif line and not line.startswith("#"):
            shown = raw if len(raw) <= 80 else f"{raw[:80]}..."
            raise ConfigError(f"line {number}: {shown!r} is not CONFIG_X=value")
    return options


def hz(options: dict[str, str]) -> int | None:
    """The tick rate a config sets (CONFIG_HZ, else the CONFIG_HZ_<n>=y choice); None when
    it sets neither: a jiffy's length is then unknown."""
    value = options.get("CONFIG_HZ", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    chosen = [k for k, v in options.items() if v == "y" and _HZ_CHOICE.match(k)]
    return int(chosen[-1].removeprefix("CONFIG_HZ_")) if chosen else None


def merge(arch: ArchProfile, fragments: Iterable[str]) -> str:
    """The arch base followed by each fragment line; later lines win, as in merge_config.sh."""
    options = parse(arch.base_fragment.read_text())
    for line in fragments:
        options.update(parse(line))
    return "".join(
        f"# {name} is not set\n" if value == "n" else f"{name}={value}\n"
        for name, value in options.items()
    )


def config_hash(arch: ArchProfile, merged: str) -> str:
    """Part of the build cache key: what was asked for, and how the config is started."""
    return hashlib.sha256(f"{arch.name}\n{arch.base_target}\n{merged}".encode()).hexdigest()


def dropped_options(requested: dict[str, str], final: dict[str, str]) -> list[Dropped]:
    dropped = []
    for name, want in requested.items():
        got = final.get(name, "n")
        if want == "n":
            if got not in ("n", ""):
                dropped.append(Dropped(name, "n", got))
        elif got != want:
            dropped.append(Dropped(name, want, got))
    return dropped


# Runs one command inside the build sandbox with the object dir as cwd; returns the status.
Step = Callable[[list[str]], int]


class ConfigStepFailed(RuntimeError):
    pass


def configure(
    step: Step,
    src: Path,
    obj: Path,
    arch: ArchProfile,
    merged: str,
    fragment: Path,
    read_from: Path | None = None,
) -> None:
    """Make obj/.config from `fragment` (holding `merged`, outside the object dir) inside
    the sandbox, and check that every requested option survived. `obj` is the path the
    steps see; `read_from` the host's path of the same directory, if it differs. The
    .config is the build's output: it is read without following a link, and a malformed
    one is a failure."""
    make = ["make", "-C", str(src), f"O={obj}", f"ARCH={arch.make_arch}", "-s"]
    if arch.cross_compile:
        make.append(f"CROSS_COMPILE={arch.cross_compile}")
    if arch.base_target == "tinyconfig":
        steps = [
            [*make, "tinyconfig"],
            [
                str(src / "scripts/kconfig/merge_config.sh"),
                "-m",
                "-O",
                str(obj),
                str(obj / ".config"),
                str(fragment),
            ],
            [*make, "olddefconfig"],
        ]
    else:  # merge_config.sh -n does exactly this, but writes its temp file into the source
        steps = [
            [*make, f"KCONFIG_ALLCONFIG={fragment}", arch.base_target],
            [*make, "olddefconfig"],
        ]
    for argv in steps:
        if step(argv) != 0:
            raise ConfigStepFailed(f"{Path(argv[0]).name} {argv[-1]} failed")
    try:
        final = parse(safefile.read_text((read_from or obj) / ".config", MAX_CONFIG_BYTES))
    except FileNotFoundError:
        raise ConfigStepFailed("the config step wrote no .config") from None
    except (safefile.UnsafeFile, ConfigError) as exc:
        raise ConfigStepFailed(f"the .config the config step wrote is unusable: {exc}") from None
    dropped = dropped_options(parse(merged), final)
    if dropped:
        raise ConfigDropped(dropped)
