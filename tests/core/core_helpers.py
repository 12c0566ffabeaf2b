"""Helpers for the core tests: a small compiled model script, line lookup, in-process CLI runs."""
from __future__ import annotations

import os
import textwrap

from thundervis.cli import main

SMALL_MODEL = textwrap.dedent("""\
    import sys
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = torch.tanh(self.fc(x))  # LINE_TANH
            return (h * h).sum()  # LINE_LOSS

    torch.manual_seed(0)
    model = torch.compile(M())
""")


def write_script(folder, name: str, body: str, *, with_model: bool = True) -> str:
    """Write ``SMALL_MODEL`` (optionally) followed by ``body`` into folder/name; return its path."""
    path = os.path.join(str(folder), name)
    with open(path, "w") as f:
        f.write((SMALL_MODEL if with_model else "") + textwrap.dedent(body))
    return path


def line_of(path: str, marker: str) -> int:
    """Return the 1-based line number of the first line of ``path`` containing ``marker``."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if marker in line:
                return i
    raise AssertionError(f"{marker} not in {path}")


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """Run the thundervis CLI in-process; return (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def stored_text(value):
    """Return the text a compressed text column holds (schema 3 stores trace JSON, printed traces,
    kernel code and sources as zlib-compressed UTF-8; older files hold plain text)."""
    import zlib
    return zlib.decompress(value).decode() if isinstance(value, (bytes, bytearray)) else value
