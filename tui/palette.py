"""The command palette's entries (ctrl+p): every action of the app with its key, plus the group
actions when the app shows a group."""
from __future__ import annotations


def palette_entries(app) -> list[tuple[str, str, object]]:
    """Return (title, help, callback) for every action of ``app`` (a ``ThundervisApp``)."""
    entries = [
        ("Next pass", "Step to the next pass (n)", lambda: app.action_step(1)),
        ("Previous pass", "Step to the previous pass (p)", lambda: app.action_step(-1)),
        ("Jump to pass", "Pick a pass of this chain (j)", app.action_jump),
        ("Next chain", "Forward, backward, ... (c)", app.action_next_chain),
        ("Next graph", "The next compiled graph (g)", app.action_next_graph),
        ("Toggle diff", "Diff against the previous pass (d)", app.action_toggle_diff),
        ("Diff against pass", "Diff against a chosen pass (D)", app.action_diff_against),
        ("Toggle side by side", "Unified or side-by-side diff (s)", app.action_toggle_side),
        ("Toggle folding", "Fold unchanged diff lines or show all (f)", app.action_toggle_fold),
        ("Hide unchanged passes", "Hide passes that changed nothing (u)", app.action_toggle_unchanged),
        ("Kernels", "The kernels table: sort, re-run, repro (k)", app.action_kernels),
        ("Numerics", "Kernels by verdict of run --check-numerics; enter: kernel + bisect (N)", app.action_numerics),
        ("Bisect", "Run every pass of the chain shown on the same inputs: which pass changes the numbers (B)",
         app.action_bisect),
        ("Search", "Symbols, source lines, kernels (/)", app.action_search),
        ("Source", "Your files line by line: ops, kernels, torch fallbacks, time share (S)", app.action_source),
        ("Open in editor", "The selected line's source in $EDITOR (e)", app.action_edit),
        ("Toggle details", "Show or hide the details pane (i)", app.action_toggle_details),
        ("Run info", "Run status, eager chains, traceback (t)", app.action_run_info),
        ("Communication", "Collectives in the traces and between graphs, per place (m)", app.action_communication),
        ("Keys", "Every key binding (?)", app.action_help),
    ]
    if app.group is not None:
        entries[-1:-1] = [
            ("Switch rank", "Pick a rank of the group: status, variant, host, times (ctrl+r)", app.action_pick_rank),
            ("Compare ranks", "Identical traces? Variants, differing passes, kernel skew (=)",
             app.action_compare_ranks),
        ]
    return entries
