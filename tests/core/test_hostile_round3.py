"""Hostile recordings, round three (issue 41, items 3-5): small files that would cost gigabytes
to show, rebuilt as fixtures of a few KB to 1 MB, and a tampered pass trace handed to bisect.

Each case runs the real CLI in a subprocess under a 2 GiB address-space limit (``prlimit --as`` when
it exists, else ``resource.setrlimit`` in the child) and a timeout: it must exit 0 or 2 with no
traceback. What is built from a recording is budgeted from the recording's own counts (symbols,
lines, rows), so an over-budget part reads "too large to show" and the rest of the view works.
"""
from __future__ import annotations

import json
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


def json_bomb(base: str, folder) -> str:
    """A forward pass whose trace JSON is ~250 MiB of ``{"a":[]}`` objects (0.5 MB compressed)."""
    path = _copy(base, folder, "json_bomb.tvrec")
    blob = _zlib_of(b'{"a":[]},', 250 * MiB, b"[", b'{"a":[]}]')
    _sql(path, "UPDATE passes SET trace_json=?, delta_base=NULL WHERE chain='forward' AND trace_json IS NOT NULL",
         (blob,))
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
    """Every pass's symbol list is 240 MiB of ``,1`` steps: split before checking, 6 GB."""
    path = _copy(base, folder, "lineage_bomb.tvrec")
    _sql(path, "UPDATE pass_symbols SET rows=?", (_zlib_of(b",1", 240 * MiB, b"1"),))
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
