"""Reply commands by mail: one inbound mail (the raw RFC 5322 bytes an MTA hands over by
LMTP) in, what rcubench should act on out. Nothing here touches the database, the network
or Django (messages.py, imported for its header helpers, does import the models).

Developers answer a regression mail in mutt, so the grammar is a line they can type under
the quoted alert, as syzbot's `#syz` lines are:

    #rcubench test                  B' = the reported kernel plus the patch in this mail
                                    (inline after the command, or attached)
    #rcubench test git <branch>     a branch of the same registered tree
    #rcubench rerun [runs=N]        N from 2 to 200
    #rcubench bisect
    #rcubench invalid: <why>        why: at most 500 characters
    #rcubench fix: <sha or subject> 7 to 40 hex digits is a sha, else a subject (<= 200)
    #rcubench dup: <message-id>     with or without its angle brackets
    #rcubench ack

- A command is a line of the text/plain body whose first non-blank characters are
  `#rcubench` (any case, as is the command word) followed by whitespace; `#rcubenchfoo`
  is no command. A trailing CR is tolerated.
- Never a command: a quoted line (`>` after optional spaces: that is someone else's
  command, answered already), a line after the signature separator `-- `, a line of an
  inline patch. An unknown word or a bad argument is a problem naming its line (1-based,
  in the decoded body), never a guess.
- The branch of `test git` must pass `git check-ref-format --branch`'s rules; a URL is
  refused: rcubench fetches no tree but the registered one.
- An inline patch runs from its first `diff --git ` line (or a `--- ` line followed by a
  `+++ ` line) to the signature separator or the end of the body. When a `#rcubench test`
  line precedes it, it starts at the first non-blank line after that line, so that a
  pasted `git format-patch` (pseudo headers, commit message) reaches `git am`/`git apply`
  whole: a `#rcubench` line in that commit message is the patch's, not a command.
  An attached patch (text/x-patch, text/x-diff, text/x-mbox, application/mbox,
  application/x-patch, or a .patch/.diff/.mbox file name) wins over an inline one: a note
  says so.
- Robots must never trigger commands (vacation replies and other bots would loop with
  us): `Auto-Submitted` other than `no`, `X-Autoreply`/`X-Autorespond`, or an empty
  Return-Path make the mail automatic, and its commands are not read. `Precedence: list`
  alone is not enough: a developer's reply relayed by a mailing list carries it.
- The mail is refused above 2 MiB, before parsing: a reply with a patch is a few KiB.
- Only `From:` authorises; `reply_to` is where the answer goes (Reply-To, else From).
  Every header value returned has passed through `messages.header_text` or
  `messages.message_ids`: no CR or LF reaches a reply's headers.
"""

import re
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.errors import HeaderParseError
from email.message import Message
from email.utils import getaddresses

from webapp.alerts.messages import header_text, message_ids

MAX_BYTES = 2 * 1024 * 1024
RUNS_MIN, RUNS_MAX = 2, 200
WHY_MAX, FIX_MAX, BRANCH_MAX = 500, 200, 200
PATCH_TYPES = frozenset(
    ("text/x-patch", "text/x-diff", "text/x-mbox", "application/mbox", "application/x-patch")
)
PATCH_SUFFIXES = (".patch", ".diff", ".mbox")
NO_PLAIN = "no text/plain part: rcubench reads plain-text mail only"

_TAG = re.compile(r"#rcubench(?=\s|$)", re.IGNORECASE)
_WORD = re.compile(r"([^\s:]*)\s*:?\s*(.*)", re.DOTALL)
_SHA = re.compile(r"[0-9a-fA-F]{7,40}")
_ADDRESS = re.compile(r"[^@\s<>\"]+@[^@\s<>\"]+")
# `git check-ref-format`: no control character, space or any of ~^:?*[\ in a ref name.
_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_SCP_URL = re.compile(r"[^\s/]+@[^\s/]+:")  # git@host:path, a URL without ://
SIGNATURE = "-- "


@dataclass(frozen=True)
class Command:
    name: str  # test, test-git, rerun, bisect, invalid, fix, dup, ack
    argument: str  # branch, reason, sha/subject, message-id ("" if none)
    runs: int | None  # rerun's runs=N
    line: int  # 1-based line number in the decoded body
    text: str  # the command line as written (stripped)

    @property
    def sha(self) -> str:
        """fix's argument when it names a commit (7 to 40 hex digits), else ""."""
        return self.argument if self.name == "fix" and _SHA.fullmatch(self.argument) else ""


@dataclass(frozen=True)
class InboundMail:
    message_id: str  # "<...>" or "" (a mail without one cannot be de-duplicated: a problem)
    in_reply_to: list[str]
    references: list[str]
    sender: str
    reply_to: str
    subject: str
    commands: tuple[Command, ...]
    patch: str | None
    patch_source: str  # "inline", "attachment <filename>", or ""
    problems: tuple[str, ...]  # each names what is wrong and where (line numbers)
    notes: tuple[str, ...]
    automatic: bool

    @property
    def parents(self) -> list[str]:
        """The mails this one answers, nearest first: In-Reply-To, then References from
        the newest back, once each (the alert a command is for is among them)."""
        return message_ids(*self.in_reply_to, *reversed(self.references))


def parse(raw: bytes) -> InboundMail:
    """What `raw` asks of rcubench. A malformed mail raises nothing: `problems` say what is
    wrong with it."""
    if len(raw) > MAX_BYTES:
        problem = f"the mail is {len(raw)} bytes, more than the {MAX_BYTES} rcubench reads"
        return InboundMail("", [], [], "", "", "", (), None, "", (problem,), (), False)
    # compat32: headers stay strings until asked for. policy.default parses them into
    # objects and its parser raises on some malformed ones (an encoded CR in a name).
    msg = message_from_bytes(raw, policy=policy.compat32)
    problems: list[str] = []
    notes: list[str] = []
    mid = message_ids(_header(msg, "Message-ID"))
    if not mid:
        problems.append("no Message-ID: rcubench cannot tell this mail from a resent copy")
    sender = _address(_header(msg, "From"))
    if not sender:
        problems.append("no sender: the From header is missing or not one address")
    automatic = _automatic(msg)
    if automatic:
        notes.append("an automatic reply (Auto-Submitted, X-Autoreply or an empty "
                     "Return-Path): its commands are not read")  # fmt: skip
    body, attached = _parts(msg)
    commands: list[Command] = []
    patch: str | None = None
    source = ""
    if body is None:
        problems.append(NO_PLAIN)
    elif not automatic:
        commands, inline, span = _read(body, problems)
        if attached is not None:
            patch, source = attached
            if inline is not None:
                notes.append(f"the inline patch (lines {span[0]}-{span[1]}) is ignored: "
                             f"the {source} is used")  # fmt: skip
        elif inline is not None:
            patch, source = inline, "inline"
        for c in [c for c in commands if c.name == "test" and patch is None]:
            problems.append(f"line {c.line}: #rcubench test needs a patch, inline after "
                            "the command or attached")  # fmt: skip
            commands.remove(c)
    return InboundMail(
        message_id=mid[0] if mid else "",
        in_reply_to=message_ids(_header(msg, "In-Reply-To")),
        references=message_ids(_header(msg, "References")),
        sender=sender,
        reply_to=_address(_header(msg, "Reply-To")) or sender,
        subject=header_text(_decoded(_header(msg, "Subject"))),
        commands=tuple(commands),
        patch=patch,
        patch_source=source,
        problems=tuple(problems),
        notes=tuple(notes),
        automatic=automatic,
    )


def _header(msg: Message, name: str) -> str:
    """The first `name` header as written; 8-bit bytes in it (SMTPUTF8 mail, or a careless
    mailer) read as UTF-8."""
    value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), "")
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _decoded(value: str) -> str:
    """An unstructured header unfolded, its RFC 2047 words decoded (or as written when the
    email package's parser gives up on them)."""
    try:
        return str(policy.default.header_factory("subject", "".join(value.splitlines())))
    except (ValueError, LookupError, IndexError, AttributeError, HeaderParseError):
        return value


def _address(value: str) -> str:
    """The one address in `value`, its domain lower-cased (the local part is the owner's
    business: RFC 5321 lets it be case-sensitive), or ""."""
    pairs = [a for _, a in getaddresses([value]) if a]
    if len(pairs) != 1 or not _ADDRESS.fullmatch(pairs[0]):
        return ""
    local, _, domain = pairs[0].rpartition("@")
    return header_text(f"{local}@{domain.lower()}", 320)


def _automatic(msg: Message) -> bool:
    auto = _header(msg, "Auto-Submitted").split(";")[0].strip().lower()
    if auto and auto != "no":
        return True
    if "X-Autoreply" in msg or "X-Autorespond" in msg:
        return True
    # RFC 3834: a bounce or a robot's mail has the null reverse path.
    return "Return-Path" in msg and _header(msg, "Return-Path").strip() in ("", "<>")


def _text(part: Message) -> str:
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return ""
    try:
        text = data.decode(part.get_content_charset() or "utf-8", errors="replace")
    except (LookupError, ValueError):  # no such charset: most undeclared text is UTF-8
        text = data.decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n")  # SMTP's line ends, not the text's: git wants LF


def _parts(msg: Message) -> tuple[str | None, tuple[str, str] | None]:
    """The body (the first inline text/plain part) and the first attached patch with its
    source ("attachment <filename>")."""
    body: str | None = None
    attached: tuple[str, str] | None = None
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        name = header_text(part.get_filename() or "", 200)
        if ctype in PATCH_TYPES or name.lower().endswith(PATCH_SUFFIXES):
            if attached is None:
                attached = (_text(part), f"attachment {name or ctype}")
        elif (
            ctype == "text/plain"
            and body is None
            and part.get_content_disposition() != "attachment"
        ):
            body = _text(part)
    return body, attached


def _diff_start(lines: list[str], end: int) -> int | None:
    for i in range(end):
        if lines[i].startswith("diff --git ") or (
            lines[i].startswith("--- ") and i + 1 < end and lines[i + 1].startswith("+++ ")
        ):
            return i
    return None


def _read(body: str, problems: list[str]) -> tuple[list[Command], str | None, tuple[int, int]]:
    """The commands, the inline patch and its first and last line numbers."""
    lines = [ln.removesuffix("\r") for ln in body.split("\n")]
    end = lines.index(SIGNATURE) if SIGNATURE in lines else len(lines)
    diff = _diff_start(lines, end)
    commands: list[Command] = []
    anchor: int | None = None
    for i in range(end if diff is None else diff):
        text = lines[i].strip()
        if not _TAG.match(text):  # a quoted line starts with ">": never a command
            continue
        command = _command(text, i + 1, problems)
        if command is not None:
            commands.append(command)
            if command.name == "test" and diff is not None:
                anchor = i  # what follows (pseudo headers, a commit message) is the patch's
                break
    if diff is None:
        return commands, None, (0, 0)
    start = diff
    if anchor is not None:
        start = next(i for i in range(anchor + 1, diff + 1) if lines[i].strip())
    stop = end
    while stop > start and not lines[stop - 1]:
        stop -= 1
    return commands, "\n".join(lines[start:stop]) + "\n", (start + 1, stop)


def _command(text: str, n: int, problems: list[str]) -> Command | None:
    """The command on line `n`, or None with a problem saying what is wrong with it."""
    m = _WORD.fullmatch(text[len("#rcubench") :].strip())
    word, arg = (m.group(1).lower(), m.group(2).strip()) if m else ("", "")
    shown = header_text(arg, 80)

    def bad(why: str) -> None:
        problems.append(f"line {n}: {why}")

    def ok(name: str, argument: str = "", runs: int | None = None) -> Command:
        return Command(name, argument, runs, n, text)

    if word in ("ack", "bisect"):
        if not arg:
            return ok(word)
        bad(f"{word} takes no argument, not {shown!r}")
    elif word == "test":
        if "://" in arg or any(_SCP_URL.match(w) for w in arg.split()):
            bad(f"{shown!r} is a URL: rcubench tests the registered tree's branches and "
                "fetches no other URL")  # fmt: skip
        elif not arg:
            return ok("test")
        elif arg.split()[0].lower() != "git":
            bad(f"test takes nothing or git <branch>, not {shown!r}")
        elif not (branch := arg[3:].strip()):
            bad("test git needs a branch")
        elif why := _branch_problem(branch):
            bad(f"branch {header_text(branch, 80)!r} {why}")
        else:
            return ok("test-git", branch)
    elif word == "rerun":
        runs = re.fullmatch(r"runs=(\d{1,4})", arg)
        if not arg:
            return ok("rerun")
        if runs and RUNS_MIN <= int(runs.group(1)) <= RUNS_MAX:
            return ok("rerun", runs=int(runs.group(1)))
        bad(f"rerun takes runs=N with N from {RUNS_MIN} to {RUNS_MAX}, not {shown!r}")
    elif word in ("invalid", "fix"):
        limit = WHY_MAX if word == "invalid" else FIX_MAX
        what = "a reason" if word == "invalid" else "a sha or a subject"
        if not arg:
            bad(f"{word} needs {what}")
        elif len(arg) > limit:
            bad(f"{word}: {what} of {len(arg)} characters, more than {limit}")
        elif word == "fix" and _SHA.fullmatch(arg):
            return ok("fix", arg.lower())
        else:
            return ok(word, header_text(arg, limit))
    elif word == "dup":
        ids = message_ids(arg) if arg else []
        if len(ids) == 1 and arg in (ids[0], ids[0][1:-1]):
            return ok("dup", ids[0])
        bad(f"dup needs the message-id of the mail it duplicates, not {shown!r}")
    elif word:
        bad(f"unknown command {header_text(word, 40)!r}")
    else:
        bad("no command after #rcubench")
    return None


def _branch_problem(branch: str) -> str:
    """Why `branch` is not a name `git check-ref-format --branch` accepts, or ""."""
    if len(branch) > BRANCH_MAX:
        return f"is longer than {BRANCH_MAX} characters"
    if _REF_BAD.search(branch):
        return "has a space, a control character or one of ~^:?*[\\"
    if ".." in branch or "@{" in branch or "//" in branch or branch == "@":
        return "has '..', '@{' or '//'"
    if branch.startswith(("-", "/")) or branch.endswith(("/", ".", ".lock")):
        return "starts with '-' or '/', or ends with '/', '.' or '.lock'"
    if any(c.startswith(".") or c.endswith(".lock") for c in branch.split("/")):
        return "has a component starting with '.' or ending with '.lock'"
    return ""
