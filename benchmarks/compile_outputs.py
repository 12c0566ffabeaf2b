"""What the compiler produces, saved to compare before and after a compile-time change byte for byte.

One training step of tiny Llamas (2 and 8 layers, ``_compile_scale.llama``) and of the example GPT
(``_gpt_model.build``) is compiled through thundervis with our persistent compile cache off; every
pass's printed trace and trace JSON, and every kernel's note and source, are written to one JSON
file. Pass durations are the only thing that differs from run to run: ``--compare`` masks them and
lists what else differs.

    python benchmarks/compile_outputs.py save BEFORE.json      # on the old code
    python benchmarks/compile_outputs.py save AFTER.json       # on the new code
    python benchmarks/compile_outputs.py compare BEFORE.json AFTER.json
"""
from __future__ import annotations

import difflib
import json
import os
import re
import sys

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ["THUNDERVIS_COMPILE_CACHE"] = "off"  # a cached partition must not decide the outputs
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# a duration as the printer writes it ("(482.6 µs)", "1.2 s") and the JSON's duration fields
_TIME = re.compile(r'\d+(\.\d+)? ?(ms|s|us|µs)(?![a-zA-Z])|"(duration_ms|seconds)": ?[0-9.e+-]+')


def _grab(out: dict, tag: str):
    """Return an observer that files each pass's texts and each kernel's source in ``out``."""
    from thundervis.compiler.observer import CompileObserver
    from thundervis.compiler.printer import print_trace
    from thundervis.compiler.serialize import trace_to_json

    class Grab(CompileObserver):
        def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
            key = f"{tag}/g{graph}/{chain}/{index:02d}_{name}"
            out[key + "/print"] = print_trace(trace)
            out[key + "/json"] = trace_to_json(trace)

        def kernels_built(self, graph, chain, kernels):
            for k in kernels:
                out[f"{tag}/g{graph}/{chain}/kernel/{k.name}"] = f"{k.note}\n{k.code}"
    return Grab()


def save(path: str) -> int:
    """Compile the three models and write their outputs to ``path``; return 0."""
    import torch
    import _gpt_model
    from _compile_scale import first_step_seconds, llama
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    out: dict = {}
    for layers in (2, 8):
        model, ids = llama(layers)
        reset_graph_ids()
        first_step_seconds(model, ids, ThundervisCompiler(observer=_grab(out, f"llama{layers}"), cache=False))
    model, batches, _ = _gpt_model.build(0)
    reset_graph_ids()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=_grab(out, "gpt"), cache=False), dynamic=False)
    x, y = batches[0]
    compiled(x, y)[1].backward()
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"{len(out)} texts written to {path}")
    return 0


def compare(a_path: str, b_path: str) -> int:
    """Print what differs between two saved files (durations masked); return 0 when nothing does."""
    a, b = json.load(open(a_path)), json.load(open(b_path))
    differ = sorted(k for k in set(a) | set(b) if _TIME.sub("<t>", a.get(k, "")) != _TIME.sub("<t>", b.get(k, "")))
    for k in differ[:5]:
        print(k)
        lines = difflib.unified_diff(_TIME.sub("<t>", a.get(k, "")).splitlines(),
                                     _TIME.sub("<t>", b.get(k, "")).splitlines(), lineterm="", n=0)
        print("\n".join(line[:200] for line in list(lines)[2:10]))
    print(f"{len(set(a) | set(b))} texts, {len(differ)} differ")
    return 0 if not differ else 1


def main(argv=None) -> int:
    """Run ``save PATH`` or ``compare A B``; 2 on bad input."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "save":
        return save(argv[1])
    if len(argv) == 3 and argv[0] == "compare":
        for p in argv[1:]:
            if not os.path.isfile(p):
                print(f"{p} is not a file saved by 'compile_outputs.py save'.", file=sys.stderr)
                return 2
        try:
            return compare(argv[1], argv[2])
        except (ValueError, AttributeError):
            print("one of the files is not a file saved by 'compile_outputs.py save'.", file=sys.stderr)
            return 2
    print("usage: compile_outputs.py save PATH | compare BEFORE AFTER", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
