"""A group: the recordings of one multi-process run, one per rank, in one folder.

Layout of a group folder (written by ``thundervis run --nproc-per-node N``)::

    GROUP/launch-node0.json      the launch on node 0: torchrun options, target, status, failures
    GROUP/rank-00000.tvrec       rank 0's recording (an ordinary, self-contained recording)
    GROUP/rank-00001.tvrec       ...
    GROUP/rank-00001-restart1.tvrec   rank 1 after torchrun's first elastic restart
    GROUP/rank-00002.tvrank      a rank whose traces equal an earlier rank's: only what is its own,
                                 standing on that rank's recording (after packing, see .rank_file)
    GROUP/traces.tvstore         traces shared by ranks, once each (after packing, see .group_store)

Every rank writes its own file as the run goes (a killed rank leaves its committed passes readable
like any recording); the launcher writes its launch file before torchrun starts and again when it
returns. :func:`open_group` reads the folder; :meth:`Group.overview` summarises every rank (status,
host, graphs, kernels, communication ops, the fingerprint of its traces) and says whether the ranks
compiled identical traces. Launch files are JSON (never executed); a rank file is opened with
:func:`~.reader.open_recording` and validated like any recording.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Optional

from .liveness import host_name, process_token, run_status
from .errors import RecordingError
from .reader import Recording, open_recording
from .typed import bounded_count, check_value, describe, load_json, regular_file

LAUNCH_FORMAT = "thundervis-launch"
_LAUNCH = re.compile(r"launch-node(\d{1,6})\.json")
_RANK = re.compile(r"rank-(\d{5,7})(?:-restart(\d{1,4}))?\.(tvrec|tvrank)")
_MAX_LAUNCH_BYTES = 1 << 20


def rank_ranges(ranks) -> str:
    """Return ranks as compact ranges: ``0-3, 5, 7-8`` (how every view writes a set of ranks)."""
    ranks = sorted(ranks)
    out, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(out)


def launch_file_name(node_rank: int) -> str:
    """Return the launch file's name for node ``node_rank``."""
    return f"launch-node{int(node_rank)}.json"


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)  # readers see the old or the new file, never half of one


def start_launch(group_dir: str, *, node_rank: int, torchrun_args: list, target: list, cwd: str) -> str:
    """Record that node ``node_rank`` starts the job (status ``running``); return the launch file."""
    path = os.path.join(group_dir, launch_file_name(node_rank))
    _write_json(path, {"format": LAUNCH_FORMAT, "version": 1, "node_rank": int(node_rank),
                       "torchrun_args": list(torchrun_args), "target": list(target), "cwd": cwd,
                       "started_at": time.time(), "ended_at": None, "status": "running",
                       "exit_code": None, "failures": [], "pid": os.getpid(), "host": host_name(),
                       "process_start": process_token()})
    return path


def finish_launch(path: str, *, status: str, exit_code: int, failures: list) -> None:
    """Record how the launch ended in its launch file."""
    with open(path) as f:
        data = json.load(f)
    data.update(status=status, exit_code=exit_code, failures=failures, ended_at=time.time())
    _write_json(path, data)


def is_group(path: str) -> bool:
    """Return True when ``path`` is a group folder (a launch file or a rank recording in it)."""
    if not os.path.isdir(path):
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(_LAUNCH.fullmatch(n) or _RANK.fullmatch(n) for n in names)


@dataclass(frozen=True)
class Launch:
    """One node's launch: torchrun options, target, status (``running``, ``ok``, ``failed``,
    ``interrupted``, or ``killed`` when the launcher process is gone while ``running``), the
    failed ranks (``rank``, ``exit_code``, ``signal``)."""

    node_rank: int
    torchrun_args: tuple
    target: tuple
    status: str
    exit_code: Optional[int]
    failures: tuple
    started_at: Optional[float]
    ended_at: Optional[float]
    host: Optional[str]

    def as_json(self) -> dict:
        """Return the launch as plain JSON values."""
        return {"node_rank": self.node_rank, "torchrun_args": list(self.torchrun_args),
                "target": list(self.target), "status": self.status, "exit_code": self.exit_code,
                "failures": list(self.failures), "started_at": self.started_at,
                "ended_at": self.ended_at, "host": self.host}


@dataclass(frozen=True)
class RankSummary:
    """One rank of a group: where its recording is and what it holds. ``fingerprint`` identifies
    its compiled traces (equal fingerprints: identical traces); ``error`` says why the recording
    could not be read (then the other fields are None)."""

    rank: int
    restart: int
    path: str
    status: Optional[str] = None
    exit_code: Optional[int] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    local_rank: Optional[int] = None
    node_rank: Optional[int] = None
    world_size: Optional[int] = None
    n_graphs: int = 0
    n_passes: int = 0
    n_kernels: int = 0
    n_communication: int = 0
    n_collectives_between: int = 0
    fingerprint: Optional[str] = None
    missing: tuple = ()
    error: Optional[str] = None

    def as_json(self) -> dict:
        """Return the rank summary as plain JSON values."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class GroupOverview:
    """What ``thundervis ls GROUP`` shows: the launches, every rank, the ranks expected but never
    recorded, whether all ranks compiled identical traces (``variants``: fingerprint -> ranks)."""

    path: str
    status: str
    world_size: Optional[int]
    launches: tuple
    ranks: tuple
    absent: tuple
    variants: dict = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        """True when every readable rank compiled the same traces."""
        return len(self.variants) <= 1

    def as_json(self) -> dict:
        """Return the overview as plain JSON values (``ls GROUP --json``)."""
        return {"path": self.path, "status": self.status, "world_size": self.world_size,
                "identical": self.identical, "launches": [l.as_json() for l in self.launches],
                "ranks": [r.as_json() for r in self.ranks], "absent": list(self.absent),
                "variants": {k: list(v) for k, v in self.variants.items()}}


def _read_launch(path: str) -> Optional[Launch]:
    """Return the launch in the launch file at ``path``; None when it is not one (another format);
    :class:`RecordingError` (one sentence) when it is not a regular file, too large, or holds a
    value of the wrong type or range."""
    st = regular_file(path, "launch file")
    if st.st_size > _MAX_LAUNCH_BYTES:
        raise RecordingError(f"{path} is too large for a launch file.")
    try:
        with open(path, "rb") as f:
            text = f.read(_MAX_LAUNCH_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        raise RecordingError(f"{path} cannot be read as a launch file.") from None
    d = load_json(text, "the launch", path, dict)
    if d is None or d.get("format") != LAUNCH_FORMAT:
        return None

    def text_(key):
        return check_value(d.get(key), "text?", f"its {key}", path)

    def num(key, kind="num?"):
        return check_value(d.get(key), kind, f"its {key}", path)

    def strings(key):
        v = d.get(key)
        if v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            raise RecordingError(f"{path} is corrupted (its {key} is {describe(v)} where a list of strings belongs).")
        return tuple(v)

    status = text_("status") or "running"
    if status not in ("running", "ok", "failed", "interrupted"):
        status = "failed"
    pid = num("pid", "int?")
    status = run_status(status, pid, text_("host"), text_("process_start"))
    failures = d.get("failures") or []
    if not isinstance(failures, list):
        raise RecordingError(f"{path} is corrupted (its failures are {describe(failures)} where a list belongs).")
    failures = tuple(
        {k: f.get(k) for k in ("rank", "local_rank", "exit_code", "signal", "error")
         if (f.get(k).__class__ in (int, str)) or f.get(k) is None}
        for f in failures if isinstance(f, dict))
    node_rank = num("node_rank", "nat?")
    bounded_count(node_rank + 1 if node_rank is not None else None, "its node_rank", path)
    return Launch(node_rank or 0, strings("torchrun_args"), strings("target"), status, num("exit_code", "int?"),
                  failures, num("started_at"), num("ended_at"), text_("host"))


def _fingerprint(pass_hashes: list) -> str:
    h = hashlib.sha256()
    for item in pass_hashes:
        h.update(repr(item).encode())
    return h.hexdigest()[:16]


def rank_fingerprint(rec: Recording) -> tuple[str, list]:
    """Return (fingerprint of every pass's trace of ``rec``, per-pass (graph, chain, index, name,
    trace hash) list). Ranks with equal fingerprints compiled identical traces."""
    from .group_texts import trace_hashes
    items = trace_hashes(rec)
    return _fingerprint(items), items


def _communication_count(rec: Recording, items: list, cache: dict) -> int:
    """Return how many communication ops (collectives and their waits) the final pass of every
    forward/backward/inference chain runs; ``cache`` maps a trace hash to its count, so ranks with
    the same traces parse each trace once."""
    from thundervis.compiler.collectives import is_communication
    last: dict[tuple, tuple] = {}
    for g, c, i, name, fp in items:
        if c in ("forward", "backward", "inference"):
            last[(g, c)] = (i, fp)
    n = 0
    for (g, c), (i, fp) in last.items():
        if fp not in cache:
            try:
                d = json.loads(rec.pass_json(g, c, i))
                cache[fp] = sum(1 for b in d.get("symbols", []) if isinstance(b, dict)
                                and isinstance(b.get("sym"), str) and is_communication(b["sym"]))
            except (RecordingError, ValueError, AttributeError, TypeError, RecursionError):
                cache[fp] = 0
        n += cache[fp]
    return n


def summarize_rank(rank: int, restart: int, path: str, cache: Optional[dict] = None) -> RankSummary:
    """Return the :class:`RankSummary` of one rank's recording (``error`` set when unreadable);
    ``cache`` (shared across the ranks of a group) keeps what identical traces have in common."""
    cache = {} if cache is None else cache
    try:
        with open_recording(path, check=False) as rec:
            run = rec.run()
            facts = {}
            for e in rec.events("distributed"):
                if isinstance(e.data, dict):
                    facts = e.data
            from .collectives import EVENT, SUMMARY, count_between
            between = count_between((e.event, e.data) for name in (EVENT, SUMMARY) for e in rec.events(name))
            n_graphs = rec.store.rows("SELECT COUNT(*) FROM graphs")[0][0]
            n_kernels = rec.store.rows("SELECT COUNT(*) FROM kernels")[0][0]
            from .group_texts import listing_hashes  # not every pass's trace: thousands of ranks are listed
            fp = _fingerprint(items := listing_hashes(rec))
            from .group_texts import missing_blobs
            missing = tuple(missing_blobs(rec, cache))

            def num(key):
                return facts.get(key) if facts.get(key).__class__ is int else None
            world = bounded_count(num("world_size"), "the world size of its distributed event", path)
            return RankSummary(rank, restart, path, run.status, run.exit_code, run.host, run.pid,
                               num("local_rank"), num("node_rank"), world, n_graphs,
                               len(items), n_kernels,
                               _communication_count(rec, items, cache) if not missing else 0, between, fp,
                               missing)
    except RecordingError as e:
        return RankSummary(rank, restart, path, error=str(e))


def summarize_rank_file(rank: int, restart: int, path: str, cache: dict) -> RankSummary:
    """Return the :class:`RankSummary` of a ``.tvrank``: its own run and rank facts from the file,
    the rest from its variant's summary (read once per variant)."""
    from .rank_store import RUN_COLUMNS, read_rank_file
    try:
        doc = read_rank_file(path)
        variant = os.path.join(os.path.dirname(path), doc["variant"])
        key = ("variant summary", variant)
        if key not in cache:
            if not os.path.exists(variant):
                raise RecordingError(f"{os.path.basename(path)} stands on {doc['variant']}, which is missing "
                                     "from the group folder: copy the whole group folder.")
            cache[key] = summarize_rank(-1, 0, variant, cache)
        base = cache[key]
        if base.error:
            return RankSummary(rank, restart, path, error=base.error)
        run = {c: doc["run"].get(c) for c in RUN_COLUMNS}
        status = run["status"] if isinstance(run["status"], str) else "failed"
        status = run_status(status, run["pid"] if isinstance(run["pid"], int) else None,
                            run["host"] if isinstance(run["host"], str) else None,
                            run["process_start"] if isinstance(run["process_start"], str) else None)
        facts = {}
        events = doc["tables"].get("events") or {}
        cols = events.get("columns") or []
        communication = []
        from .collectives import EVENT, SUMMARY, count_between
        for row in events.get("rows") or []:
            e = dict(zip(cols, row)) if isinstance(row, list) else {}
            if e.get("event") in ("distributed", EVENT, SUMMARY) and isinstance(e.get("data"), str):
                try:
                    d = load_json(e["data"], "an event's data", path)
                except RecordingError:
                    continue
                if e["event"] == "distributed":
                    facts = d if isinstance(d, dict) else facts
                else:
                    communication.append((e["event"], d))

        def num(v):
            return v if v.__class__ is int else None
        world = bounded_count(num(facts.get("world_size")), "the world size of its distributed event", path)
        return RankSummary(rank, restart, path, status, num(run["exit_code"]),
                           run["host"] if isinstance(run["host"], str) else None, num(run["pid"]),
                           num(facts.get("local_rank")), num(facts.get("node_rank")), world,
                           base.n_graphs, base.n_passes, base.n_kernels, base.n_communication,
                           count_between(communication), base.fingerprint, base.missing)
    except RecordingError as e:
        return RankSummary(rank, restart, path, error=str(e))


def _group_status(launches: list, ranks: list, absent: list) -> str:
    """failed: a launch or a rank failed or was killed (torchrun stops the others, which say
    interrupted); interrupted: stopped by the user; running: a launch or a rank still runs."""
    statuses = {l.status for l in launches} | {r.status or "unreadable" for r in ranks}
    if statuses & {"failed", "killed", "unreadable"}:
        return "failed"
    if "interrupted" in statuses:
        return "interrupted"
    if "running" in statuses:
        return "running"
    if absent or not ranks:
        return "failed"
    return "ok"


class Group:
    """A group folder open for reading (see the module docstring); nothing is written."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self._files: Optional[tuple] = None  # (the folder's mtime, rank_files()): listed once

    def launches(self) -> list[Launch]:
        """Return every node's launch, by node rank (unreadable launch files are left out)."""
        out = []
        for name in sorted(os.listdir(self.path)):
            if _LAUNCH.fullmatch(name):
                launch = _read_launch(os.path.join(self.path, name))
                if launch is not None:
                    out.append(launch)
        return sorted(out, key=lambda l: l.node_rank)

    def rank_files(self) -> dict[int, tuple[int, str]]:
        """Return {rank: (restart, path)} of the latest recording of every rank."""
        return dict(self._rank_map())

    def _rank_map(self) -> dict[int, tuple[int, str]]:
        """:meth:`rank_files`, shared, not copied: the folder is listed again only when it changed,
        so opening each of N ranks stays linear in N."""
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except OSError as e:
            raise RecordingError(f"the group {self.path} cannot be read ({e.strerror}).") from None
        if self._files is not None and self._files[0] == stamp:
            return self._files[1]
        out: dict[int, tuple[int, str]] = {}
        for name in os.listdir(self.path):
            m = _RANK.fullmatch(name)
            if m:
                rank, restart = int(m.group(1)), int(m.group(2) or 0)
                # A .tvrec and a .tvrank of one rank: packing stopped between the two; the
                # .tvrec is complete.
                if rank not in out or out[rank][0] < restart or (
                        out[rank][0] == restart and name.endswith(".tvrec")):
                    out[rank] = (restart, os.path.join(self.path, name))
        out = dict(sorted(out.items()))
        self._files = (stamp, out)
        return out

    def ranks(self) -> list[int]:
        """Return the ranks that have a recording, in order."""
        return list(self.rank_files())

    def rank_path(self, rank: Optional[int] = None) -> str:
        """Return the recording path of ``rank`` (None: the lowest rank); RecordingError naming the
        recorded ranks when there is no such rank."""
        files = self._rank_map()
        if not files:
            raise RecordingError(f"the group {self.path} holds no rank recordings.")
        if rank is None:
            rank = min(files)
        if rank not in files:
            shown = ", ".join(str(r) for r in list(files)[:20]) + (" ..." if len(files) > 20 else "")
            raise RecordingError(f"the group {self.path} has no rank {rank} (recorded ranks: {shown}).")
        return files[rank][1]

    def open_rank(self, rank: Optional[int] = None, *, check: bool = True) -> Recording:
        """Open ``rank``'s recording (None: the lowest) with :func:`open_recording`; ``check=False``:
        no whole-file ``quick_check`` (SQLite still refuses each damaged page it reads)."""
        return open_recording(self.rank_path(rank), check=check)

    def overview(self) -> GroupOverview:
        """Return the :class:`GroupOverview`: launches, a summary of every rank, status."""
        launches = self.launches()
        cache: dict = {}
        ranks = [summarize_rank_file(r, restart, p, cache) if p.endswith(".tvrank") else
                 summarize_rank(r, restart, p, cache) for r, (restart, p) in self.rank_files().items()]
        sizes = [r.world_size for r in ranks if r.world_size]  # each checked: at most typed.MAX_COUNT
        world = max(sizes) if sizes else None
        seen = {r.rank for r in ranks}
        absent = [r for r in range(world)] if world else []
        absent = [r for r in absent if r not in seen]
        variants: dict[str, list[int]] = {}
        for r in ranks:
            if r.fingerprint:
                variants.setdefault(r.fingerprint, []).append(r.rank)
        return GroupOverview(self.path, _group_status(launches, ranks, absent), world, tuple(launches),
                             tuple(ranks), tuple(absent), {k: tuple(v) for k, v in variants.items()})


def open_group(path: str) -> Group:
    """Open the group folder ``path``; RecordingError (one sentence) when it is not one."""
    if not os.path.isdir(path):
        raise RecordingError(f"{path} is not a group folder.")
    if not is_group(path):
        raise RecordingError(f"{path} is a folder without rank recordings or a launch file "
                             "(a multi-process run writes rank-NNNNN.tvrec files there).")
    return Group(path)
