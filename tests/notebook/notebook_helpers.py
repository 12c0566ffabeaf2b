"""Helpers for the notebook tests: a tiny training script whose file name, source lines and module
path are hostile HTML."""
from __future__ import annotations

import html.parser
import textwrap

# Each string, if it ever reached a page as markup, would set window.__tv_pwned or open a dialog.
HOSTILE_FILE = "evil_<img src=x onerror=window.__tv_pwned=1>.py"
HOSTILE_MODULE = "<img src=x onerror=alert(2)>"
HOSTILE_CODE = "<script>window.__tv_pwned=3</script>"
HOSTILE_CODE2 = '</pre><b onmouseover="window.__tv_pwned=4">bold</b>'

HOSTILE_SCRIPT = textwrap.dedent(f"""\
    import torch

    EVIL = {HOSTILE_MODULE!r}


    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module(EVIL, torch.nn.Linear(8, 8))

        def forward(self, x):
            h = torch.tanh(self._modules[EVIL](x))  # {HOSTILE_CODE}
            return (h * h).sum()  # {HOSTILE_CODE2}


    torch.manual_seed(0)
    model = torch.compile(M())
    model(torch.randn(4, 8)).backward()
""")


# A group folder whose name, a rank's host and the launch's target are hostile HTML.
HOSTILE_GROUP = "job_<img src=x onerror=window.__tv_pwned=5>.tvgroup"
HOSTILE_HOST = '<img src=x onerror="window.__tv_pwned=6">node"7'
HOSTILE_TARGET = "<script>window.__tv_pwned=7</script>"

# Run as ``GROUP_SCRIPT N ACT``: ranks 0 and 1 with ``4 tanh``, rank 2 with ``4 sigmoid`` (a variant
# whose code differs), rank 3 with ``6 tanh`` (a variant that differs only in shapes).
GROUP_SCRIPT = textwrap.dedent("""\
    import sys

    import torch

    torch.manual_seed(0)
    act = torch.nn.Tanh() if sys.argv[2] == "tanh" else torch.nn.Sigmoid()
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), act))
    n = int(sys.argv[1])
    for _ in range(4):
        model(torch.randn(n, 8)).sum().backward()
""")


# Communication, on a one-rank gloo group in the test's process: a functional all-reduce traced into
# the compiled graph (forward and backward), and the script's own all-reduce and barrier run
# between the compiled calls (recorded as `collective` events whose source names this hostile file).
# Why the first Triton kernel of the ``fell_back`` recording failed: hostile HTML, shown only as text.
FELL_BACK_ERROR = "launch failed <img src=x onerror=window.__tv_pwned=9>"

COMM_FILE = "comm_<img src=x onerror=window.__tv_pwned=8>.py"
COMM_SCRIPT = textwrap.dedent("""\
    import torch, torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)

    def step(x):
        h = torch.tanh(x @ w) * 2
        h = funcol.all_reduce(h, "sum", dist.group.WORLD)
        return (torch.sin(h) + 1).sum()

    f = torch.compile(step)
    for i in range(2):
        loss = f(torch.randn(4, 8))
        loss.backward()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
    dist.barrier()
    dist.destroy_process_group()
""")


class HtmlTags(html.parser.HTMLParser):
    """Collects a page's tags with their attributes, its event-handler attributes (``on...``) and its
    text, to check that recorded strings reached the page as text only."""

    def __init__(self):
        super().__init__()
        self.tags, self.handlers, self.texts = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.handlers += [name for name, _ in attrs if name.lower().startswith("on")]

    def handle_data(self, data):
        self.texts.append(data)
