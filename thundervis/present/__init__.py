"""The presentation layer: every rule a view shows, each with one owner.

Between the store (:mod:`thundervis.recording`, the reader API) and the front ends (the CLI, the
TUI, the widget, ``dot``): each module owns one rule and returns frozen rows with ``as_json()``.
The CLI prints them, the TUI turns them into Rich ``Text`` (never markup built from recorded
data), the widget sends their ``as_json()``. Import the modules directly
(``from thundervis.present import kernel_rows``); this file holds only this docstring.

- :mod:`.errors`: the one ``DataError`` views raise (one sentence for the user);
- :mod:`.default_view`: which graph, chain and pass a view opens, and keeps when what it shows changes;
- :mod:`.selection`: the user's graph/chain/pass choice (``--graph``, ``--chain``, ``--pass``,
  ``--from``/``--to``) resolved once, or one sentence naming the valid choices;
- :mod:`.ranks`: the rank a group opens on (``--rank`` absent), for the CLI, the TUI and the widget;
- :mod:`.run_status`: how a run ended, in one wording (status line, banner, "no graph was compiled");
- :mod:`.status`: chain and kernel status (ran eagerly, fell back at run time, why), fallbacks;
- :mod:`.diff_labels`: pass diffs with their labels;
- :mod:`.variants`: the labels of a group's trace variants;
- :mod:`.units`: times, shares and sizes as text;
- :mod:`.symbol_detail`: what a details pane shows about one symbol;
- :mod:`.kernel_rows`: the kernel table, built once (``kernel_table``) with what ran each kernel
  (``ran on cpu via torch``) and why it fell back;
- :mod:`.overview`: a recording's overview with statuses and kernel rows, read once;
- :mod:`.trace_lines`: a pass's printed lines as structured rows (text, uid, depth, kind, spans),
  with the notes ``show`` prints (one ``print_options`` for every view);
- :mod:`.trace_folds`: a pass's repeated layers (equal ops and shapes) as folds behind one line;
- :mod:`.asm`: a kernel's GPU builds (``run --target``): stage lines annotated with op, uid and
  user line, and the per-target resources ``ls`` shows;
- :mod:`.roofline`: bytes, FLOPs and roofline µs per kernel and torch matmul/attention, the modelled
  step time per target;
- :mod:`.numerics`: ``run --check-numerics`` verdicts per kernel and ``--compare-eager`` deltas;
- :mod:`.source_view`: a user file line by line with its ops, kernels, torch fallbacks, time share;
- :mod:`.collectives`: collectives run between graphs as text (per collective, per place, per chain);
- :mod:`.progress`: the live compile status ``thundervis run`` shows on stderr and the TUI's live view.
"""
