"""Source columns grouped per file: ``modeling_gpt2.py:312, 318, 340 · train.py:12`` instead of the
file name repeated before every line number (every view that lists the lines a kernel, a block or a
row came from uses :func:`grouped_lines`)."""
from __future__ import annotations

from typing import Iterable, Optional


def _base(file: str) -> str:
    if file.startswith("cell ["):
        return file
    return file.replace("\\", "/").rsplit("/", 1)[-1] or file


def grouped_lines(pairs: Iterable[tuple[str, int]], max_chars: Optional[int] = None) -> str:
    """Return ``(file, line)`` pairs as one label per file with its sorted distinct lines:
    ``modeling_llama.py:121, 122, 136 · cache_utils.py:136``, files in first-seen order (pairs with
    no line are skipped). With ``max_chars``, the label is cut at a separator and ends in ``…``."""
    by_file: dict[str, set[int]] = {}
    for file, line in pairs:
        if line:
            by_file.setdefault(_base(str(file or "?")), set()).add(int(line))
    text = " · ".join(f"{f}:{', '.join(str(n) for n in sorted(lines))}" for f, lines in by_file.items())
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text[:max(1, max_chars - 1)]
    for sep in (", ", " · "):
        at = cut.rfind(sep)
        if at > len(cut) // 2:
            cut = cut[:at]
            break
    return cut + "…"
