// thundervis notebook widget, the Source tab (thundervis.present.source_view rows, as sent by
// RecordingData.source_json): the user's file line by line, each line with its time share, how its
// ops run (fused, partly torch, fell back) and, under it, what each chain made of it. A click on a
// line with ops opens that op in the Passes tab (its chain's final pass), a kernel name under it that
// kernel in the Fusions tab. A graph picker (present.source_view's graph_options: every graph with
// its op count from the file) limits the ops to one graph. Recorded text only ever goes into
// textContent.

const SOURCE_MARKS = { compiled: ["●", "tv-src-ok"], "partly torch": ["●", "tv-src-torch"], "fell back": ["▲", "tv-src-bad"] };

function sourceTab(model, ask, data, set, state) {
  const frag = h("div", { class: "tv-source" });
  const fileSel = h("select", { class: "tv-source-file", "aria-label": "source file" });
  const graphSel = h("select", { class: "tv-source-graph", "aria-label": "graph" });
  const onlyOps = h("input", { type: "checkbox", class: "tv-source-only" });
  const summary = h("span", { class: "tv-muted tv-source-summary" });
  // present's sentences for the parts too large to show (SourceFile.note); empty when none
  const note = h("div", { class: "tv-muted tv-source-note" });
  const list = h("div", { class: "tv-source-lines" }, h("div", { class: "tv-muted", text: "loading…" }));
  frag.append(h("div", { class: "tv-diagram-tools" }, h("label", {}, "file ", fileSel), h("label", {}, "ops of ", graphSel),
    h("label", {}, onlyOps, " only lines with ops"), summary), note, list);
  onlyOps.checked = !!state.onlyOps;

  // one answer per (file, graph); graph null: every graph's ops
  const keyOf = (file, graph) => JSON.stringify([file || "", graph]);
  const load = (file, graph) => {
    const key = keyOf(file, graph);
    if (!state.cache.has(key)) {
      state.cache.set(key, ask({ what: "source", file: file || null, graph_filter: graph })
        .then((r) => (r.ok ? r.data : { error: r.error, lines: [], files: [], graph_options: [] })));
    }
    return state.cache.get(key);
  };

  const jump = (op) => {
    const g = data.graphs.find((x) => x.id === op.graph);
    const c = g && g.chains.find((x) => x.kind === op.chain);
    if (!c || !c.passes.length) return;
    set({ graph: op.graph, chain: op.chain, pass_index: c.default_pass, compare_index: -1,
      selected_uid: op.uid, tab: "passes" });
  };

  const draw = (view) => {
    clear(list);
    clear(fileSel);
    for (const f of view.files || []) fileSel.appendChild(h("option", { value: f, text: baseName(f) }));
    if (view.file) fileSel.value = view.file;
    clear(graphSel);
    for (const o of view.graph_options || []) graphSel.appendChild(h("option", { value: o.graph === null ? "" : String(o.graph), text: o.label }));
    graphSel.value = state.graph === null ? "" : String(state.graph);
    setText(summary, view.error || view.summary || "");
    setText(note, view.note || "");
    const width = String((view.lines || []).length).length;
    let gap = false;
    for (const row of view.lines || []) {
      if (onlyOps.checked && !row.ops.length) {
        if (!gap) list.appendChild(h("div", { class: "tv-muted tv-src-gap", text: "…" }));
        gap = true;
        continue;
      }
      gap = false;
      const [mark, cls] = SOURCE_MARKS[row.status] || [" ", ""];
      const line = h("div", { class: `tv-src-row${row.ops.length ? " tv-src-ops tv-clickable" : ""}`, "data-line": row.line,
        title: row.ops.length ? "open this line's ops in the Passes tab" : null },
        h("span", { class: "tv-lno", text: String(row.line).padStart(width, " ") + " " }),
        h("span", { class: "tv-src-share", text: row.share_text }),
        h("span", { class: `tv-src-mark ${cls}`, text: mark + " " }),
        h("span", { class: "tv-src-code", text: row.text }));
      list.appendChild(line);
      if (!row.ops.length) continue;
      line.addEventListener("click", () => jump(row.ops[0]));
      for (const note of row.notes) {
        const div = h("div", { class: "tv-src-note", text: `${note.graph_label || "g" + note.graph} ${note.text}` });
        for (const k of note.kernels.slice(0, 8)) {  // a kernel name opens it in the Fusions tab
          const link = h("span", { class: "tv-src-kernel tv-clickable", text: ` ${k.name}`, title: "open in the Fusions tab" });
          link.addEventListener("click", (e) => {
            e.stopPropagation();
            set({ graph: note.graph, chain: note.chain, tab: "fusions", selected_kernel: k.name });
          });
          div.appendChild(link);
        }
        list.appendChild(div);
      }
      if (row.time_text) list.appendChild(h("div", { class: "tv-src-note tv-src-time", text: row.time_text }));
    }
    // open on the chosen line, else on the first line with ops (a few lines of context above)
    const first = (view.lines || []).find((r) => r.ops.length);
    const at = state.line || (first ? Math.max(1, first.line - 3) : null);
    const target = at ? list.querySelector(`[data-line="${Number(at)}"]`) : null;
    if (target) requestAnimationFrame(() => { list.scrollTop = target.offsetTop - list.offsetTop; });
  };

  const first = load(state.file, state.graph);
  first.then((view) => {
    const named = keyOf(view.file, state.graph);
    if (view.file && !state.cache.has(named)) state.cache.set(named, first);  // the default, by name
    state.file = view.file || state.file;
    draw(view);
  });
  fileSel.addEventListener("change", () => {
    state.file = fileSel.value;
    state.line = null;
    load(state.file, state.graph).then(draw);
  });
  graphSel.addEventListener("change", () => {
    state.graph = graphSel.value === "" ? null : Number(graphSel.value);
    state.line = null;
    load(state.file, state.graph).then(draw);
  });
  onlyOps.addEventListener("change", () => {
    state.onlyOps = onlyOps.checked;
    load(state.file, state.graph).then(draw);
  });
  return frag;
}
