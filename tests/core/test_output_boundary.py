"""One output boundary (issue 41): every command, with the escape payload planted in each text
column of a small real recording in turn, writes no raw ESC, C1 control, bidi control or
unencodable lone surrogate to stdout or stderr, and exits 0 or 2 with no traceback.

The recording is written by the real writer (a source file, a fusion with source lines, an sm_90
build with line provenance, timings, numerics); :func:`plant` then rewrites one column of a copy:
JSON text has the payload appended to each of its strings (a lone surrogate as JSON's ``\\ud800``),
compressed text is expanded, planted and compressed again, plain text gets the payload appended.
Each command runs in-process with stdout and stderr being strict UTF-8 streams, so what is checked
is the bytes a terminal would receive, and a lone surrogate printed raw fails as it does for a user.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sqlite3
import sys
import zlib

import pytest

from hostile_payloads import text_columns
from roofline_fixtures import build_record

from thundervis.cli import main
from thundervis.compiler.ir import BoundSymbol, SourceInfo, Trace, TensorProxy

# Title set (OSC 0), a hidden hyperlink (OSC 8), CSI, 8-bit CSI and OSC, RLO, an isolate, BOM.
PAYLOAD = ("\x1b]0;title\x07 \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \x1b[2J"
           " \x9b31m \x9d0;t\x9c \u202eabc \u2066x\u2069 \u200f \x7f")
SURROGATE = "\ud800"
KERNEL = "triton_fusion_0"
# What must never reach the terminal: ESC, BEL, C1 controls (U+0080-U+009F, as UTF-8 C2 80-C2 9F),
# DEL, bidi marks/embeddings/overrides/isolates, and surrogates (CESU-like ED A0-BF .. bytes).
_RAW = re.compile(rb"\x1b|\x07|\x7f|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
                  rb"|\xd8\x9c|\xed[\xa0-\xbf]")


def write_base(folder: str) -> str:
    """Write the clean recording every case starts from into ``folder``; return its path."""
    from thundervis.compiler.serialize import _proxy_json, trace_to_dict
    from thundervis.recording import RecordingObserver
    model = os.path.join(folder, "model.py")
    with open(model, "w") as f:
        f.write("import torch\n\ndef f(x, b):\n    return torch.tanh(x + b)\n")
    a = TensorProxy("a", (4, 8), "float32", "cpu", (8, 1))
    b = TensorProxy("b", (8,), "float32", "cpu", (1,))
    t0 = TensorProxy("t0", (4, 8), "float32", "cpu", (8, 1))
    t1 = TensorProxy("t1", (4, 8), "float32", "cpu", (8, 1))
    src = SourceInfo(file=model, line=4, code="return torch.tanh(x + b)", module="fc")
    add = BoundSymbol("prims.add", (a, b), {}, t0, "f3", source=src, aten="aten.add.Tensor", note="why")
    tanh = BoundSymbol("prims.tanh", (t0,), {}, t1, "f4", source=src, aten="aten.tanh.default")
    before = Trace("forward", (a, b), (add, tanh), (t1,), chain="forward", graph=0, pass_name="acquire")
    fused = BoundSymbol(KERNEL, (a, b), {}, (t1,), "f9", origin=("f3", "f4"), source=src,
                        subsymbols=(add, tanh), executor="triton", note="fused")
    after = before.replace(symbols=(fused,), pass_name="fuse")
    region = Trace(KERNEL, (a, b), (add, tanh), (t1,), chain="forward", graph=0, pass_name="fuse")
    record = {"name": KERNEL, "executor": "triton", "uid": "f9", "members": ["f3", "f4"],
              "ops": ["prims.add", "prims.tanh"], "code": "# code\n", "language": "python",
              "inputs": [_proxy_json(p) for p in region.inputs],
              "outputs": [_proxy_json(p) for p in region.flat_outputs()],
              "source_lines": [{"file": model, "line": 4, "code": src.code, "module": "fc", "direction": "forward"}],
              "pass": "fuse", "note": "fused", "trace": trace_to_dict(region)}
    build = build_record()
    build["members"] = {"f3": {"sym": "prims.add", "file": model, "line": 4},
                        "f4": {"sym": "prims.tanh", "file": model, "line": 4}}
    timing = {"name": KERNEL, "uid": "f9", "kind": "fusion", "executor": "triton", "index": 0, "calls": 3,
              "median_us": 5.0, "min_us": 5.0, "max_us": 5.0, "total_us": 15.0, "share": 1.0,
              "bytes_read": 0, "bytes_written": 0, "gbps": 0.0}
    path = os.path.join(folder, "base.tvrec")
    with RecordingObserver(path) as rec:
        rec.start_run(script=model, module=None, argv=["model.py", "--lr", "1"], cwd=folder)
        rec.graph_started(0, {"n_inputs": 2, "n_nodes": 2, "reason": "first call"})
        rec.pass_done(0, "forward", 0, "acquire", before, 0.001, True)
        rec.pass_done(0, "forward", 1, "fuse", after, 0.001, True)
        rec.pass_done(0, "forward", 2, "codegen", after.replace(pass_name="codegen"), 0.001, False)
        rec.kernels_built(0, "forward", [record])
        rec.note("aot_started", {"targets": ["sm_90"], "workers": 1})
        rec.kernel_compiled(0, "forward", KERNEL, "sm_90", build)
        rec.runtime(0, "forward", "timings", {"clock": "host", "device": "cpu", "calls": 3, "symbols": [timing],
                                              "step": {"median_us": 5.0, "min_us": 5, "max_us": 5, "total_us": 15}})
        rec.runtime(0, "forward", "numerics", [{"kernel": KERNEL, "uid": "f9", "executor": "triton",
                                                "verdict": "flagged", "max_abs": 0.5, "max_rel": 0.1,
                                                "detail": "off by a half"}])
        rec.note("note", {"why": "a note"})
        rec.chain_failed(0, "backward", "boom", "Traceback: boom")
        rec.graph_finished(0, 0.01)
        rec.finish_run("failed", 1, "Traceback (most recent call last):\n  boom\nError: boom")
    return path


# ------------------------------------------------------------------------------ planting

def _plant_json(value, payload: str):
    """Return ``value`` (parsed JSON) with ``payload`` appended to every string in it (keys kept)."""
    if isinstance(value, str):
        return value + payload
    if isinstance(value, list):
        return [_plant_json(v, payload) for v in value]
    if isinstance(value, dict):
        return {k: _plant_json(v, payload) for k, v in value.items()}
    return value


def _plant_text(text: str, payload: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text + payload
    if isinstance(value, (dict, list, str)):
        return json.dumps(_plant_json(value, payload))  # ASCII: a lone surrogate as \ud800
    return text + payload


def plant(path: str, table: str, column: str) -> int:
    """Plant the payload in every non-NULL value of ``table.column`` of the recording at ``path``;
    return how many values changed. A lone surrogate goes where the file can hold one: in JSON
    text and in compressed text."""
    n = 0
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        c.text_factory = bytes  # read what is stored, whatever its encoding
        rows = c.execute(f"SELECT rowid, {column} FROM {table} WHERE {column} IS NOT NULL").fetchall()
        types = dict(c.execute(f"SELECT rowid, typeof({column}) FROM {table} WHERE {column} IS NOT NULL").fetchall())
        for rowid, value in rows:
            if types[rowid] == b"blob":
                try:
                    text = zlib.decompress(value).decode("utf-8", "surrogatepass")
                except (zlib.error, UnicodeDecodeError):
                    continue  # a binary blob (a row list): not text
                new = zlib.compress(_plant_text(text, PAYLOAD + SURROGATE).encode("utf-8", "surrogatepass"))
            elif types[rowid] == b"text":
                try:
                    text = value.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                # JSON text holds a lone surrogate as an escape; plain text cannot hold one (sqlite
                # takes only encodable str)
                is_json = text.lstrip().startswith(("{", "[", '"'))
                new = _plant_text(text, PAYLOAD + SURROGATE if is_json else PAYLOAD)
            else:
                continue
            try:
                c.execute(f"UPDATE {table} SET {column}=? WHERE rowid=?", (new, rowid))
            except sqlite3.IntegrityError:  # a CHECKed column (run.status) cannot hold it
                continue
            n += 1
    return n


# ------------------------------------------------------------------------------ running

class _Bytes(io.TextIOWrapper):
    """A strict UTF-8 text stream over bytes, like a terminal's: a lone surrogate raises."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n", write_through=True)

    def isatty(self) -> bool:
        return False

    def raw_bytes(self) -> bytes:
        self.flush()
        return self.buffer.getvalue()


def run_bytes(*argv) -> tuple[int, bytes, bytes]:
    """Run the CLI in-process; return (exit code, stdout bytes, stderr bytes)."""
    out, err = _Bytes(), _Bytes()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
        except Exception as e:  # what a user would see as a traceback
            import traceback
            err.write("Traceback (most recent call last):\n" + "".join(traceback.format_exception(e)))
            code = 1
    finally:
        sys.stdout, sys.stderr = old
    return code, out.raw_bytes(), err.raw_bytes()


def commands(path: str, folder) -> list[list]:
    """Every command that prints what a recording holds, in its text and JSON forms."""
    model = "model.py"
    return [
        ["ls", path], ["ls", path, "--json"], ["ls", path, "--brief"],
        ["show", path, "--plain"], ["show", path, "--uids"], ["show", path, "--pass", "1"],
        ["source", path], ["source", path, "--json"], ["source", path, "--annotated"],
        ["lineage", path, "--uid", "f3"], ["lineage", path, "--source", f"{model}:4"],
        ["lineage", path, "--uid", "f3", "--json"],
        ["diff", path, "--plain"], ["diff", path, "--json"], ["diff", path, "--side-by-side", "--plain"],
        ["diff", path, path], ["diff", path, path, "--json"],
        ["dot", path, "-o", os.path.join(folder, "g.dot")],
        ["asm", path, KERNEL], ["asm", path, KERNEL, "--json"], ["asm", path, KERNEL, "--stage", "ptx"],
        ["asm", path, KERNEL, "--source", f"{model}:4"],
        ["numerics", path], ["numerics", path, "--json"],
        ["export", path, "--perfetto", os.path.join(folder, "p.json")],
        ["rerun", "--executor", "torch", "--iters", "1", "--no-store", path, "--", KERNEL],
        ["rerun", "--executor", "torch", "--iters", "1", "--no-store", "--json", path, "--", KERNEL],
        ["repro", "-o", os.path.join(folder, "r.py"), path, "--", KERNEL],
        ["bisect", path, "--chain", "forward", "--inputs", "random"],
        ["bisect", path, "--chain", "forward", "--inputs", "random", "--json"],
    ]


def check(argv, code: int, out: bytes, err: bytes) -> None:
    """Exit 0 or 2 (a one-sentence error; bisect: 1 for a divergence found), no traceback, no raw
    control byte in stdout or stderr."""
    shown = (argv, code, out[-1500:], err[-3000:])
    assert code in ((0, 1, 2) if argv[0] == "bisect" else (0, 2)) and b"Traceback (most recent call last)" not in err, shown
    if code == 2:
        assert len(err.strip().splitlines()) == 1, shown
    for stream in (out, err):
        m = _RAW.search(stream)
        assert m is None, (argv, stream[max(0, m.start() - 80):m.end() + 80])
    if b"--json" in [str(a).encode() for a in argv] and code == 0:
        json.loads(out)  # the escapes keep it JSON


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    return write_base(str(tmp_path_factory.mktemp("boundary")))


def test_the_base_recording_runs_every_command_cleanly(base, tmp_path):
    """Every command works on the clean file (so the planted cases test the printing, not a
    recording every command refuses)."""
    for argv in commands(base, tmp_path):
        code, out, err = run_bytes(*argv)
        assert code == 0 or argv[0] in ("repro",) and code == 2, (argv, code, err[-2000:])
        check(argv, code, out, err)


def _columns(path: str) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(path)) as c:
        return [(t, col) for t, col in text_columns(c)
                + [(t, r[1]) for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")
                   for r in c.execute(f"PRAGMA table_info({t})") if "BLOB" in (r[2] or "").upper()]
                if c.execute(f"SELECT 1 FROM {t} WHERE {col} IS NOT NULL LIMIT 1").fetchone()]


def _column_ids():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        return [f"{t}.{c}" for t, c in _columns(write_base(d))]


# The columns the default run plants (the ones issue 41 found printed raw, and one of each kind of
# text: names, JSON, compressed text); the rest of the walk is marked slow (about 1 s a column).
FAST = {"sources.text", "kernel_builds.summary", "kernel_builds.target", "kernel_build_stages.stages",
        "kernels.name", "kernels.source_lines", "passes.name", "passes.trace_json", "symbol_sources.code",
        "events.data", "run.argv", "kernel_numerics.detail"}
COLUMNS = [c if c in FAST else pytest.param(c, marks=pytest.mark.slow) for c in _column_ids()]


@pytest.mark.parametrize("column", COLUMNS)
def test_every_command_on_every_planted_column(base, tmp_path, column):
    table, col = column.split(".")
    path = str(tmp_path / "planted.tvrec")
    shutil.copyfile(base, path)
    if not plant(path, table, col):
        pytest.skip(f"{column} cannot hold the payload (a CHECKed value or a binary row list)")
    for argv in commands(path, tmp_path):
        if argv[0] in ("rerun", "repro", "bisect") and table not in ("kernels", "passes", "run", "symbol_rows"):
            continue  # they read the kernel, its trace and the run: another column changes nothing there
        code, out, err = run_bytes(*argv)
        check(argv, code, out, err)


def test_asm_prints_recorded_uids_ops_and_files_visibly(base, tmp_path, capsys):
    """Issue 41 item 1: line_uids values and members' sym/file of kernel_builds.summary, planted
    consistently (so the rows still find their members), reach the terminal made visible."""
    path = str(tmp_path / "asm.tvrec")
    shutil.copyfile(base, path)
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        (summary,) = c.execute("SELECT summary FROM kernel_builds").fetchone()
        s = json.loads(summary)
        uid = {u: u + PAYLOAD + SURROGATE for u in s["members"]}
        s["line_uids"] = {k: uid[v] for k, v in s["line_uids"].items()}
        s["members"] = {uid[u]: {**m, "sym": m["sym"] + PAYLOAD, "file": m["file"] + PAYLOAD + SURROGATE}
                        for u, m in s["members"].items()}
        s["plan"]["grid"] = "16" + PAYLOAD
        c.execute("UPDATE kernel_builds SET summary=?", (json.dumps(s),))
    for argv in (["asm", path, KERNEL], ["asm", path, KERNEL, "--stage", "ptx"], ["asm", path, KERNEL, "--json"],
                 ["ls", path]):
        code, out, err = run_bytes(*argv)
        check(argv, code, out, err)
        assert code == 0, (argv, err)
        if argv[-1] != "--json" and argv[0] == "asm":
            text = out.decode()
            assert "f3\\x1b]0;title\\x07" in text and "\\u202eabc" in text and "\\ud800" in text, text[-1500:]
    from thundervis.present.asm import asm_listing
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        listing = asm_listing(rec, rec.find_kernel(KERNEL, 0, "forward"))
    mapped = [r for r in listing.rows if r.uid]
    assert mapped and all(listing.build.members.get(r.uid) for r in mapped)  # uids still match
    for r in mapped:
        for v in (r.uid, r.sym, r.file, r.where):
            assert v and not re.search("[\x1b\x07\x9b\x9d\u202e\u2066\ud800]", v), v
    assert all(not re.search("[\x1b\u202e\ud800]", u) for u in listing.build.line_uids.values())


def test_a_lone_surrogate_in_a_source_text_prints(base, tmp_path):
    """Issue 41 item 5: ``sources.text`` holding a lone surrogate: source and source --json print it
    escaped (no UnicodeEncodeError)."""
    path = str(tmp_path / "s.tvrec")
    shutil.copyfile(base, path)
    assert plant(path, "sources", "text") == 1
    for argv in (["source", path], ["source", path, "--json"]):
        code, out, err = run_bytes(*argv)
        check(argv, code, out, err)
        # shown escaped (or replaced by U+FFFD where the reader decodes line by line), the rest too
        assert code == 0 and b"\\u202eabc" in out and (b"\\ud800" in out or "\ufffd".encode() in out), \
            (argv, out[-800:], err)


def test_json_outputs_escape_c1_bidi_and_surrogates_but_keep_the_data():
    from thundervis.safe_text import json_text
    value = {"a": PAYLOAD + SURROGATE + " café → ok", "n": [1, None, 2.5]}
    text = json_text(value, indent=1)
    assert not _RAW.search(text.encode("utf-8")) and "café → ok" in text
    assert json.loads(text) == value
