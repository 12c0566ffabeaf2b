"""Writing the memory ledger (:func:`thundervis.compiler.ledger.graph_ledger`'s dict) into the
``memory_*`` tables of schema.py, one graph at a time."""
from __future__ import annotations

import json


def _int(v) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _text(v) -> str:
    return v if isinstance(v, str) else ""


def write_ledger(c, graph: int, ledger: dict) -> None:
    """Insert ``graph``'s ledger through cursor/connection ``c`` (a ledger with ``error`` gets a
    ``memory_graphs`` row saying so and nothing else)."""
    t = ledger.get("totals") or {}
    c.execute("INSERT OR REPLACE INTO memory_graphs(graph_id, policy, saved_bytes, saved_tensors, parameters,"
              " gradients, peak_bytes, what_if_off, what_if_auto, error) VALUES (?,?,?,?,?,?,?,?,?,?)",
              (graph, _text(t.get("policy")) or "off", _int(t.get("saved_bytes")), _int(t.get("saved_tensors")),
               _int(t.get("parameters")), _int(t.get("gradients")), _int(t.get("peak_bytes")),
               _int(t.get("what_if_off")), _int(t.get("what_if_auto")),
               str(ledger["error"]) if ledger.get("error") else None))
    c.executemany("INSERT OR REPLACE INTO memory_saved(graph_id, position, name, shape, dtype, bytes, storage,"
                  " storage_bytes, kind, counted, producer, op, file, line, code, module, readers, why)"
                  " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  [(graph, i, r["name"], json.dumps(r["shape"]), r["dtype"], _int(r["bytes"]), r["storage"],
                    _int(r["storage_bytes"]), r["kind"], 1 if r["counted"] else 0, r["producer"], _text(r["op"]),
                    _text(r["file"]), _int(r["line"]), _text(r["code"]), _text(r["module"]),
                    json.dumps([str(x) for x in r["readers"]]), _text(r["why"]))
                   for i, r in enumerate(ledger.get("saved") or [])])
    c.executemany("INSERT OR REPLACE INTO memory_decisions(graph_id, position, fx, shape, dtype, bytes, op, off,"
                  " why_off, auto, why_auto) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                  [(graph, i, d["fx"], json.dumps(d["shape"]), d["dtype"], _int(d["bytes"]), _text(d["op"]),
                    d["off"], d["why_off"], d["auto"], d["why_auto"])
                   for i, d in enumerate(ledger.get("decisions") or [])])
    for chain, rows in (ledger.get("timelines") or {}).items():
        c.executemany("INSERT OR REPLACE INTO memory_timeline(graph_id, chain, position, uid, sym, live_bytes)"
                      " VALUES (?,?,?,?,?,?)",
                      [(graph, chain, r["index"], r["uid"], r["sym"], _int(r["live_bytes"])) for r in rows])
    for chain, p in (ledger.get("peaks") or {}).items():
        c.execute("INSERT OR REPLACE INTO memory_peaks(graph_id, chain, bytes, position, sym, kernel, file, line,"
                  " code, module) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (graph, chain, _int(p["bytes"]), _int(p["index"]), p["sym"], p["kernel"], p["file"],
                   _int(p["line"]), p["code"], p["module"]))


def write_measured(c, graph: int, chain: str, data: dict) -> None:
    """Insert what one call of ``graph``'s ``chain`` really kept live (``runtime(..., "memory", data)``
    of compiler/profiling.py) through cursor/connection ``c``."""
    c.execute("INSERT OR REPLACE INTO memory_measured(graph_id, chain, device, method, baseline_bytes, peak_bytes)"
              " VALUES (?,?,?,?,?,?)", (graph, chain, _text(data.get("device")), _text(data.get("method")),
                                        _int(data.get("baseline_bytes")), _int(data.get("peak_bytes"))))
