"""The live compile status line of ``thundervis run``: one line on stderr, redrawn at every pass
(``compiling graph 0 · backward · pass 5/9 claim · 12 kernels built``, the text of
:class:`thundervis.present.progress.CompileProgress`) and erased when a chain's last pass is done,
so the script's own output is never mixed into it. Only on a terminal: :func:`progress_observer`
returns None when stderr is not one (a pipe, a file, CI logs)."""
from __future__ import annotations

import shutil
import sys
import threading
from typing import Optional

from thundervis.compiler.observer import CompileObserver
from thundervis.present.progress import DEFAULT_PASSES, CompileProgress, cpu_build_text

_ERASE = "\r\x1b[2K"


class ProgressLine(CompileObserver):
    """A compile observer drawing :class:`CompileProgress` on ``stream`` (a terminal). ``current``
    is the latest progress (None while nothing compiles). Methods other observers have (``note``
    ...) are accepted and ignored, so it can sit in a ``MultiObserver`` beside the recorder."""

    def __init__(self, stream, pass_total: int = DEFAULT_PASSES):
        self.stream = stream
        self.pass_total = pass_total
        self.kernels = 0
        self.current: Optional[CompileProgress] = None
        self._shown = False
        self._lock = threading.Lock()
        self._building: dict = {}  # (graph, chain) -> the kernels Inductor compiles for the CPU
        self._cores: tuple = (None, None)  # (cores, training threads) the last build request saw

    def __getattr__(self, name):  # recorder-only methods (note, ...) called through a MultiObserver
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed) -> None:
        progress = CompileProgress(graph, chain, index, self.pass_total, name, self.kernels)
        with self._lock:
            self.current = progress
            if name == "codegen":  # the chain is compiled: the script runs on, its output is its own
                self._erase()
                self.current = None
                return
            self._draw(progress.text())

    def kernels_built(self, graph, chain, kernels) -> None:
        with self._lock:
            self.kernels += len(kernels)

    def runtime(self, graph, chain, event, data) -> None:
        if event != "cpu_build" or not isinstance(data, dict):
            return
        with self._lock:
            kernels = self._building.setdefault((graph, chain), set())
            (kernels.add if data.get("state") == "building" else kernels.discard)(data.get("kernel"))
            if data.get("state") == "building":
                self._cores = (data.get("cores"), data.get("training_threads"))
            if self.current is not None:  # a pass line is showing: it is redrawn at the next pass
                return
            busy = [(key, len(k)) for key, k in self._building.items() if k]
            if busy:
                (g, c), n = busy[-1]
                self._draw(cpu_build_text(g, c, n, *self._cores))
            else:
                self._erase()

    def chain_failed(self, graph, chain, error, tb) -> None:
        with self._lock:
            self._erase()
            self.current = None

    def graph_finished(self, graph, compile_s) -> None:
        with self._lock:
            self._erase()
            self.current = None

    def close(self) -> None:
        """Erase the line if it is shown (the run ended)."""
        with self._lock:
            self._erase()
            self.current = None

    def _draw(self, text: str) -> None:
        width = shutil.get_terminal_size((100, 24)).columns
        line = f"thundervis: {text}"
        if len(line) >= width:
            line = line[: max(1, width - 2)] + "…"
        try:
            self.stream.write(_ERASE + line)
            self.stream.flush()
            self._shown = True
        except (OSError, ValueError):  # a closed terminal never breaks the run
            pass

    def _erase(self) -> None:
        if not self._shown:
            return
        try:
            self.stream.write(_ERASE)
            self.stream.flush()
        except (OSError, ValueError):
            pass
        self._shown = False


def progress_observer(stream=None, executors=None) -> Optional[ProgressLine]:
    """Return a :class:`ProgressLine` on ``stream`` (default stderr) when it is a terminal, else
    None; its pass count is that of the chains ``executors`` (None: the defaults) compile."""
    stream = sys.stderr if stream is None else stream
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return ProgressLine(stream, _pass_total(executors))


def _pass_total(executors) -> int:
    """Acquire, the chain passes of ``executors`` and codegen."""
    try:
        import torch

        from thundervis.compiler.pipeline import chain_passes, resolve_executors
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return len(chain_passes(resolve_executors(executors, device))) + 2
    except Exception:
        return DEFAULT_PASSES
