// thundervis notebook widget, the Communication tab of the recording widget. The
// payload's `communication` (notebook_ext/comm_data.py) holds the collectives run eagerly between
// the compiled graphs (DDP's reducer, FSDP2's hooks, the script's own torch.distributed calls),
// grouped per place in the order they ran, and the counts over the whole run. Collectives traced
// INTO a graph are ops of its trace: the trace view marks them (tv-comm), this tab only counts them.

function hasCommTab(comm) {
  return !!(comm && (comm.counts.between_graphs > 0 || comm.places.length > 0));
}

function commTab(comm) {
  const frag = h("div", { class: "tv-commtab" });
  const counts = comm.counts;
  if (comm.in_traces) {
    frag.appendChild(
      h("div", { class: "tv-muted" },
        h("span", { class: "tv-comm-mark", text: "⇄" }),
        ` ${comm.in_traces} communication ops in the traces (marked in the Passes tab): ${comm.note}.`),
    );
  }
  frag.appendChild(
    h("div", {
      class: "tv-summary",
      text:
        `${counts.between_graphs} collectives run eagerly between compiled graphs` +
        (counts.complete ? "" : " (the run did not finish: counted so far)") +
        (counts.recorded < counts.between_graphs ? ` · the first ${counts.recorded} listed one by one` : ""),
    }),
  );
  for (const place of comm.places) {
    const [table, tb] = headedTable("tv-kernels tv-comm-table", ["#", "step", "op", "bytes", "group", "issued by", "source", "time"]);
    for (const r of place.rows) {
      tb.appendChild(
        h("tr", { class: "tv-comm-row", title: r.text },
          h("td", { text: r.seq }),
          h("td", { text: r.step }),
          h("td", { text: r.op }),
          h("td", { text: r.bytes_text }),
          h("td", { text: r.group_size === null ? "?" : r.group_size }),
          h("td", { text: r.issued_by }),
          h("td", { text: r.source || "" }),
          h("td", { text: r.duration_text })),
      );
    }
    frag.append(
      h("div", { class: "tv-comm-place" },
        h("b", { text: place.where }), h("span", { class: "tv-muted", text: ` · ${place.rows.length} collective${place.rows.length === 1 ? "" : "s"}` })),
      table,
    );
  }
  if (comm.by_op.length || comm.run_places.length) {
    const over = h("div", { class: "tv-comm-run" }, h("div", { class: "tv-k", text: "over the whole run" }));
    over.appendChild(h("div", { text: comm.by_op.map(([op, n, bytes]) => `${op}: ${n} (${bytes})`).join(" · ") }));
    for (const t of comm.run_places) over.appendChild(h("div", { class: "tv-comm-where", text: t }));
    if (counts.in_graphs_run) over.appendChild(h("div", { class: "tv-muted", text: `${counts.in_graphs_run} seen while a compiled graph ran (not listed)` }));
    frag.appendChild(over);
  }
  return frag;
}
