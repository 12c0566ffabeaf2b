"""What ``thundervis run --abstract`` adds around the script: fake tensors, placeholders, the stop.

The recording says the run was abstract (event ``abstract_run``: the device stood in for, the GPUs
answered for), each call site that got a placeholder (``abstract_placeholder``: kind, file, line,
code; ``abstract_placeholders`` at the end with the counts), and, when the script needed a real value
to go on, where (``abstract_stopped``: file, line, code, message); the script then ends with exit 2
and everything compiled up to that point stays recorded.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AbstractSettings:
    """An abstract run's options: ``device``: what the script's own code sees (``cuda``: a GPU is
    there, ``cpu``: none); ``gpus``: the GPUs the fit and step time are answered for."""

    device: str = "cuda"
    gpus: tuple = field(default=("h100",))


class AbstractStop(SystemExit):
    """The script needed a real value: the run ends here with exit 2 (the message is printed)."""


@contextlib.contextmanager
def abstract_mode(device: str = "cuda", gpus=("h100",)):
    """Run the body on fake tensors (for notebooks: ``with thundervis.abstract_mode(): ...`` around a
    model built, compiled with ``thundervis.jit(model, abstract=True)`` and stepped), recording the
    placeholders and the answer's inputs into the session recording. Where the code needs a real
    value, :class:`~thundervis.compiler.abstract.NeedsRealValue` names the line."""
    from thundervis.session import _recorder
    with abstract_script(_recorder(), AbstractSettings(device, tuple(gpus)), stop=False) as places:
        yield places


@contextlib.contextmanager
def abstract_script(recorder, settings: AbstractSettings, capability: tuple = (9, 0), stop: bool = True):
    """Run the body (the script) abstractly, recording into ``recorder`` (a RecordingObserver).
    ``stop``: a script that needs a real value ends with exit 2 (:class:`AbstractStop`); else the
    exception goes on to the caller once recorded."""
    from thundervis.compiler.abstract import (Placeholders, TooLargeForAbstract, abstract_session,
                                              data_dependent, script_line_of)
    recorder.note("abstract_run", {"device": settings.device, "stand_in": "cpu fake tensors",
                                   "gpus": list(settings.gpus)})
    places = Placeholders(on_new=lambda site: recorder.note("abstract_placeholder", site))
    from thundervis.compiler.executors import region_verdicts
    asked0, planned0 = region_verdicts.stats["asked"], region_verdicts.stats["planned"]
    try:
        with abstract_session(places, gpu_visible=settings.device == "cuda", capability=capability):
            yield places
    except BaseException as e:
        cause = _root(e)
        if isinstance(cause, TooLargeForAbstract):
            recorder.note("abstract_stopped", {"reason": "too_large", "message": str(cause)})
            if not stop:
                raise
            print(f"thundervis: refused: {cause}", file=sys.stderr)
            raise AbstractStop(2) from None
        if not data_dependent(cause) and not data_dependent(e):
            raise
        where = getattr(cause, "where", None) or script_line_of(e.__traceback__)
        message = str(cause) if type(cause).__name__ == "NeedsRealValue" else (
            f"{where[0].rsplit('/', 1)[-1]}:{where[1]} needs a real value ({type(cause).__name__}), which an "
            f"abstract run does not compute: `{where[2]}`")
        recorder.note("abstract_stopped", {"reason": "data_dependent", "file": where[0], "line": where[1],
                                           "code": where[2], "message": message.splitlines()[0][:500]})
        if not stop:
            raise
        print(f"thundervis: the abstract run stopped: {message.splitlines()[0]}", file=sys.stderr)
        raise AbstractStop(2) from None
    finally:
        recorder.note("abstract_placeholders", places.as_list())
        recorder.note("abstract_optimizers", list(places.optimizers.values()))
        recorder.note("abstract_folding", {"regions_asked": region_verdicts.stats["asked"] - asked0,
                                           "regions_planned": region_verdicts.stats["planned"] - planned0})


def _root(e: BaseException) -> BaseException:
    """Return the innermost cause of ``e`` (Dynamo wraps a backend's exception in its own)."""
    seen = set()
    while id(e) not in seen:
        seen.add(id(e))
        nxt = e.__cause__ or getattr(e, "inner_exception", None)
        if nxt is None:
            break
        e = nxt
    return e
