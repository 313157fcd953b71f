"""Patch series: parse an mbox and apply it on a checkout with `git am`.

A failure names the patch (index, subject), the file and hunk that did not apply, and git's
own output. The 3-way and fuzz fallbacks run only when asked for, and the result says which
way the series applied.
"""

import email.policy
import mailbox
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import getaddresses
from pathlib import Path

from workers.build.git import run_git

_SUBJECT_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)+")
_NUMBERING = re.compile(r"\b(\d+)/(\d+)\]")
_FAILED_AT = re.compile(r"^error: patch failed: (?P<file>.+):(?P<line>\d+)$", re.M)
_NOT_APPLY = re.compile(
    r"^error: (?P<file>.+): (?P<why>patch does not apply|does not exist in index"
    r"|already exists in working directory)$",
    re.M,
)


class SeriesError(ValueError):
    """The mbox is not a usable patch series (empty, garbled, no diffs)."""


@dataclass(frozen=True)
class Patch:
    index: int  # 1-based position among the patches (cover letter excluded)
    subject: str  # without the [PATCH ...] prefix
    author: str
    message_id: str
    diff: str
    raw: bytes  # the message as an mbox entry ("From " line included), fed to git am


@dataclass(frozen=True)
class Series:
    patches: tuple[Patch, ...]
    subject: str  # cover letter subject, or the first patch's
    message_id: str
    author: str


@dataclass
class PatchFailed(Exception):
    """A patch of the series did not apply."""

    index: int
    subject: str
    file: str
    hunk: str
    tried: list[str]
    output: str

    def __str__(self) -> str:
        where = f"{self.file}, {self.hunk}" if self.file else "(no file reported)"
        return (
            f"patch {self.index} ({self.subject!r}) does not apply: {where}; "
            f"tried {', '.join(self.tried)}"
        )


@dataclass(frozen=True)
class Applied:
    sha: str
    method: str  # "git am", "git am -3" or "patch -F3"
    notes: list[str] = field(default_factory=list)


def parse_mbox(data: bytes) -> Series:
    """Read a git format-patch / send-email mbox; the cover letter (no diff) is skipped."""
    if not data.strip():
        raise SeriesError("the mbox is empty")
    if not data.startswith(b"From "):
        raise SeriesError("not an mbox: it does not start with a 'From ' line")
    with tempfile.NamedTemporaryFile(suffix=".mbox") as f:
        f.write(data)
        f.flush()
        box = mailbox.mbox(f.name, factory=None, create=False)
        raws = [box.get_bytes(key, from_=True) for key in box.iterkeys()]
    messages = [email.message_from_bytes(raw, policy=email.policy.default) for raw in raws]
    patches: list[Patch] = []
    cover: EmailMessage | None = None
    for raw, msg in zip(raws, messages, strict=True):
        body = _body(msg)
        if re.search(r"^diff --git |^--- a/", body, re.M):
            patches.append(
                Patch(
                    index=len(patches) + 1,
                    subject=_clean_subject(str(msg["Subject"] or "")),
                    author=_author(msg),
                    message_id=str(msg["Message-Id"] or "").strip(),
                    diff=body,
                    raw=raw if raw.endswith(b"\n") else raw + b"\n",
                )
            )
        elif cover is None and _NUMBERING.search(str(msg["Subject"] or "")):
            cover = msg
    if not patches:
        raise SeriesError(f"the mbox has {len(messages)} message(s) but no patch (no diff)")
    head = cover or messages[0]
    return Series(
        patches=tuple(patches),
        subject=str(head["Subject"] or patches[0].subject).strip(),
        message_id=str(head["Message-Id"] or "").strip(),
        author=_author(head),
    )


def _body(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",)) or msg
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload.decode(part.get_content_charset() or "utf-8", "replace")
    return str(part.get_payload())


def _clean_subject(subject: str) -> str:
    return _SUBJECT_PREFIX.sub("", " ".join(subject.split()))


def _author(msg: EmailMessage) -> str:
    addresses = getaddresses([str(msg["From"] or "")])
    name, addr = addresses[0] if addresses else ("", "")
    return f"{name} <{addr}>" if name else addr


def apply_series(checkout: Path, series: Series, *, fallback: bool) -> Applied:
    """Apply every patch of the series on the checkout's HEAD and return the new HEAD.

    Without `fallback` only a clean `git am` is accepted. With it, a failed `git am` is
    retried with `git am -3`, then patch by patch with `patch -F3` (fuzz). The commit dates
    are the patches' author dates so the same series on the same base gives the same sha.
    """
    base = _head(checkout)
    with tempfile.NamedTemporaryFile(suffix=".mbox") as f:
        # Only the patches: git am stops at a cover letter ("Patch is empty").
        f.write(b"".join(p.raw for p in series.patches))
        f.flush()
        tried = ["git am"]
        failure = _am(checkout, Path(f.name), [])
        if failure is None:
            return Applied(_head(checkout), "git am")
        if not fallback:
            raise _describe(failure, series, tried)
        _reset(checkout, base)
        tried.append("git am -3")
        if _am(checkout, Path(f.name), ["-3"]) is None:
            return Applied(_head(checkout), "git am -3")
        _reset(checkout, base)
        tried.append("patch -F3")
        return _apply_with_fuzz(checkout, Path(f.name), series, base, tried)


def _am(checkout: Path, mbox: Path, extra: list[str]) -> str | None:
    result = run_git(
        ["am", "--quiet", "--committer-date-is-author-date", *extra, str(mbox)],
        cwd=checkout,
        check=False,
    )
    return None if result.returncode == 0 else result.stdout + result.stderr


def _apply_with_fuzz(
    checkout: Path, mbox: Path, series: Series, base: str, tried: list[str]
) -> Applied:
    notes = []
    failure = _am(checkout, mbox, [])
    while failure is not None:
        index = _current_patch(checkout)
        patch = series.patches[index - 1]
        result = subprocess.run(
            ["patch", "-p1", "-F3", "--no-backup-if-mismatch", "--batch", "--reject-file=-"],
            cwd=checkout,
            input=patch.diff,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            output = failure + "\n--- patch -F3 ---\n" + result.stdout + result.stderr
            _reset(checkout, base)
            raise _describe(output, series, tried, index=index)
        notes.append(f"patch {index} applied with fuzz: {result.stdout.strip()}")
        run_git(["add", "--all", "--", "."], cwd=checkout)
        cont = run_git(["am", "--continue"], cwd=checkout, check=False)
        failure = None if cont.returncode == 0 else cont.stdout + cont.stderr
    return Applied(_head(checkout), "patch -F3", notes)


def _current_patch(checkout: Path) -> int:
    git_dir = Path(run_git(["rev-parse", "--absolute-git-dir"], cwd=checkout).stdout.strip())
    return int((git_dir / "rebase-apply" / "next").read_text())


def _describe(output: str, series: Series, tried: list[str], index: int = 0) -> PatchFailed:
    if not index:
        m = re.search(r"Patch failed at (\d+)", output)
        index = int(m.group(1)) if m else 0
    if 0 < index <= len(series.patches):
        subject = series.patches[index - 1].subject
    else:  # git stopped before naming a patch: its first line says why
        subject = output.strip().splitlines()[0] if output.strip() else "(no output from git)"
    file, hunk = "", ""
    if m := _FAILED_AT.search(output):
        file = m.group("file")
        hunk = _hunk_at(series, index, file, int(m.group("line")))
    elif m := _NOT_APPLY.search(output):
        file, hunk = m.group("file"), m.group("why")
    return PatchFailed(index, subject, file, hunk, tried, output.strip())


def _hunk_at(series: Series, index: int, file: str, line: int) -> str:
    """'hunk #k (@@ -L,N +L,N @@)' for the hunk of `file` starting at old line `line`."""
    if not 0 < index <= len(series.patches):
        return f"hunk at line {line}"
    in_file, k = False, 0
    for text in series.patches[index - 1].diff.splitlines():
        if text.startswith("diff --git "):
            in_file = text.endswith(f" b/{file}")
            k = 0
        elif in_file and text.startswith("@@ "):
            k += 1
            m = re.match(r"@@ -(\d+)", text)
            if m and int(m.group(1)) == line:
                return f"hunk #{k} ({text.split(' @@')[0]} @@)"
    return f"hunk at line {line}"


def _head(checkout: Path) -> str:
    return run_git(["rev-parse", "HEAD"], cwd=checkout).stdout.strip()


def _reset(checkout: Path, base: str) -> None:
    run_git(["am", "--abort"], cwd=checkout, check=False)
    run_git(["reset", "--quiet", "--hard", base], cwd=checkout)
