"""Structured logs: one JSON object a line, for operators and their tools.

Every state change of a comparison, build or run is one INFO line whose `event` names it
("comparison state", "build state", "run state") with the object's id and new state, and
the other things rcubench does on its own (re-sent messages, reaped steps, pruned files)
have one line each. Lines of other libraries (Django, Celery) go through the same
formatter, so a log file holds JSON only. Where a person watches (a terminal), the same
lines are rendered as readable key=value text instead.
"""

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def _leading_keys(_: Any, __: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    """When, how bad and what first; then the ids and the rest."""
    head = {k: event.pop(k) for k in ("timestamp", "level", "event", "logger") if k in event}
    return {**head, **event}


def configure() -> None:
    """Route structlog through the standard library's handlers (Django's LOGGING, Celery's
    log file), which format with `formatter()`."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def formatter(*, json: bool | None = None) -> logging.Formatter:
    """JSON lines, or readable text when `json` is False (default: text only on a TTY)."""
    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_SHARED, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _leading_keys,
            renderer,
        ],
    )


def get(name: str) -> Any:
    """A logger for module `name`: `log.info("run state", run=7, state="running")`."""
    return structlog.stdlib.get_logger(name)
