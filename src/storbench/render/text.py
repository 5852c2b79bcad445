"""Text from users made harmless where it is shown: on terminals and in spreadsheets.

Labels, tags, job names, targets and imported text come from whoever wrote to the
results database (a team's, shared); printed raw, an escape sequence in them would
rewrite a colleague's terminal (its title, its screen, a hyperlink that is not what it
says), and a cell that starts with ``=`` would be a formula in their spreadsheet.

- ``harmless``: every control character (C0 but the line break, DEL, C1) and the
  Unicode bidirectional overrides become visible escapes (``\\x1b``, ``\\u202e``).
- ``spreadsheet_cell``: also a cell starting with ``= + - @`` (or a tab or carriage
  return) gets a leading ``'``, the usual neutralisation (OWASP's); numbers storbench
  writes itself are left as they are.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                     "\u2066-\u2069]")
_FORMULA = re.compile(r"[=+\-@\t\r]")
_NUMBER = re.compile(r"-?[0-9][0-9.,]*(?:e[+-]?[0-9]+)?")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def harmless(text: str) -> str:
    """``text`` with its control characters shown, not obeyed (line breaks kept)."""
    return _UNSAFE.sub(_visible, text)


def spreadsheet_cell(text: str) -> str:
    """``text`` as a spreadsheet shows it, never runs it."""
    text = harmless(text)
    if _FORMULA.match(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text
