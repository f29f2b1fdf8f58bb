"""A benchmark's generated section of a doc: the text between its two markers.

Each benchmark with --write-docs owns a begin/end marker pair in a doc
(a page of docs/benchmarks/); the text between them is rewritten, the
hand-written notes around them are kept.
"""

from __future__ import annotations

from pathlib import Path


def write_section(doc: Path, begin: str, end: str, text: str, heading: str) -> None:
    """Replaces what lies between `begin` and `end` in `doc` by `text`. Where the
    markers are missing, appends them under the markdown `heading` (a new file
    holding only that section when `doc` does not exist)."""
    block = f"{begin}\n{text}\n{end}"
    old = doc.read_text() if doc.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        doc.write_text(head + block + rest.split(end, 1)[1])
    else:
        doc.write_text((old.rstrip("\n") + "\n\n" if old else "") + f"{heading}\n\n{block}\n")
