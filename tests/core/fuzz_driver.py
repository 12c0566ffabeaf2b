"""Child process of the attack fuzz (``test_fuzz_attacks.py``): runs CLI commands in-process, one
after another, and reports each as one JSON line on stdout.

Input (argv[1]): a JSON file holding ``[[case name, [argv, ...]], ...]``. Before each command it
prints ``{"start": [case, i]}`` so the parent can tell which command hung when it has to kill this
process (it allows 10 s per command). After each: ``{"case", "i", "argv", "code", "err", "out",
"secs", "rss_mb", "traceback"}`` with stdout/stderr tails. ``argv[0] == "@tui"`` opens the path in
the Textual app headless (Pilot): the overview, the kernels table, a diff, the run screen.
Memory is limited to 4 GiB of address space so a runaway allocation fails here, not the machine;
the parent checks the peak resident size against 1 GiB.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import resource
import sys
import time
import traceback


def _limit_memory(limit: int = 4 << 30) -> None:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    except (ValueError, OSError):
        pass


def _peak_rss_mb() -> float:
    """This process's peak resident size in MiB.

    ``VmHWM`` of /proc/self/status, not ``ru_maxrss``: Linux carries the peak of the address space
    an ``execve`` replaced into ``ru_maxrss``, so a child spawned (vfork + exec) by a big pytest
    process reports the parent's peak before it has allocated anything."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Capped(io.StringIO):
    """A StringIO that keeps the first and last 4000 characters (a command may print megabytes)."""

    def __init__(self):
        super().__init__()
        self.head, self.tail, self.size = "", "", 0

    def write(self, s):
        self.size += len(s)
        if len(self.head) < 4000:
            self.head += s[: 4000 - len(self.head)]
        self.tail = (self.tail + s)[-4000:]
        return len(s)

    def text(self) -> str:
        return self.head if self.size <= 4000 else self.head + "\n…\n" + self.tail


async def _tui(path: str) -> int:
    """Open ``path`` in the app headless; return 0 when shown, 2 when refused (DataError)."""
    from thundervis.tui.app import ThundervisApp
    from thundervis.tui.data import DataError, open_data
    try:
        data = open_data(path)
    except DataError as e:
        print(f"thundervis: {e}", file=sys.stderr)
        return 2
    app = ThundervisApp(data, poll_s=0)
    async with app.run_test(size=(120, 36)) as pilot:
        end = time.monotonic() + 6
        while app.overview is None and time.monotonic() < end:
            await pilot.pause(0.05)
        for key in ("down", "down", "d", "s", "k", "escape", "t", "escape"):
            await pilot.press(key)
            await pilot.pause(0.02)
    return 0


def run_one(argv: list) -> tuple[int, str, str, bool]:
    from thundervis.cli import main
    out, err = _Capped(), _Capped()
    tb = False
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if argv[0] == "@tui":
                code = asyncio.run(_tui(argv[1]))
            else:
                code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        except BaseException:  # a crash of the command: reported, the next one still runs
            traceback.print_exc()
            code, tb = 99, True
    e = err.text()
    return code, out.text(), e, tb or "Traceback (most recent call last)" in e


def main() -> int:
    _limit_memory()
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    real = sys.stdout
    for name, commands in cases:
        for i, argv in enumerate(commands):
            real.write(json.dumps({"start": [name, i]}) + "\n")
            real.flush()
            t0 = time.monotonic()
            code, out, err, tb = run_one(argv)
            rss_mb = _peak_rss_mb()
            real.write(json.dumps({"case": name, "i": i, "argv": [str(a) for a in argv], "code": code,
                                   "out": out[-1500:], "err": err[-3000:], "secs": time.monotonic() - t0,
                                   "rss_mb": rss_mb, "traceback": tb}) + "\n")
            real.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
