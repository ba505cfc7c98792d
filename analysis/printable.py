"""What a player wrote, made safe to print in a terminal.

A model's output (or a person's, or a scripted player's) is raw text. Printed as is, it can drive
the terminal: an ANSI escape sequence (``ESC [ 2 J``) clears the screen or recolours the rest of
the transcript, a carriage return overwrites the line, a bidi override (U+202E) prints the text
after it backwards, and a lone surrogate makes ``print`` raise ``UnicodeEncodeError``. Terminal
views (``coevo match``'s transcript, ``coevo watch``) pass every player-written string through
:func:`printable` first; the JSON they come from (``--json``, ``episodes/``) keeps the exact text.

Each unsafe character is shown as the escape Python's ``repr`` writes for it (``\\x1b``,
``\\r``, ``\\u202e``, ``\\ud800``), so it stays visible: an escape sequence loses its ESC and
prints as harmless text (``\\x1b[2J``). Newlines and tabs are layout and pass; so does every
other printable character, including right-to-left scripts.

>>> printable("bet\\x1b[2J\\u202eevil")
'bet\\\\x1b[2J\\\\u202eevil'
>>> printable("café ✓\\n\\tdone")
'café ✓\\n\\tdone'
"""

from __future__ import annotations

import re

UNSAFE = re.compile(
    "["
    "\x00-\x08\x0b-\x1f\x7f"  # C0 controls and DEL, except tab (\x09) and newline (\x0a); ESC opens ANSI sequences
    "\x80-\x9f"  # C1 controls (U+009B is a one-character CSI, U+0085 a line break)
    "\u202a-\u202e"  # bidi embeddings and overrides: LRE, RLE, PDF, LRO, RLO
    "\u2066-\u2069"  # bidi isolates: LRI, RLI, FSI, PDI
    "\ud800-\udfff"  # surrogates: never valid on their own in a str, and unencodable
    "]"
)


def _visible(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # "\x1b" -> \x1b, "\r" -> \r, "\u202e" -> \u202e


def printable(text: str) -> str:
    """``text`` with every control character (but newline and tab), bidi override or isolate and
    lone surrogate replaced by its visible escape; safe text comes back unchanged."""
    return UNSAFE.sub(_visible, text)
