"""Text from tables, stores and user input made safe to log (CWE-117: improper output neutralisation for logs).

A column name such as ``"amount\\nERROR forged line"`` or one carrying ANSI escapes would otherwise write a
fake log line or repaint a terminal. :func:`sanitized` shows every control character as its escape, so a
message stays one line and says exactly what the value held.
"""

from __future__ import annotations

import re

#: C0 and C1 controls (line breaks, ESC, DEL, NEL) and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

#: Longest text logged from one value.
MAX_CHARS = 500


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def sanitized(value: object, limit: int = MAX_CHARS) -> str:
    """``str(value)`` on one line: control characters as escapes (``\\n``, ``\\x1b``), cut to ``limit``."""
    text = _CONTROL.sub(_escape, str(value))
    if len(text) > limit:
        return f"{text[:limit]}... ({len(text)} characters)"
    return text
