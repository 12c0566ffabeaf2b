"""What a recording holds for each pass and kernel, saved to compare two recordings byte for byte.

For every pass of every chain: its printed trace, its trace JSON and its symbol rows; for every
kernel: its source. Durations (pass times, a cached pass's ``compiled_ms``) are masked, as they
differ from run to run. Used to show a change to the compile cache or the recording writer changed
no output: record a warm run (``THUNDERVIS_CACHE_DIR=DIR thundervis run ... `` twice) before and
after the change, save each, compare.

    python benchmarks/recording_texts.py save RUN.tvrec OUT.json
    python benchmarks/recording_texts.py compare BEFORE.json AFTER.json
"""
from __future__ import annotations

import json
import re
import sys

_TIME = re.compile(r'"(compiled_ms|duration_ms|seconds|ms)":[0-9.e+-]+|\d+(\.\d+)? ?(ms|s|us|µs)(?![a-zA-Z])')


def texts(path: str) -> dict:
    """Return {"g0/forward/03_cse/print": text, ...} for the recording at ``path``, times masked."""
    from thundervis.recording.reader import open_recording
    rec = open_recording(path)
    out = {}
    for g in rec.graphs():
        for c in g.chains:
            for p in c.passes:
                key = f"g{g.id}/{c.kind}/{p.index:02d}_{p.name}"
                out[key + "/print"] = _TIME.sub("T", rec.pass_text(g.id, c.kind, p.index))
                out[key + "/json"] = _TIME.sub("T", rec.pass_json(g.id, c.kind, p.index))
                out[key + "/symbols"] = repr(rec.symbols(g.id, c.kind, p.index))
    for k in rec.kernels():
        out["kernel/" + k.name] = _TIME.sub("T", repr(rec.kernel_source(k)))
    return out


def main(argv: list) -> int:
    """``save REC OUT`` or ``compare A B``; return 0 when the compared files match, else 1."""
    if len(argv) == 3 and argv[0] == "save":
        data = texts(argv[1])
        with open(argv[2], "w") as f:
            json.dump(data, f, sort_keys=True)
        print(f"{len(data)} texts saved to {argv[2]}")
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        a, b = (json.load(open(p)) for p in argv[1:])
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} and {len(b)} texts; {len(differ)} differ" + "".join(f"\n  {k}" for k in differ[:40]))
        return 1 if differ else 0
    print("usage: recording_texts.py save RUN.tvrec OUT.json | compare BEFORE.json AFTER.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
