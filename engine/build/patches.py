"""Patch series: parse an mbox and apply it on a checkout with `git am`.

A failure names the patch (index, subject), the file and hunk that did not apply, and git's
own output. The 3-way and fuzz fallbacks run only when asked for, and the result says which
way the series applied.
"""

import email.policy
import mailbox
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import getaddresses
from pathlib import Path

from engine.build.git import Checkout, scratch_index
from engine.build.sandbox import DEFAULT_BUILD_USER, Limits, Sandbox, StepTimeout

_SUBJECT_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)+")
_NUMBERING = re.compile(r"\b(\d+)/(\d+)\]")
_FAILED_AT = re.compile(r"^error: patch failed: (?P<file>.+):(?P<line>\d+)$", re.M)
_NOT_APPLY = re.compile(
    r"^error: (?P<file>.+): (?P<why>patch does not apply|does not exist in index"
    r"|already exists in working directory)$",
    re.M,
)
# Subjects, authors and message ids are stored and reach mail headers: white space and
# control characters (CR/LF decoded from an RFC 2047 encoded word, NUL) become one space.
_NOT_ONE_LINE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")


class SeriesError(ValueError):
    """The mbox is not a usable patch series (empty, garbled, no diffs, too many patches, a
    body in an unknown charset)."""


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


def parse_mbox(data: bytes, *, max_patches: int | None = None) -> Series:
    """Read a git format-patch / send-email mbox; the cover letter (no diff) is skipped.

    More than `max_patches` patches are refused, counted before the mbox is parsed. Every
    subject, author and message id comes out as one line (`_one_line`). A body in a charset
    Python does not know is refused: a patch that cannot be decoded cannot be trusted to
    apply.
    """
    if not data.strip():
        raise SeriesError("the mbox is empty")
    if not data.startswith(b"From "):
        raise SeriesError("not an mbox: it does not start with a 'From ' line")
    if max_patches is not None:
        # Each line starting "From " begins a message, as mailbox splits them: counting them
        # is cheap, while parsing 200k messages took 19 s.
        count = data.count(b"\nFrom ") + 1
        if count > max_patches + 1:  # the patches and a cover letter
            raise SeriesError(
                f"the mbox has {count} messages; a series may have at most {max_patches} "
                "patches (and a cover letter)"
            )
    with tempfile.NamedTemporaryFile(suffix=".mbox") as f:
        f.write(data)
        f.flush()
        box = mailbox.mbox(f.name, factory=None, create=False)
        raws = [box.get_bytes(key, from_=True) for key in box.iterkeys()]
    messages = [_read_message(n, raw) for n, raw in enumerate(raws, 1)]
    patches: list[Patch] = []
    cover: _Message | None = None
    for m in messages:
        if re.search(r"^diff --git |^--- a/", m.body, re.M):
            patches.append(
                Patch(
                    index=len(patches) + 1,
                    subject=_clean_subject(m.subject),
                    author=m.author,
                    message_id=m.message_id,
                    diff=m.body,
                    raw=m.raw if m.raw.endswith(b"\n") else m.raw + b"\n",
                )
            )
        elif cover is None and _NUMBERING.search(m.subject):
            cover = m
    if not patches:
        raise SeriesError(f"the mbox has {len(messages)} message(s) but no patch (no diff)")
    if max_patches is not None and len(patches) > max_patches:
        raise SeriesError(f"the series has {len(patches)} patches; the limit is {max_patches}")
    head = cover or messages[0]
    return Series(
        patches=tuple(patches),
        subject=head.subject or patches[0].subject,
        message_id=head.message_id,
        author=head.author,
    )


@dataclass(frozen=True)
class _Message:
    raw: bytes
    subject: str
    author: str
    message_id: str
    body: str


def _read_message(n: int, raw: bytes) -> _Message:
    """The `n`th message of the mbox; a SeriesError names it."""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    try:
        return _Message(raw, _header(msg, "Subject"), _author(msg), _header(msg, "Message-Id"),
                        _body(msg))  # fmt: skip
    except SeriesError as exc:
        raise SeriesError(f"message {n} of the mbox: {exc}") from None


def _header(msg: EmailMessage, name: str) -> str:
    """The header's decoded value on one line ('' when absent)."""
    try:
        value = msg[name]
    except (ValueError, LookupError) as exc:  # the stdlib refuses, e.g., CR/LF in an address
        raise SeriesError(f"its {name} header cannot be read: {exc}") from None
    return _one_line(str(value or ""))


def _one_line(text: str) -> str:
    return _NOT_ONE_LINE.sub(" ", text).strip()


def _body(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",)) or msg
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        charset = part.get_content_charset() or "utf-8"
        try:
            return payload.decode(charset, "replace")
        except (LookupError, UnicodeError):  # unknown, or not a text codec (rot13, undefined)
            raise SeriesError(
                f"its body is in an unknown charset {charset!r}; a patch that cannot be "
                "decoded cannot be trusted to apply"
            ) from None
    return str(part.get_payload())


def _clean_subject(subject: str) -> str:
    return _SUBJECT_PREFIX.sub("", _one_line(subject))


def _author(msg: EmailMessage) -> str:
    addresses = getaddresses([_header(msg, "From")])
    name, addr = addresses[0] if addresses else ("", "")
    return f"{name} <{addr}>" if name else addr


class PatchRefused(PatchFailed):
    """A patch names a path rcubench never lets a patch touch (.git, outside the tree, a
    symlink): refused before anything is applied."""

    def __str__(self) -> str:
        return f"patch {self.index} ({self.subject!r}) is refused: {self.file}: {self.hunk}"


@dataclass(frozen=True)
class FuzzSandbox:
    """Where and as whom `patch -F3` runs: on throwaway copies under `scratch`, in the
    build sandbox, never on the worktree itself."""

    scratch: Path
    user: str | None = DEFAULT_BUILD_USER
    limits: Limits = field(default_factory=Limits)
    timeout: float = 120.0


_DIFF_GIT = re.compile(r"^diff --git (.+)$", re.M)
_NAMED = re.compile(r"^(?:--- |\+\+\+ |(?:rename|copy) (?:from|to) )(.+)$", re.M)
_MODE = re.compile(
    r"^(?:new file mode|new mode|index [0-9a-f]+\.\.[0-9a-f]+) (?P<mode>120000|160000)$", re.M
)
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def touched_paths(patch: Patch) -> list[str]:
    """The tree paths `patch` names (p1: without the a/ or b/), after refusing what no
    patch may do here: a path in .git, an absolute path or one with '..', a symlink or
    submodule. Over-inclusive on purpose: any header-like line counts."""
    names: list[str] = []
    for line in _DIFF_GIT.findall(patch.diff):
        names += _header_names(line)
    for raw in _NAMED.findall(patch.diff):
        raw = raw.split("\t", 1)[0]
        names.append(_unquote(raw[1:-1]) if raw.startswith('"') and raw.endswith('"') else raw)
    paths: list[str] = []
    for name in names:
        name = name.strip()
        if name in ("/dev/null", ""):
            continue
        if name.startswith("/"):
            raise _refused(patch, name, "an absolute path, outside the tree")
        parts = name.split("/")
        path = "/".join(parts[1:]) if len(parts) > 1 else name  # -p1, as git am and patch
        if any(p == ".." for p in parts):
            raise _refused(patch, path, "a path with '..', outside the tree")
        if any(p.lower() == ".git" for p in parts):
            raise _refused(patch, path, "a path inside .git")
        paths.append(path)
    if m := _MODE.search(patch.diff):
        kind = "a symbolic link" if m.group("mode") == "120000" else "a submodule"
        last = _DIFF_GIT.findall(patch.diff[: m.start()])
        name = _header_names(last[-1])[-1].split("/", 1)[-1] if last else "(unnamed file)"
        raise _refused(patch, name, f"it makes {kind}")
    return sorted(set(paths))


def _header_names(line: str) -> list[str]:
    """The two names of a `diff --git` line (a/..., b/...), quoted or not."""
    if quoted := _QUOTED.findall(line):
        return [_unquote(q) for q in quoted]
    old, sep, new = line.partition(" b/")
    return [old, f"b/{new}"] if sep else [line]


def _unquote(text: str) -> str:
    """A path as git quotes it (C escapes, octal bytes) as text."""
    out = bytearray()
    i = 0
    escapes = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", text[i + 1 : i + 4]):
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(escapes.get(nxt, ord(nxt) if nxt.isascii() else 63))
            i += 2
            continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", "replace")


def _refused(patch: Patch, path: str, why: str) -> PatchRefused:
    return PatchRefused(patch.index, patch.subject, path, why, [], "")


def apply_series(
    checkout: Checkout, series: Series, *, fallback: bool, fuzz: FuzzSandbox | None = None
) -> Applied:
    """Apply every patch of the series on the checkout's HEAD and return the new HEAD.

    Every patch's paths are checked first (`touched_paths`). Without `fallback` only a
    clean `git am` is accepted. With it, a failed `git am` is retried with `git am -3`, then
    patch by patch with `patch -F3` (fuzz), which runs in the build sandbox on throwaway
    copies (`fuzz`). The commit dates are the patches' author dates so the same series on
    the same base gives the same sha.
    """
    for patch in series.patches:
        touched_paths(patch)
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
            _reset(checkout, base)
            raise _describe(failure, series, tried)
        _reset(checkout, base)
        tried.append("git am -3")
        if _am(checkout, Path(f.name), ["-3"]) is None:
            return Applied(_head(checkout), "git am -3")
        _reset(checkout, base)
        tried.append("patch -F3")
        if fuzz is None:
            raise ValueError("the fuzz fallback needs a FuzzSandbox")
        return _apply_with_fuzz(checkout, Path(f.name), series, base, tried, fuzz)


def _am(checkout: Checkout, mbox: Path, extra: list[str]) -> str | None:
    result = checkout.git(
        ["am", "--quiet", "--committer-date-is-author-date", *extra, str(mbox)], check=False
    )
    return None if result.returncode == 0 else result.stdout + result.stderr


def _apply_with_fuzz(
    checkout: Checkout, mbox: Path, series: Series, base: str, tried: list[str],
    fuzz: FuzzSandbox,
) -> Applied:  # fmt: skip
    notes = []
    fuzzed: set[int] = set()
    failure = _am(checkout, mbox, [])
    while failure is not None:
        index = _current_patch(checkout)
        patch = series.patches[index - 1]
        if index in fuzzed:  # git am is still at it: fuzz changed nothing it could commit
            _reset(checkout, base)
            raise PatchFailed(index, patch.subject, ", ".join(touched_paths(patch)),
                              "it changes nothing once applied with fuzz (its hunks cancel "
                              "out)", tried, failure.strip())  # fmt: skip
        fuzzed.add(index)
        try:
            result = _fuzz_one(checkout, patch, fuzz)
        except PatchFailed:
            _reset(checkout, base)
            raise
        if result.returncode != 0:
            output = failure + "\n--- patch -F3 ---\n" + result.stdout
            _reset(checkout, base)
            raise _describe(output, series, tried, index=index)
        notes.append(f"patch {index} applied with fuzz: {result.stdout.strip()}")
        checkout.git(["add", "--all", "--", "."])
        cont = checkout.git(["am", "--continue"], check=False)
        failure = None if cont.returncode == 0 else cont.stdout + cont.stderr
    return Applied(_head(checkout), "patch -F3", notes)


def _fuzz_one(
    checkout: Checkout, patch: Patch, fuzz: FuzzSandbox
) -> subprocess.CompletedProcess[str]:
    """`patch -F3` of one patch, in the sandbox, on copies of the files it names; what it
    wrote is checked and copied back into the worktree without following any link."""
    paths = touched_paths(patch)
    fuzz.scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fuzz-", dir=fuzz.scratch))
    try:
        work.chmod(0o755)
        before = set()
        for path in paths:
            src = _in_tree(checkout.path, path, patch)
            if src.exists():
                if not src.is_file():
                    raise _refused(patch, path, "not a regular file in the tree")
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, work / path, follow_symlinks=False)
                before.add(path)
        sandbox = Sandbox(readable=(), writable=(work,), user=fuzz.user, limits=fuzz.limits)
        sandbox.prepare()
        argv = ["patch", "-p1", "-F3", "--no-backup-if-mismatch", "--batch", "--reject-file=-"]
        try:
            result = sandbox.run(argv, work, stdin=patch.diff, timeout=fuzz.timeout)
        except StepTimeout as exc:
            raise PatchFailed(patch.index, patch.subject, "", f"patch -F3 {exc}", [],
                              "") from None  # fmt: skip
        if result.returncode == 0:
            _copy_back(work, checkout.path, set(paths), before, patch)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _in_tree(root: Path, rel: str, patch: Patch) -> Path:
    """`root/rel`, refused when any directory on the way is not a real directory."""
    path = root
    for part in rel.split("/")[:-1]:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise _refused(patch, rel, f"it goes through {path.relative_to(root)}, which is not "
                           "a directory (a symbolic link?)")  # fmt: skip
    target = path / rel.split("/")[-1]
    if target.is_symlink():
        raise _refused(patch, rel, "a symbolic link in the tree")
    return target


def _copy_back(work: Path, tree: Path, named: set[str], before: set[str], patch: Patch) -> None:
    after = set()
    for entry in sorted(work.rglob("*")):
        rel = entry.relative_to(work).as_posix()
        if entry.is_symlink() or not (entry.is_file() or entry.is_dir()):
            raise _refused(patch, rel, "patch -F3 made something other than a file there")
        if entry.is_file():
            if rel not in named:
                raise _refused(patch, rel, "patch -F3 wrote a file the patch does not name")
            after.add(rel)
    for rel in sorted(after):
        dst = _in_tree(tree, rel, patch)
        dst.parent.mkdir(parents=True, exist_ok=True)
        _in_tree(tree, rel, patch)  # the directories just made are ours, but check again
        tmp = dst.with_name(f".{dst.name}.rcubench-fuzz")
        tmp.unlink(missing_ok=True)
        mode = 0o755 if os.stat(work / rel).st_mode & 0o111 else 0o644
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as out, open(work / rel, "rb") as data:
            shutil.copyfileobj(data, out)
        os.replace(tmp, dst)
    for rel in sorted(before - after):  # deleted by the patch
        _in_tree(tree, rel, patch).unlink(missing_ok=True)


def _current_patch(checkout: Checkout) -> int:
    return int((checkout.git_dir / "rebase-apply" / "next").read_text())


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


def _head(checkout: Checkout) -> str:
    return checkout.git(["rev-parse", "HEAD"]).stdout.strip()


def _reset(checkout: Checkout, base: str) -> None:
    checkout.git(["am", "--abort"], check=False)
    checkout.git(["reset", "--quiet", "--hard", base])


def check_series(git_dir: Path, base_sha: str, series: Series, *, timeout: float = 120) -> None:
    """Raise PatchFailed (or PatchRefused) where plain `git am` of `series` on `base_sha`
    would stop, without a worktree and without writing to `git_dir` (which may belong to
    someone else and be only readable).

    As `git am` does: mailsplit the patches `apply_series` feeds it, mailinfo each, then
    `git apply` each in turn, here on a scratch index of the base (`scratch_index`) holding
    only the paths the series names. Nothing from the tree runs: git applies a diff to
    blobs. The fallbacks (`git am -3`, `patch -F3`) are not tried: what they would do is the
    build's to find out.
    """
    paths = sorted({path for patch in series.patches for path in touched_paths(patch)})
    tried = ["git am"]
    with scratch_index(git_dir, base_sha, paths) as scratch, \
            tempfile.TemporaryDirectory(prefix="rcubench-check-") as tmp:  # fmt: skip
        work = Path(tmp)
        (work / "series.mbox").write_bytes(b"".join(p.raw for p in series.patches))
        split = scratch.git(["mailsplit", "-b", "-d4", f"-o{work}", "--",
                             str(work / "series.mbox")], timeout=timeout)  # fmt: skip
        for index in range(1, int(split.stdout.strip() or 0) + 1):
            mail = work / f"{index:04d}"
            msg, diff = mail.with_suffix(".msg"), mail.with_suffix(".diff")
            scratch.git(["mailinfo", "-u", str(msg), str(diff)], stdin=mail, timeout=timeout)
            subject = series.patches[index - 1].subject if index <= len(series.patches) else ""
            if not diff.exists() or diff.stat().st_size == 0:
                raise PatchFailed(index, subject, "", "git am finds no diff in it (Patch is "
                                  "empty)", tried, "")  # fmt: skip
            result = scratch.git(["apply", "--cached", str(diff)], check=False, timeout=timeout)
            if result.returncode != 0:
                raise _describe(result.stdout + result.stderr, series, tried, index=index)
