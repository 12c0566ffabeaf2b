"""Export a recording's profiled calls as a Chrome / Perfetto trace (JSON trace event format).

One process per compiled graph, one thread (track) per chain; per profiled call one slice for the
call and, inside it, one slice per kernel or torch op, named as in the recording. Offsets come from
the bounded per-call samples the profiler kept (at most K calls per chain). Host-clock recordings
place each symbol where it started on the host; device-clock recordings lay a call's kernels end to
end (their device durations), since the profiler's own sleeps between them are not the program's.
The untimed calls after the profiled ones (their wall times, ``walls_us``) follow on the same track
as slices of their own (category ``untimed call``), end to end: only their durations are recorded,
not when they started.
"""
from __future__ import annotations

from thundervis.recording.model import Timings, chain_position


def perfetto_trace(tm: Timings, label: str = "") -> dict:
    """Return the trace-event document (``{"traceEvents": [...]}``) for the timings ``tm``."""
    events = []
    graphs = sorted({c.graph for c in tm.chains} | {k.graph for k in tm.kernels})
    for g in graphs:
        events.append({"name": "process_name", "ph": "M", "pid": g, "tid": 0,
                       "args": {"name": f"graph {g}" + (f" · {label}" if label else "")}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": g, "tid": 0, "args": {"sort_index": g}})
    chains = {(c.graph, c.chain): c for c in tm.chains}
    keys = sorted({(k.graph, k.chain) for k in tm.kernels} | set(chains),
                  key=lambda gc: (gc[0], chain_position(gc[1]), gc[1]))
    for g, chain in keys:
        tid = min(chain_position(chain), 9) + 1
        ct = chains.get((g, chain))
        clock = ct.clock if ct else "host"
        events.append({"name": "thread_name", "ph": "M", "pid": g, "tid": tid,
                       "args": {"name": f"{chain} ({clock} time)"}})
        syms = sorted((k for k in tm.kernels if k.graph == g and k.chain == chain), key=lambda k: k.position)
        n_calls = max([len(k.samples_us) for k in syms] + [len(ct.call_starts_us) if ct else 0])
        starts = list(ct.call_starts_us) if ct and ct.call_starts_us else []
        t = 0.0
        for c in range(n_calls):
            base = starts[c] if c < len(starts) else t
            end = base
            for k in syms:
                if c >= len(k.samples_us):
                    continue
                off = k.starts_us[c] if c < len(k.starts_us) else 0.0
                dur = k.samples_us[c]
                end = max(end, base + off + dur)
                events.append({"name": k.name, "cat": k.kind, "ph": "X", "pid": g, "tid": tid,
                               "ts": round(base + off, 3), "dur": round(dur, 3),
                               "args": {"uid": k.uid, "executor": k.executor, "bytes": k.bytes,
                                        "call": c, "clock": k.clock}})
            events.append({"name": f"{chain} call {c}", "cat": "call", "ph": "X", "pid": g, "tid": tid,
                           "ts": round(base, 3), "dur": round(end - base, 3), "args": {"call": c}})
            t = end + 1.0
        for i, wall in enumerate(ct.untimed_walls_us if ct else ()):
            events.append({"name": f"{chain} call {n_calls + i} (untimed)", "cat": "untimed call", "ph": "X",
                           "pid": g, "tid": tid, "ts": round(t, 3), "dur": round(wall, 3),
                           "args": {"call": n_calls + i, "wall_us": wall,
                                    "placed": "end to end after the profiled calls (start times are not recorded)"}})
            t += wall + 1.0
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "thundervis", "recording": label}}
