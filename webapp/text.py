"""Untrusted text on its way into PostgreSQL.

Consoles, build logs and mail headers are written by kernels and submitters: any byte can be
in them. PostgreSQL's text type refuses NUL, and psycopg refuses lone surrogates, so one such
byte would make the whole row fail to store (the run or build would be lost). Each is kept
visible instead: NUL as U+2400 (the "symbol for null"), an undecodable byte as its \\x escape.
"""

NUL_SHOWN = "\u2400"


def storable(text: str) -> str:
    """`text` with every character PostgreSQL cannot store made visible instead."""
    if "\x00" in text:
        text = text.replace("\x00", NUL_SHOWN)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # surrogates from errors="surrogateescape" decoding
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text
