"""A compile-cache entry's text: written without parsing the traces' JSON back (spliced in as the
encoder writes it), it is the same document the older dump-parse-dump writer made, and storing a
loaded entry again round-trips."""
from __future__ import annotations

import glob
import gzip
import json
import os

from thundervis.compiler.compile_cache import CompileCache, _entry_text, _parents_trace
from thundervis.compiler.serialize import kernel_to_dict, trace_to_json

from test_compile_cache import _run


def _old_doc(key, passes, parents, seq):
    """The entry as the writer before this change built it (json.loads of each trace's JSON)."""
    return {"format": 1, "key": key, "seq_base": int(seq),
            "parents": json.loads(trace_to_json(_parents_trace(parents))),
            "passes": [{"index": i, "name": n, "changed": bool(c), "ms": s * 1e3,
                        "trace": json.loads(trace_to_json(t)), "kernels": [kernel_to_dict(k) for k in ks]}
                       for i, n, c, s, t, ks in passes]}


def test_the_entry_text_is_the_old_document_and_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDERVIS_CACHE_DIR", str(tmp_path))
    _run()
    paths = sorted(p for p in glob.glob(os.path.join(str(tmp_path), "compile", "*", "*.json.gz"))
                   if ".graph." not in p)  # the chain entries (a graph entry is test_graph_cache's)
    assert len(paths) == 2
    cache = CompileCache()
    for path in paths:
        key = os.path.basename(path)[:-len(".json.gz")]
        entry, why = cache.load(key)
        assert entry is not None, why
        passes = [(i, n, c, ms / 1e3, t, ks) for i, n, c, ms, t, ks in entry.passes]
        assert any(ks for *_, ks in passes)  # kernel records are part of what is compared
        new = json.loads(_entry_text(key, passes, entry.parents, entry.seq_base))
        assert new.pop("written_at") > 0
        assert new == _old_doc(key, passes, entry.parents, entry.seq_base)
        with gzip.open(path, "rb") as f:
            stored = json.loads(f.read())
        stored.pop("written_at")
        assert stored == new  # what the cold run wrote is that document too
        cache.store(key, passes, entry.parents, entry.seq_base)
        again, why = cache.load(key)
        assert again is not None, why
        assert again.passes == entry.passes and again.parents == entry.parents
