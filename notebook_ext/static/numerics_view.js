// thundervis notebook widget: the Numerics tab of the recording widget (run --check-numerics). The
// payload's `numerics` (thundervis.present.numerics.numerics_json) lists every kernel with its
// verdict, worst first; clicking a row asks the kernel to bisect that kernel's chain (every pass
// on the same inputs) and shows the report, with a button opening the kernel in the Fusions tab.
// Recorded strings reach the page as textContent only.

// The CSS class of a verdict (tv-num-flagged, tv-num-ok ...): recorded text reduced to letters.
function verdictClass(verdict) {
  return `tv-num-${String(verdict || "").replace(/[^a-z]/g, "")}`;
}

function hasNumericsTab(num) {
  return !!(num && (num.checked > 0 || (num.eager && num.eager.length)));
}

function numericsTab(num, ask, state, redraw, set) {
  const frag = h("div", { class: "tv-numtab" });
  frag.appendChild(h("div", { class: "tv-summary", text: num.header }));
  for (const line of num.eager || []) frag.appendChild(h("div", { class: "tv-muted", text: line }));
  const [table, tb] = headedTable("tv-kernels tv-num-table", ["", "verdict", "kernel", "chain", "max rel", "eager rel", "ratio", "ran"]);
  for (const r of num.rows) {
    const key = `${r.graph}/${r.chain}/${r.kernel}`;
    const tr = h("tr", { class: `tv-num-row ${verdictClass(r.verdict)}${state.key === key ? " tv-selected" : ""}`, title: r.detail || "" },
      h("td", { text: r.mark }),
      h("td", { text: r.verdict }),
      h("td", { text: r.kernel }),
      h("td", { text: `g${r.graph} ${r.chain}` }),
      h("td", { text: r.max_rel_text }),
      h("td", { text: r.eager_rel_text }),
      h("td", { text: r.ratio_text }),
      h("td", { text: r.ran_text }));
    tr.addEventListener("click", () => {
      state.key = key;
      state.row = r;
      const bk = `${r.graph}/${r.chain}`;
      if (!state.bisects.has(bk)) {
        state.bisects.set(bk, { pending: true });
        ask({ what: "bisect", graph: r.graph, chain: r.chain }).then((res) => {
          state.bisects.set(bk, res.ok ? res.data : { lines: [], error: res.error });
          redraw();
        });
      }
      redraw();
    });
    tb.appendChild(tr);
  }
  frag.appendChild(table);
  if (state.row) {
    const r = state.row;
    const side = h("div", { class: "tv-num-bisect" });
    side.appendChild(h("div", { class: "tv-k", text: `${r.kernel} · g${r.graph} ${r.chain} · ${r.verdict}` }));
    // A kernel the recording lists (not only a check row): open it in the Fusions tab, as the TUI's enter does.
    if (r.kernel_id !== null && r.kernel_id !== undefined) {
      const open = h("button", { class: "tv-num-open", text: "open in Fusions" });
      open.addEventListener("click", () => set({ graph: r.graph, chain: r.chain, tab: "fusions", selected_kernel: r.kernel }));
      side.appendChild(open);
    }
    if (r.sources && r.sources.length) side.appendChild(h("div", { class: "tv-muted", text: `lines ${r.sources.slice(0, 6).join(", ")}` }));
    const b = state.bisects.get(`${r.graph}/${r.chain}`);
    if (!b || b.pending) {
      side.appendChild(h("div", { class: "tv-muted", text: "bisecting the chain: every pass on the same inputs …" }));
    } else {
      if (b.error) side.appendChild(h("div", { class: "tv-error", text: b.error }));
      side.appendChild(h("pre", { class: "tv-num-lines", text: (b.lines || []).join("\n") }));
    }
    frag.appendChild(side);
  } else {
    frag.appendChild(h("div", { class: "tv-muted", text: "click a kernel: its chain's bisect (which pass changes the numbers)" }));
  }
  return frag;
}
