"""The attack fuzz (issue 22): tampered recordings and group folders of every class the issue found,
run through the reading commands and the TUI; each command must exit 0 (harmless) or 2 with one
sentence (refused), never a traceback, a hang over 10 s or more than 1 GiB of memory.

Classes (each case is one tampered copy):
- ``type``: every column of every table gets a value of another type (a blob in a text column,
  text in a number column, numbers out of range), one case per column;
- ``deep``: JSON nested 100,000 deep in every JSON column;
- ``group``: a group folder's rank file nested 200,000 deep, with ``"version": "2"``, launch files
  with ``torchrun_args: 5``, ``node_rank: 1e400`` and NaN, a world size of 1e12;
- ``bomb``: compressed blobs that expand to 1 GiB (a rank file, a text of ``traces.tvstore``);
- ``fifo``: a FIFO named ``x.tvrec``, and one in place of a group's rank file;
- ``schema``: ``passes`` replaced by a view over a recursive CTE, a trigger, an extra view;
- ``delta`` (schema 4): a pass's delta chain that loops, runs longer than the writer's bound or
  names a missing base, a delta that copies its base past the size cap, a symbol list bomb;
- ``markup``: Textual/Rich markup, ESC, U+202E and HTML in every text column (and in all at once).

Commands run in a child process (``fuzz_driver.py``, 10 s per command, memory watched), in
batches; a hang kills the child and the batch goes on in a new one. The counts (attempts, harmless,
refused, failed per class) are printed. Bounded: about 260 cases, 1,400 command runs (the headless
TUI on every 20th type case and every 8th markup case); about 6 minutes on a busy 2-core machine.
"""
from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import shutil
import sqlite3
import subprocess
import sys
import threading
import zlib

import pytest

from hostile_payloads import MARKUP, PAYLOAD, poison_every_text_column, text_columns, write_hostile_recording

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PER_COMMAND_S = 10.0
MAX_RSS_MB = 1024
DEEP = "[" * 100_000 + "]" * 100_000
JSON_COLUMNS = [("run", "argv"), ("run", "executors"), ("graphs", "info"), ("passes", "trace_json"),
                ("passes", "meta"), ("symbol_rows", "origin"), ("kernels", "members"), ("kernels", "ops"),
                ("kernels", "inputs"), ("kernels", "outputs"), ("kernels", "source_lines"),
                ("kernels", "trace_json"), ("kernels", "record"), ("events", "data"),
                ("kernel_timings", "samples"), ("kernel_timings", "starts"), ("graph_timings", "call_starts"),
                ("graph_timings", "call_walls"), ("rerun_results", "detail")]


# -- the base files ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """(a profiled recording with a row in every table, a packed group of 3 ranks with a rank file
    and a launch file)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from _synthetic_group import write_group
    from thundervis.recording import group as group_mod
    folder = tmp_path_factory.mktemp("fuzzbase")
    single = write_group(str(folder), variants=(0,), profiled=True, pack=False, name="single.tvgroup")
    rec = os.path.join(single, sorted(os.listdir(single))[0])
    with contextlib.closing(sqlite3.connect(rec)) as c, c:
        c.execute("INSERT INTO failures(graph_id, chain, error, traceback, at) VALUES (0, 'backward', 'boom', "
                  "'Traceback (most recent call last):\nboom', 1.0)")
        cols = [r[1] for r in c.execute("PRAGMA table_info(rerun_results)")]
        values = {"kernel_id": 1, "executor": "torch", "device": "cpu", "inputs": "random", "iters": 1,
                  "status": "ok", "median_ms": 0.1, "min_ms": 0.1, "max_abs_error": 0.0, "max_rel_error": 0.0,
                  "detail": "{}", "at": 1.0}
        use = [k for k in cols if k in values]
        c.execute(f"INSERT INTO rerun_results({', '.join(use)}) VALUES ({', '.join('?' * len(use))})",
                  [values[k] for k in use])
    group = write_group(str(folder), variants=(0, 0, 1), profiled=True, pack=True, name="packed.tvgroup")
    try:
        group_mod.start_launch(group, node_rank=0, torchrun_args=["--nproc-per-node", "3"],
                               target=["train.py"], cwd=str(folder))
    except Exception:  # noqa: BLE001 - an older layout without launch files: those cases are skipped
        pass
    return rec, group


def _table_rows(path: str) -> dict:
    with contextlib.closing(sqlite3.connect(path)) as c:
        return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(path: str) -> list[tuple[str, str, str]]:
    with contextlib.closing(sqlite3.connect(path)) as c:
        out = []
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchall():
            for r in c.execute(f"PRAGMA table_info({t})").fetchall():
                out.append((t, r[1], (r[2] or "").upper()))
        return out


def _update(path: str, sql: str, params=()) -> bool:
    """Run one tampering statement on the file; False when SQLite refuses it (a NOT NULL, ...)."""
    with contextlib.closing(sqlite3.connect(path)) as c:
        try:
            c.execute("PRAGMA ignore_check_constraints=ON")
            with c:
                c.execute(sql, params)
            return True
        except sqlite3.Error:
            return False


# -- the cases -----------------------------------------------------------------------------------

def _rec_commands(path: str, folder: str, tui: bool, full: bool = True) -> list[list]:
    """The commands run on a tampered recording: ``full`` adds unified diff, lineage and dot (every
    third case of the big classes, to stay within a few minutes), ``tui`` the headless app."""
    cmds = [["ls", path], ["ls", path, "--json"], ["show", path, "--plain"], ["diff", path, "--side-by-side", "--plain"]]
    if full:
        cmds += [["diff", path, "--plain"], ["lineage", path, "--uid", "f0"], ["dot", path, "-o", os.path.join(folder, "g.dot")]]
    return cmds + ([["@tui", path]] if tui else [])


def _group_commands(path: str, folder: str) -> list[list]:
    return [["ls", path], ["ls", path, "--json"], ["ls", path, "--rank", "1"], ["show", path, "--rank", "1", "--plain"],
            ["diff", "--ranks", path], ["dot", path, "--rank", "1", "-o", os.path.join(folder, "g.dot")]]


def _bomb(size: int = 1 << 30) -> bytes:
    """zlib data that expands to ``size`` bytes of zeros (about 1 MB)."""
    z = zlib.compressobj(9)
    chunk = b"\0" * (64 << 20)
    parts = [z.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts) + z.flush()


def build_cases(rec: str, group: str, work) -> list[tuple[str, str, list]]:
    """Return (class, case name, commands) for every attack, the tampered files written under ``work``."""
    rng = random.Random(22)
    cases = []
    rows = _table_rows(rec)
    n = 0

    def copy(name: str) -> str:
        nonlocal n
        n += 1
        d = work / f"c{n:03d}"
        d.mkdir()
        dst = str(d / name)
        shutil.copyfile(rec, dst)
        return dst

    # type mutations of every column
    for table, col, decl in _columns(rec):
        if not rows.get(table):
            continue
        if "TEXT" in decl:
            choices = [b"\x00\xff\xfe", b"", 2 ** 62]  # TEXT affinity turns numbers into text
        elif "REAL" in decl:
            choices = ["x", b"\x00\x01", 1e308, -1e308, -1]
        else:
            choices = ["x", b"\x00\x01", 2 ** 63 - 1, -(2 ** 63), -1, 1.5]
        value = rng.choice(choices)
        path = copy("t.tvrec")
        if not _update(path, f"UPDATE {table} SET {col}=?", (value,)):
            continue
        cases.append(("type", f"type {table}.{col}={value!r:.20}",
                      _rec_commands(path, os.path.dirname(path), tui=n % 20 == 0, full=n % 3 == 0)))
    # deep JSON in every JSON column
    for table, col in JSON_COLUMNS:
        if not rows.get(table):
            continue
        path = copy("d.tvrec")
        with contextlib.closing(sqlite3.connect(path)) as c:
            was = c.execute(f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL LIMIT 1").fetchone()
        deep = zlib.compress(DEEP.encode()) if was and isinstance(was[0], bytes) else DEEP  # compressed column
        if _update(path, f"UPDATE {table} SET {col}=?", (deep,)):
            cases.append(("deep", f"deep {table}.{col}", _rec_commands(path, os.path.dirname(path), False)))
    # markup in every text column, then everywhere at once
    for k, (table, col) in enumerate(c for c in _text_columns(rec) if rows.get(c[0])):
        path = copy("m.tvrec")
        if _update(path, f"UPDATE {table} SET {col} = {col} || ?", (PAYLOAD,)):
            cases.append(("markup", f"markup {table}.{col}",
                          _rec_commands(path, os.path.dirname(path), tui=k % 8 == 0, full=k % 3 == 0)))
    path = copy("all.tvrec")
    poison_every_text_column(path)
    cases.append(("markup", "markup every column", _rec_commands(path, os.path.dirname(path), True)))
    d = work / "hostile"
    d.mkdir()
    path = write_hostile_recording(str(d / "h.tvrec"))
    cases.append(("markup", "markup through the writer", _rec_commands(path, str(d), True)))
    # schema objects
    for name, sql in [
        ("view over a recursive CTE as passes",
         "ALTER TABLE passes RENAME TO passes_old; CREATE VIEW passes AS WITH RECURSIVE r(x) AS "
         "(SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT p.* FROM passes_old p, r"),
        ("trigger", "CREATE TRIGGER t AFTER INSERT ON events BEGIN DELETE FROM run; END"),
        ("extra view", "CREATE VIEW v AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r"),
        ("virtual table", "CREATE VIRTUAL TABLE vt USING rtree(id, a, b)"),
    ]:
        path = copy("s.tvrec")
        with contextlib.closing(sqlite3.connect(path)) as c:
            try:
                c.executescript(sql)
            except sqlite3.Error:
                continue
        cases.append(("schema", f"schema {name}", _rec_commands(path, os.path.dirname(path), name == "trigger")))
    # schema 4's delta chains and symbol lists
    with contextlib.closing(sqlite3.connect(rec)) as c:
        delta = c.execute("SELECT graph_id, chain, idx, delta_base FROM passes WHERE delta_base IS NOT NULL"
                          " ORDER BY idx DESC LIMIT 1").fetchone()
    if delta is not None:
        g, ch, i, b = delta
        key = f"WHERE graph_id={g} AND chain='{ch}' AND idx={i}"
        from thundervis.recording import open_recording
        with open_recording(rec) as r:  # a delta copying its whole base again and again
            base_json = r.pass_json(g, ch, b)
        n = len(base_json.split('{"'))
        copies = zlib.compress(json.dumps([[0, n]] * ((300 << 20) // max(1, len(base_json)))).encode())
        for name, sql, params in [
                ("loops", f"UPDATE passes SET delta_base={i} {key}", ()),
                ("longer than the bound", "UPDATE passes SET delta_base = idx - 1 WHERE idx > 0", ()),
                ("missing base", f"DELETE FROM passes WHERE graph_id={g} AND chain='{ch}' AND idx={b}", ()),
                ("copies past the cap", f"UPDATE passes SET trace_json=? {key}", (copies,)),
                ("symbol list bomb", "UPDATE pass_symbols SET rows=?", (_bomb(),))]:
            path = copy("x.tvrec")
            if _update(path, sql, params):
                cases.append(("delta", f"delta {name}", _rec_commands(path, os.path.dirname(path), name == "loops")))
    # FIFOs
    d = work / "fifo"
    d.mkdir()
    fifo = str(d / "x.tvrec")
    os.mkfifo(fifo)
    cases.append(("fifo", "fifo x.tvrec", [["ls", fifo], ["show", fifo, "--plain"], ["@tui", fifo]]))
    gfifo = _group_copy(group, work / "gfifo")
    ranks = _rank_files(gfifo)
    if ranks:
        os.remove(ranks[-1])
        os.mkfifo(ranks[-1])
        cases.append(("fifo", f"fifo {os.path.basename(ranks[-1])} in a group", _group_commands(gfifo, str(work / "gfifo"))[:3]))
    # group files: rank file and launch file content, world size, compressed bombs
    tvrank = [r for r in _rank_files(group) if r.endswith(".tvrank")]
    launches = [f for f in os.listdir(group) if f.startswith("launch-node")]
    variants = []
    if tvrank:
        name = os.path.basename(tvrank[0])
        magic = open(tvrank[0], "rb").read().split(b"\n", 1)[0] + b"\n"
        variants += [("rank file nested 200,000 deep", name, magic + zlib.compress(("[" * 200_000 + "]" * 200_000).encode())),
                     ("rank file version '2'", name, magic + zlib.compress(json.dumps({"version": "2"}).encode())),
                     ("rank file bomb", name, magic + _bomb())]
    if launches:
        doc = json.load(open(os.path.join(group, launches[0])))
        for what, value in (("torchrun_args", 5), ("node_rank", "1e400"), ("node_rank", "NaN"),
                            ("world_size", 10 ** 12), ("target", [[[["x"]]]])):
            bad = dict(doc)
            bad[what] = value
            text = json.dumps(bad).replace('"1e400"', "1e400").replace('"NaN"', "NaN")
            variants.append((f"launch {what}={value!r}", launches[0], text.encode()))
        variants.append(("launch nested 200,000 deep", launches[0], ("[" * 200_000 + "]" * 200_000).encode()))
    for k, (label, name, data) in enumerate(variants):
        g = _group_copy(group, work / f"g{k}")
        with open(os.path.join(g, name), "wb") as f:
            f.write(data)
        cases.append(("group", f"group {label}", _group_commands(g, str(work / f"g{k}"))))
    # world size 1e12 in every rank's distributed event; a text bomb in traces.tvstore
    g = _group_copy(group, work / "gworld")
    for r in _rank_files(g):
        if r.endswith(".tvrec"):
            _update(r, "UPDATE events SET data=json_set(data, '$.world_size', 1e12) WHERE event='distributed'")
    cases.append(("group", "group world_size=1e12", _group_commands(g, str(work / "gworld"))))
    store = os.path.join(group, "traces.tvstore")
    if os.path.exists(store):
        g = _group_copy(group, work / "gbomb")
        ok = _update(os.path.join(g, "traces.tvstore"), "UPDATE blobs SET data=? WHERE rowid=(SELECT min(rowid) FROM blobs)",
                     (_bomb(),))
        if ok:
            cases.append(("bomb", "traces.tvstore text bomb", _group_commands(g, str(work / "gbomb"))))
    return cases


def _text_columns(path: str) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(path)) as c:
        return text_columns(c)


def _group_copy(group: str, dst) -> str:
    os.makedirs(dst, exist_ok=True)
    out = os.path.join(str(dst), os.path.basename(group))
    shutil.copytree(group, out)
    return out


def _rank_files(group: str) -> list[str]:
    return sorted(os.path.join(group, f) for f in os.listdir(group) if f.startswith("rank-"))


# -- running them --------------------------------------------------------------------------------

def run_cases(cases: list[tuple[str, str, list]], work) -> list[dict]:
    """Run every command of every case in driver processes; return one result dict per command
    (``verdict``: harmless, refused, failed; ``why`` for failures)."""
    pending = [(name, list(enumerate(cmds))) for _, name, cmds in cases]
    results: list[dict] = []
    spec = work / "batch.json"
    while pending:
        batch = pending[:25]
        spec.write_text(json.dumps([[name, [c for _, c in cmds]] for name, cmds in batch]))
        # The driver numbers a case's commands from 0 in the order sent; a case resent after an
        # interrupted batch holds only its remaining commands, so map the driver's numbers back.
        index_of = {name: [i for i, _ in cmds] for name, cmds in batch}
        env = {**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""),
               "TRITON_INTERPRET": "1"}
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fuzz_driver.py"), str(spec)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=str(work))
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout] + [lines.put(None)], daemon=True).start()
        done: dict = {}
        current, stop, rss_seen = None, None, 0.0
        while True:
            try:
                line = lines.get(timeout=PER_COMMAND_S + 5)
            except queue.Empty:
                stop = ("hang", current)
                break
            if line is None:
                stop = ("exit", current) if current is not None else None
                break
            msg = json.loads(line)
            if "start" in msg:
                name, i = msg["start"]
                current = (name, index_of[name][i])
                continue
            msg["i"] = index_of[msg["case"]][msg["i"]]
            current = None
            msg["verdict"], msg["why"] = _verdict(msg, rss_seen)
            rss_seen = max(rss_seen, msg["rss_mb"])
            done[(msg["case"], msg["i"])] = msg
            results.append(msg)
            if msg["why"] == "memory":  # later commands of this process would carry its peak
                stop = ("memory", None)
                break
        proc.kill()
        proc.wait()
        rest = []
        for name, cmds in batch:
            left = [(i, c) for i, c in cmds if (name, i) not in done]
            if stop and stop[1] is not None and stop[1][0] == name:
                i = stop[1][1]
                cmd = dict(cmds)[i]
                results.append({"case": name, "i": i, "argv": [str(a) for a in cmd], "verdict": "failed",
                                "why": "hang over 10 s" if stop[0] == "hang" else "the process died",
                                "err": "", "out": ""})
                left = []  # the case's other commands would hang the same way
            if left:
                rest.append((name, left))
        pending = rest + pending[len(batch):]
    return results


def _verdict(msg: dict, rss_before: float) -> tuple[str, str]:
    err = msg["err"].strip()
    if msg["rss_mb"] > MAX_RSS_MB and rss_before <= MAX_RSS_MB:
        return "failed", "memory"
    if msg["secs"] > PER_COMMAND_S:
        return "failed", f"took {msg['secs']:.0f} s"
    if msg["traceback"]:
        return "failed", "traceback: " + (err.splitlines() or ["?"])[-1][:200]
    for text in (msg["out"], msg["err"]):
        if "\x1b]" in text or "\u202e" in text or "\x07" in text:
            return "failed", "a control character reached the terminal"
    if msg["code"] == 0 or (msg["code"] == 1 and msg["argv"][:2] == ["diff", "--ranks"] and not err):
        return "harmless", ""  # (diff --ranks exits 1 when the ranks differ, like diff)
    if msg["code"] == 2 and len(err.splitlines()) == 1 and err.startswith("thundervis: "):
        return "refused", ""
    return "failed", f"exit {msg['code']}: {err[-200:]}"


@pytest.mark.slow
def test_attacks_give_exit_0_or_one_sentence(bases, tmp_path):
    rec, group = bases
    cases = build_cases(rec, group, tmp_path)
    results = run_cases(cases, tmp_path)
    klass = {name: k for k, name, _ in cases}
    counts: dict = {}
    for r in results:
        c = counts.setdefault(klass[r["case"]], {"attempts": 0, "harmless": 0, "refused": 0, "failed": 0})
        c["attempts"] += 1
        c[r["verdict"]] += 1
    failed = [r for r in results if r["verdict"] == "failed"]
    report = [f"{len(cases)} cases, {len(results)} command runs"]
    report += [f"  {k:<7} {v}" for k, v in sorted(counts.items())]
    report += [f"  FAILED {r['case']} · {' '.join(r['argv'][:1] + r['argv'][2:])}: {r['why']}" for r in failed]
    print("\n".join(report))
    (tmp_path / "report.txt").write_text("\n".join(report) + "\n")
    assert not failed, "\n".join(report)
    assert sum(c["attempts"] for c in counts.values()) > 800
