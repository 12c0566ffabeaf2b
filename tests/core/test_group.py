"""Groups (one recording per rank in a folder): reading, packing traces once per group, rank
comparison. Built from ordinary recordings copied in as rank files; torchrun runs are in
test_distributed_runs.py."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest

from thundervis.present.default_view import pick_chain, pick_pass
from thundervis.recording import RecordingError, open_recording
from thundervis.recording.group import is_group, open_group
from thundervis.recording.group_store import STORE_NAME, pack_group

from core_helpers import run_cli


def _add_rank_event(path: str, rank: int, world: int) -> None:
    """Give a copied recording the ``distributed`` event a torchrun worker records."""
    c = sqlite3.connect(path)
    with c:
        c.execute("INSERT INTO events(event, data, at) VALUES ('distributed', ?, 0)",
                  (json.dumps({"rank": rank, "local_rank": rank, "world_size": world}),))
    c.close()


def _group(tmp_path, sources: list[str]) -> str:
    g = tmp_path / "job.tvgroup"
    g.mkdir()
    for rank, src in enumerate(sources):
        dst = str(g / f"rank-{rank:05d}.tvrec")
        shutil.copy(src, dst)
        _add_rank_event(dst, rank, len(sources))
    return str(g)


def _everything(path: str) -> dict:
    """Every text a view can ask for, per pass and kernel."""
    out = {}
    with open_recording(path) as rec:
        for g in rec.graphs():
            for c in g.chains:
                for p in c.passes:
                    out[("text", p.ref)] = rec.pass_text(p.ref)
                    out[("trace", p.ref)] = rec.pass_trace(p.ref)
                    out[("symbols", p.ref)] = [(s.uid, s.sym, s.origin, s.source) for s in rec.symbols(p.ref)]
            for k in g.kernels:
                src = rec.kernel_source(k)
                out[("kernel", k.name)] = (src.code, json.loads(src.trace_json) if src.trace_json else None)
        for f in rec.source_files():
            out[("source", f)] = rec.source_text(f)
    return out


def test_packing_keeps_every_text_and_stores_identical_traces_once(recorded, tmp_path):
    path, _ = recorded
    before = _everything(path)
    group = _group(tmp_path, [path, path, path])
    one = os.path.getsize(path)
    assert pack_group(group) == (3, 0)
    assert os.path.exists(os.path.join(group, STORE_NAME))
    total = sum(os.path.getsize(os.path.join(group, n)) for n in os.listdir(group))
    assert total < 2 * one, (total, one)  # three ranks cost less than two unpacked recordings
    names = sorted(os.listdir(group))
    assert names == ["rank-00000.tvrec", "rank-00001.tvrank", "rank-00002.tvrank", STORE_NAME], names
    for rank in range(3):
        after = _everything(open_group(group).rank_path(rank))
        assert after.keys() == before.keys()
        for key in before:
            assert after[key] == before[key], key
    assert pack_group(group) == (0, 1)  # already packed: left as they are


def test_rank_files_sent_alone_open_or_say_what_is_missing(recorded, tmp_path):
    path, _ = recorded
    group = _group(tmp_path, [path, path])
    pack_group(group)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(os.path.join(group, "rank-00000.tvrec"), alone / "r0.tvrec")
    with open_recording(str(alone / "r0.tvrec")) as rec:
        assert rec.run().status == "ok" and rec.graphs()  # run, graphs, passes, kernels: all there
        with pytest.raises(RecordingError, match=r"traces\.tvstore.*missing.*whole group folder"):
            rec.pass_text(pick_pass(rec.graphs())[2].ref)
    shutil.copy(os.path.join(group, "rank-00001.tvrank"), alone / "rank-00001.tvrank")
    with pytest.raises(RecordingError, match=r"rank-00000\.tvrec.*traces\.tvstore.*whole group folder"):
        open_recording(str(alone / "rank-00001.tvrank"))
    with open_recording(os.path.join(group, "rank-00001.tvrank")) as rec:  # in its folder: a recording
        assert [e.data["rank"] for e in rec.events("distributed")] == [1]
    ov = open_group(group).overview()
    assert all(not r.missing for r in ov.ranks)
    os.remove(os.path.join(group, STORE_NAME))
    ov = open_group(group).overview()
    assert all(r.missing and STORE_NAME in r.missing[0] for r in ov.ranks)


def test_a_store_that_does_not_match_is_reported_not_shown(recorded, tmp_path):
    path, _ = recorded
    group = _group(tmp_path, [path])
    pack_group(group)
    c = sqlite3.connect(os.path.join(group, STORE_NAME))
    with c:
        import zlib
        fp = c.execute("SELECT fp FROM blobs ORDER BY size DESC LIMIT 1").fetchone()[0]
        c.execute("UPDATE blobs SET data=? WHERE fp=?", (zlib.compress(b"def evil(): pass"), fp))
    c.close()
    with open_recording(open_group(group).rank_path(0)) as rec:
        with pytest.raises(RecordingError, match="corrupted|fingerprint"):
            for g in rec.graphs():
                for ch in g.chains:
                    for p in ch.passes:
                        rec.pass_text(p.ref)
                for k in g.kernels:
                    rec.kernel_source(k)


def test_ls_show_and_diff_ranks_on_a_group(recorded, tmp_path, capsys):
    path, _ = recorded
    other = str(tmp_path / "other.tvrec")
    from core_helpers import write_script
    from thundervis.runner import check_output, run_target
    script = write_script(tmp_path, "train_other.py", """
        model(torch.randn(6, 8)).backward()
    """)
    run_target(script=script, module=None, args=[], out=check_output(other), executors=["torch"])
    group = _group(tmp_path, [path, path, other])
    pack_group(group)
    assert is_group(group) and not is_group(path)
    code, out, err = run_cli(capsys, "ls", group)
    assert code == 0, err
    assert "3 ranks" in out and "differ between ranks: 2 variants" in out
    assert "ranks 0-1" in out and "ranks 2" in out
    code, out, _ = run_cli(capsys, "ls", group, "--json")
    d = json.loads(out)
    assert [r["rank"] for r in d["ranks"]] == [0, 1, 2] and not d["identical"]
    assert d["ranks"][0]["fingerprint"] == d["ranks"][1]["fingerprint"] != d["ranks"][2]["fingerprint"]
    code, out, _ = run_cli(capsys, "ls", group, "--rank", "1")
    assert code == 0 and "rank    1 of 3" in out
    code, shown, _ = run_cli(capsys, "show", group, "--rank", "2", "--plain", "--signature")
    with open_recording(other) as rec:
        assert shown == rec.pass_text(pick_pass(rec.graphs())[2].ref)
    code, _, err = run_cli(capsys, "show", group, "--rank", "7")
    assert code == 2 and "no rank 7" in err and "0, 1, 2" in err
    code, out, err = run_cli(capsys, "diff", "--ranks", group)
    assert code == 1, err
    assert "2 variants; reference rank 0" in out and "ranks 2:" in out
    assert "--- rank 0 · graph 0 forward" in out and "+++ rank 2 · graph 0 forward" in out
    assert "changed" in out  # the pass diff of the first differing pass of each chain
    code, out, _ = run_cli(capsys, "diff", "--ranks", group, "--json")
    d = json.loads(out)
    assert not d["identical"] and d["variants"][1]["ranks"] == [2] and d["variants"][1]["differences"]


def test_identical_ranks_and_timing_skew(tmp_path, capsys):
    from thundervis.diff.ranks import compare_ranks
    from core_helpers import write_script
    from thundervis.commands.profile_options import DEFAULT_WARMUP  # noqa: F401
    from thundervis.compiler.profiling import ProfileSettings
    from thundervis.runner import check_output, run_target
    script = write_script(tmp_path, "prof.py", """
        for _ in range(4):
            model(torch.randn(4, 8)).backward()
    """)
    paths = []
    for r in range(2):
        out = check_output(str(tmp_path / f"p{r}.tvrec"))
        run_target(script=script, module=None, args=[], out=out, executors=["torch"],
                   profile=ProfileSettings(timing=True, warmup=1, steps=2))
        paths.append(out)
    group = _group(tmp_path, paths)
    comp = compare_ranks(open_group(group))
    assert comp.identical and comp.variants[0].ranks == (0, 1)
    assert comp.skews, "profiled ranks give per-kernel times"
    k = comp.skews[0]
    assert set(k.per_rank_us) == {0, 1} and k.skew >= 1.0
    assert k.per_rank_us[k.slowest] >= k.per_rank_us[k.fastest]
    code, out, _ = run_cli(capsys, "diff", "--ranks", group)
    assert code == 0 and "identical on all 2 ranks" in out and "slowest" in out


def test_not_a_group(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "diff", "--ranks", tmp_path / "empty")
    assert code == 2 and "without rank recordings" in err


def test_ls_of_a_packed_group_does_not_import_torch(recorded, tmp_path):
    import subprocess
    import sys
    path, _ = recorded
    group = _group(tmp_path, [path, path])
    pack_group(group)
    code = ("import sys; from thundervis.cli import main; rc = main(['ls', sys.argv[1]]); "
            "main(['show', sys.argv[1], '--rank', '1', '--plain']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, group], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "identical on every rank" in r.stdout and "# graph " in r.stdout


def test_run_with_torchrun_options_validates_before_any_worker_starts(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    (tmp_path / "afile").write_text("")
    cases = [
        (["--nproc-per-node", "2", str(tmp_path / "nothere.py")], "does not exist"),
        (["--nproc-per-node", "2", "--max-restarts", "x", str(script)], "torchrun refused the options"),
        (["--nproc-per-node", "2", "--out", str(tmp_path / "afile"), str(script)], "writes a folder"),
        (["--nproc-per-node", "2", "--executors", "nosuch", str(script)], "unknown executor"),
        (["--nproc-per-node", "2"], "give a script"),
    ]
    for argv, words in cases:
        code, out, err = run_cli(capsys, "run", "--no-view", *argv)
        assert code == 2 and words in err and "Traceback" not in err, (argv, err)
    assert not any(p.name.endswith(".tvgroup") for p in tmp_path.iterdir())
    code, _, err = run_cli(capsys, "ls", str(script.with_suffix(".tvrec")), "--rank", "1")
    assert code == 2


def test_a_rank_file_reads_from_worker_threads(recorded, tmp_path):
    """Views share one Recording with worker threads: every thread's connection gets the overlay."""
    import threading
    path, _ = recorded
    group = _group(tmp_path, [path, path])
    pack_group(group)
    rec = open_recording(os.path.join(group, "rank-00001.tvrank"))
    try:
        want = rec.pass_text(pick_pass(rec.graphs())[2].ref)
        seen, errors = [], []

        def read():
            try:
                seen.append((rec.run().pid, rec.pass_text(pick_pass(rec.graphs())[2].ref), rec.revision().status,
                             [e.data["rank"] for e in rec.events("distributed")]))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)
        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert all(s == (rec.run().pid, want, "ok", [1]) for s in seen)
    finally:
        rec.close()


def test_a_rank_files_untimed_call_walls_are_its_own(tmp_path, capsys):
    """Each rank's wall times travel in its rank file and read back over the shared recording."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from _synthetic_group import write_group
    group = write_group(str(tmp_path), variants=(0, 0, 0), profiled=True)
    assert os.path.exists(os.path.join(group, "rank-00002.tvrank"))
    for rank in (0, 2):
        path = os.path.join(group, "rank-00000.tvrec" if rank == 0 else "rank-00002.tvrank")
        with open_recording(path) as rec:
            (ct,) = rec.timings().chains
        step = sum(100.0 * (k + 1) * (1.0 + 0.25 * k * rank) for k in range(3)) * 1.5
        assert ct.walls_us == pytest.approx((step * 1.2, step * 1.3)) and ct.wall_median_us == pytest.approx(step * 1.25)
        code, out, _ = run_cli(capsys, "ls", "--brief", path)
        assert code == 0 and "a call (wall, median of 2 untimed calls) · kernels and torch ops" in out
