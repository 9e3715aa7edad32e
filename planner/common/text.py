"""Names and values as they appear in messages: suggestions, and values made safe to echo."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from planner.errors import printable as printable  # defined with the errors it keeps printable

# Longest value quoted in a message: a 400 MB cell must not become a 400 MB error.
MAX_SHOWN_CHARS = 80
# A run of text without a space this long in a message is a value quoted whole, not words.
_LONG_RUN = re.compile(r"\S{200,}")


def closest(name: str, known: Sequence[str]) -> str:
    """Known names, closest to ``name`` first, for error messages."""
    by_lower = {k.lower(): k for k in known}
    ranked = difflib.get_close_matches(name.lower(), list(by_lower), n=len(known), cutoff=0.0)
    return ", ".join(by_lower[k] for k in ranked)


def shown(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr``-style quoting of a user's value for a message: control characters (ANSI escapes,
    newlines, NUL) escaped so a terminal never interprets them, and cut to ``limit`` characters.
    """
    text = value if isinstance(value, str) else str(value)
    cut = len(text) > limit
    quoted = repr(text[:limit])
    if cut:
        quoted += f"... ({len(text):,} characters)"
    return quoted


def bounded_message(text: str) -> str:
    """A message safe to print whole, whoever built it: every run of 200 or more characters
    without a space (a value quoted whole, by planner or a library) is cut to its first
    ``MAX_SHOWN_CHARS`` with its length, and control characters are escaped."""
    cut = _LONG_RUN.sub(
        lambda m: f"{m.group()[:MAX_SHOWN_CHARS]}... ({len(m.group()):,} characters)", text
    )
    return "\n".join(printable(line) for line in cut.split("\n"))


def duration_text(seconds: float) -> str:
    """A span as people read it: ``2d 3h 4m``, or ``1h 2m 3s`` under a day."""
    minutes, sec = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h {minutes}m" if days else f"{hours}h {minutes}m {sec}s"


def plural(count: float, singular: str, plural_form: str | None = None) -> str:
    """``1 replica``, ``2 replicas``, ``1,234 requests`` (``plural_form`` when not ``+s``)."""
    word = singular if count == 1 else (plural_form or f"{singular}s")
    return f"{count:,g} {word}" if not float(count).is_integer() else f"{int(count):,} {word}"
