"""Hostile recordings, round three (issue 41, items 3-5): small files that would cost gigabytes
to show, rebuilt as fixtures of a few KB to 1 MB, and a tampered pass trace handed to bisect.

Each case runs the real CLI in a subprocess under a 2 GiB address-space limit (``prlimit --as`` when
it exists, else ``resource.setrlimit`` in the child) and a timeout: it must exit 0 or 2 with no
traceback. What is built from a recording is budgeted from the recording's own counts (symbols,
lines, rows), so an over-budget part reads "too large to show" and the rest of the view works.
"""
from __future__ import annotations

import json
import re
import os
import shutil
import sqlite3
import subprocess
import sys
import zlib

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from _synthetic_recording import SCRIPT, write_recording  # noqa: E402

AS_LIMIT = 2 * 2**30
TIMEOUT_S = 60
MiB = 2**20


def _zlib_of(chunk: bytes, total: int, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
    """zlib of ``prefix + chunk * n + suffix`` (``total`` bytes of chunks) without building it."""
    z = zlib.compressobj(9)
    out = [z.compress(prefix)]
    block = chunk * max(1, (1 * MiB) // len(chunk))
    done = 0
    while done < total:
        out.append(z.compress(block))
        done += len(block)
    out.append(z.compress(suffix))
    out.append(z.flush())
    return b"".join(out)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("round3") / "base.tvrec")
    write_recording(path, n_symbols=40)
    return path


def _copy(base: str, folder, name: str) -> str:
    out = os.path.join(str(folder), name)
    shutil.copy(base, out)
    return out


def _sql(path: str, sql: str, params=()) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def json_bomb(base: str, folder, mib: int = 250) -> str:
    """The first and last stored forward pass's trace JSON is ~``mib`` MiB of ``{"a":[]}`` objects
    (0.25 MB compressed each at 250 MiB; 4 MiB is already past the smallest object budget)."""
    path = _copy(base, folder, "json_bomb.tvrec")
    blob = _zlib_of(b'{"a":[]},', mib * MiB, b"[", b'{"a":[]}]')
    _sql(path, "UPDATE passes SET trace_json=?, delta_base=NULL WHERE chain='forward' AND idx IN"
         " ((SELECT MIN(idx) FROM passes WHERE chain='forward'), (SELECT MAX(idx) FROM passes WHERE chain='forward'"
         " AND trace_json IS NOT NULL))", (blob,))
    return path


def source_newlines(base: str, folder) -> str:
    """The recorded user source is 250 MiB of newlines (250 KB compressed)."""
    path = _copy(base, folder, "newlines.tvrec")
    _sql(path, "UPDATE sources SET text=?", (_zlib_of(b"\n", 250 * MiB),))
    return path


def pass_rows_bomb(base: str, folder) -> str:
    """Every pass's symbol list is ``1`` followed by 4M ``,0`` steps (8 KB compressed)."""
    path = _copy(base, folder, "rows_bomb.tvrec")
    _sql(path, "UPDATE pass_symbols SET rows=?", (zlib.compress(b"1" + b",0" * 4_000_000, 9),))
    return path


def lineage_rows_bomb(base: str, folder) -> str:
    """The first and last forward pass's symbol lists are 240 MiB of ``,1`` steps (split before
    checking, they took 6 GB)."""
    path = _copy(base, folder, "lineage_bomb.tvrec")
    _sql(path, "UPDATE pass_symbols SET rows=? WHERE chain='forward' AND pass_idx IN"
         " ((SELECT MIN(pass_idx) FROM pass_symbols WHERE chain='forward'),"
         " (SELECT MAX(pass_idx) FROM pass_symbols WHERE chain='forward'))", (_zlib_of(b",1", 240 * MiB, b"1"),))
    return path


def astral_code(base: str, folder) -> str:
    """A kernel with a valid region IR whose code is 250 MiB of astral characters (U+1D538, 4
    bytes each in UTF-8)."""
    import kernel_fixtures as kf
    path = kf.make_recording(os.path.join(str(folder), "astral.tvrec"),
                             [(0, "forward", kf.kernel_record(kf.region_trace("cpu", "fw_fusion_0")))])
    _sql(path, "UPDATE kernels SET code=?", (_zlib_of("\U0001d538".encode(), 250 * MiB),))
    return path


def tampered_trace(base: str, folder) -> str:
    """Every stored forward pass trace names ``torch.os.system`` where an op belongs."""
    path = _copy(base, folder, "tampered.tvrec")
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT idx, trace_json FROM passes WHERE chain='forward' AND trace_json IS NOT NULL"
                        " AND delta_base IS NULL").fetchall()
    for idx, blob in rows:
        text = zlib.decompress(blob).decode()
        d = json.loads(text)
        for s in d.get("symbols", []):
            if s.get("sym", "").startswith("aten."):
                s["sym"] = "torch.os.system"
                break
        conn.execute("UPDATE passes SET trace_json=? WHERE chain='forward' AND idx=?",
                     (zlib.compress(json.dumps(d).encode()), idx))
    conn.commit()
    conn.close()
    return path


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def run_limited(*argv: str, timeout: float = TIMEOUT_S) -> tuple[int, str, str]:
    """Run ``python -m thundervis ARGV`` under the 2 GiB address-space limit and ``timeout``;
    return (exit code, stdout, stderr). A timeout is exit 124."""
    cmd = [sys.executable, "-m", "thundervis", *argv]
    prlimit = shutil.which("prlimit")
    env = {**os.environ, "TRITON_INTERPRET": "1", "COLUMNS": "120"}
    kw = dict(capture_output=True, text=True, errors="replace", timeout=timeout, env=env)
    try:
        if prlimit:
            p = subprocess.run([prlimit, f"--as={AS_LIMIT}", "--", *cmd], **kw)
        else:
            p = subprocess.run(cmd, preexec_fn=_limit_memory, **kw)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out"
    return p.returncode, p.stdout, p.stderr


def _clean(code: int, out: str, err: str, argv) -> None:
    assert code in (0, 2), (argv, code, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, (argv, err[-2000:])
    assert "MemoryError" not in err, (argv, err[-2000:])


CASES = {
    "json_bomb": (json_bomb, [["show", "{p}", "--chain", "forward"], ["ls", "{p}"],
                              ["diff", "{p}", "--chain", "forward", "--from", "acquire", "--to", "codegen"],
                              ["dot", "{p}", "--chain", "forward", "-o", "{d}/x.dot"],
                              ["source", "{p}"], ["lineage", "{p}", "--uid", "f1"],
                              ["bisect", "{p}", "--chain", "forward"]]),
    "source_newlines": (source_newlines, [["source", "{p}"], ["source", "{p}", "--json"], ["ls", "{p}"],
                                          ["show", "{p}", "--chain", "forward"]]),
    "pass_rows_bomb": (pass_rows_bomb, [["source", "{p}"], ["lineage", "{p}", "--uid", "f1"], ["ls", "{p}"]]),
    "lineage_rows_bomb": (lineage_rows_bomb, [["lineage", "{p}", "--uid", "f1"],
                                              ["lineage", "{p}", "--source", f"{SCRIPT}:12"], ["source", "{p}"]]),
    "astral_code": (astral_code, [["rerun", "{p}", "fw_fusion_0", "--iters", "1", "--no-store"],
                                  ["repro", "{p}", "fw_fusion_0", "-o", "{d}/repro.py"], ["ls", "{p}"]]),
    "tampered_trace": (tampered_trace, [["bisect", "{p}", "--chain", "forward"]]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_exits_cleanly_under_2_gib(base, tmp_path, case):
    build, commands = CASES[case]
    path = build(base, tmp_path)
    assert os.path.getsize(path) < 2 * MiB
    for argv in commands:
        argv = [a.format(p=path, d=str(tmp_path)) for a in argv]
        code, out, err = run_limited(*argv)
        _clean(code, out, err, argv)


# -- fast, in-process checks of the same budgets ---------------------------------------------------

def test_a_source_of_250_mib_of_newlines_is_too_large_and_the_view_keeps_the_code_lines(base, tmp_path):
    from thundervis.present.source_view import source_file
    from thundervis.recording import TooLarge, open_recording
    path = source_newlines(base, tmp_path)
    with open_recording(path) as rec:
        file = rec.source_files()[0]
        with pytest.raises(TooLarge, match=r"too large to show \(over 8.0 MiB\)"):
            rec.source_lines(file)
        view = source_file(rec, file)
        assert not view.recorded and view.lines and "too large to show" in view.note
        assert "file text too large to show" in view.summary()
        snippet = rec.source_snippet(view.lines[0].ops[0] and rec.symbols(0, "forward", 0)[0].source)
        assert snippet is not None and snippet.recorded  # only the lines up to there are streamed


def test_symbol_lists_longer_than_the_recording_has_rows_are_refused_before_splitting(base, tmp_path):
    from thundervis.recording import TooLarge, open_recording
    with open_recording(pass_rows_bomb(base, tmp_path)) as rec:
        with pytest.raises(TooLarge, match="symbol list .* too large to show"):
            rec.symbols(0, "forward", 0)
        assert rec.graphs()  # the rest of the recording reads
        from thundervis.present.source_view import source_file
        view = source_file(rec, rec.source_files()[0])  # the Source view shows the file, says what it left out
        assert "too large to show" in view.note  # every chain here: no ops, but no exit either
        assert "some ops too large to show" in view.summary()


def test_a_trace_json_of_tiny_objects_is_too_large_before_it_is_parsed(base, tmp_path, monkeypatch):
    import json as json_module
    from thundervis.recording import TooLarge, open_recording
    parsed, real_loads = [], json_module.loads
    monkeypatch.setattr(json_module, "loads", lambda text, *a, **k: (
        parsed.append(len(text)) if len(text) > MiB else None, real_loads(text, *a, **k))[1])
    with open_recording(json_bomb(base, tmp_path)) as rec:
        last = rec.graph(0).chain("forward").passes[-1]
        with pytest.raises(TooLarge, match="too large to show"):
            rec.pass_trace(last.ref)
        assert rec.pass_text(rec.graph(0).chain("backward").passes[-1].ref)  # other passes still read
    assert not parsed


def test_kernel_code_over_its_budget_reads_as_too_large_and_the_ir_still_rebuilds(base, tmp_path):
    from thundervis.recording import open_recording
    with open_recording(astral_code(base, tmp_path)) as rec:
        k = rec.find_kernel("fw_fusion_0")
        src = rec.kernel_source(k)
        assert src.code.startswith("#") and "too large to show" in src.code and len(src.code) < 200
        assert json.loads(src.trace_json)["symbols"]


def test_events_are_read_paged_under_a_cap(base, tmp_path, monkeypatch):
    from thundervis.recording import event_rows, open_recording
    path = _copy(base, tmp_path, "events.tvrec")
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO events(event, data, at) VALUES ('kernel_path', '{}', ?)", [(float(i),) for i in range(300)])
    conn.commit()
    conn.close()
    monkeypatch.setattr(event_rows, "MAX_EVENTS", 120)
    monkeypatch.setattr(event_rows, "EVENT_PAGE", 50)
    with open_recording(path) as rec:
        every = rec.events()
        assert len(every) == 120 and rec._events.capped
        assert all(e.event == "kernel_path" for e in rec.events("kernel_path"))
        assert [e.event for e in rec.events("distributed")] == [e.event for e in every if e.event == "distributed"]


@pytest.fixture
def _counted_group(base, tmp_path, monkeypatch):
    from thundervis.recording import file_store
    group = tmp_path / "job"
    group.mkdir()
    for r in range(6):
        shutil.copy(base, group / f"rank-{r:05d}.tvrec")
    listed, opened, checked = [], [], []
    real_listdir, real_open = os.listdir, file_store.FileStore._open_checked.__func__
    monkeypatch.setattr(os, "listdir", lambda p=".": (listed.append(os.path.abspath(p)), real_listdir(p))[1])
    monkeypatch.setattr(file_store.FileStore, "_open_checked", classmethod(
        lambda cls, path, check: (opened.append(path), checked.append(check), real_open(cls, path, check))[2]))
    monkeypatch.setattr(sys.modules[__name__], "_checked", checked, raising=False)
    return str(group), listed, opened


@pytest.mark.parametrize("argv", [["numerics"], ["ls", "--rank", "3"]])
def test_group_commands_are_linear_in_the_ranks(_counted_group, capsys, argv):
    from core_helpers import run_cli
    group, listed, opened = _counted_group
    code, out, err = run_cli(capsys, argv[0], group, *argv[1:])
    assert code in (0, 2) and "Traceback" not in err
    n_list = sum(1 for p in listed if p == os.path.abspath(group))
    if argv[0] == "numerics":  # every rank once, the folder a constant number of times
        assert sorted(opened) == sorted(os.path.join(group, f"rank-{r:05d}.tvrec") for r in range(6))
        assert n_list <= 5, n_list
        assert not any(_checked)  # no whole-file quick_check per rank: it read the whole group
    else:  # one named rank: that rank's file only, not every rank's overview
        assert opened == [os.path.join(group, "rank-00003.tvrec")] and n_list <= 5


def test_ls_group_decodes_only_each_chains_final_trace_and_still_tells_variants(base, _counted_group, capsys,
                                                                                 monkeypatch):
    from core_helpers import run_cli
    from thundervis.recording import group_texts, open_recording
    group, _, _ = _counted_group
    decoded, real = [], group_texts.canonical_trace_json
    monkeypatch.setattr(group_texts, "canonical_trace_json", lambda text: (decoded.append(1), real(text))[1])
    with open_recording(base) as rec:
        n_chains = sum(len(g.chains) for g in rec.graphs())
    code, out, err = run_cli(capsys, "ls", group)
    assert code == 0 and "identical on every rank" in out, err
    assert len(decoded) == 6 * n_chains  # not every pass of every rank: ls on 2,000 ranks took 50 s
    other = os.path.join(group, "rank-00005.tvrec")  # a rank whose final forward trace differs
    conn = sqlite3.connect(other)
    idx, blob = conn.execute("SELECT idx, trace_json FROM passes WHERE chain='forward' AND trace_json IS NOT NULL"
                             " ORDER BY idx DESC LIMIT 1").fetchone()
    d = json.loads(zlib.decompress(blob))
    d["symbols"] = d["symbols"][::-1]
    conn.execute("UPDATE passes SET trace_json=? WHERE chain='forward' AND idx=?", (zlib.compress(json.dumps(d).encode()), idx))
    conn.commit()
    conn.close()
    code, out, err = run_cli(capsys, "ls", group)
    assert code == 0 and "differ between ranks: 2 variants" in out and "ranks 0-4" in out, out + err


def test_a_bombed_pass_is_left_out_and_the_rest_of_the_recording_shows(base, tmp_path, capsys):
    from core_helpers import run_cli
    path = json_bomb(base, tmp_path, mib=4)  # 930k objects: over the 500k budget, quick to inflate
    too_large = r"too large to show \([\d.]+ MiB\)"
    code, out, err = run_cli(capsys, "show", path)  # the default pass is the bombed one: named, not refused
    assert code == 0 and not err and len(out.splitlines()) == 1, out + err
    assert re.search(r"# graph 0 · forward · after \d+ \w+: the trace is " + too_large, out)
    code, out, err = run_cli(capsys, "show", path, "--chain", "backward")
    assert code == 0 and "return (" in out and "too large" not in out, err
    code, out, err = run_cli(capsys, "diff", path, "--chain", "backward")
    assert code == 0 and "too large" not in out + err
    code, out, err = run_cli(capsys, "dot", path, "--chain", "backward", "-o", str(tmp_path / "b.dot"))
    assert code == 0 and (tmp_path / "b.dot").read_text().startswith("digraph")
    code, out, err = run_cli(capsys, "ls", path)
    assert code == 0 and "forward    compiled · 12 passes" in out
    code, out, err = run_cli(capsys, "diff", base, path)  # the run comparison leaves that chain out, says so
    assert code == 0 and "no fusion differences" in out and re.search("forward pass 11: the trace is " + too_large, out)
    for argv in (["dot", path, "-o", str(tmp_path / "f.dot")], ["diff", path], ["bisect", path, "--chain", "forward"]):
        code, out, err = run_cli(capsys, *argv)  # only the bombed part is refused, in one sentence
        assert code == 2 and re.search(r"graph 0 forward pass \d+ is " + too_large, err), (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_every_front_end_shows_the_source_views_note(base, tmp_path, capsys):
    from core_helpers import run_cli
    from thundervis.notebook_ext.widget import front_end
    path = source_newlines(base, tmp_path)
    code, out, err = run_cli(capsys, "source", path)
    lines = out.splitlines()
    assert code == 0 and "file text too large to show" in lines[0], err
    note = " ".join(x.strip() for x in lines[1:4])  # present's sentence, wrapped under the summary
    assert lines[1].startswith("note: ") and "too large to show" in note
    assert "\x1b" not in out
    code, out, err = run_cli(capsys, "source", path, "--json")
    assert code == 0 and "too large to show" in json.loads(out)["note"]
    js = front_end()
    part = js[js.index("function sourceTab("):]
    part = part[:part.index("\n}\n")]
    assert 'class: "tv-muted tv-source-note"' in part and "setText(note, view.note" in part  # as text, visible()
