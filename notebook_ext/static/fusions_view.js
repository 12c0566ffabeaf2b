// thundervis notebook widget, the Fusions tab of the recording widget: the fusion diagram of the
// pass the payload names per chain (`diagram_pass`, present.default_view.diagram_pass) (module filter, one node per kernel, module blocks folded to one box each that a
// click expands, pan and zoom) beside the kernel table (executor, median, roofline, share, source
// lines); a kernel picked in either is highlighted in both, with its asm panel (asm_view.js).
// `view` is what recording_view.js shares with it: { model, ask, data, set, graphOf, render,
// fusions: {module, collapse, expand, kernel}, diagrams: the diagrams asked for, by selection }.

// A promise of the diagram of chain c at its diagram_pass as the Fusions tab's state asks for it: the
// payload's own (drawn at that pass) when nothing is filtered, else asked for once per selection.
function diagramFor(view, c) {
  const { model, ask } = view;
  const state = view.fusions;
  const pass = c.diagram_pass === undefined ? null : c.diagram_pass; // present's rule, never chosen here
  const key = JSON.stringify([model.get("graph"), c.kind, pass, state.module, state.collapse, state.expand]);
  if (!state.module && state.collapse === null && !state.expand.length && c.diagram) {
    return Promise.resolve(c.diagram);
  }
  if (view.diagrams.has(key)) return view.diagrams.get(key);
  const p = ask({
    what: "diagram",
    graph: model.get("graph"),
    chain: c.kind,
    pass,
    module: state.module || null,
    collapse: state.collapse,
    expand: state.expand,
  }).then((r) => (r.ok ? r.data : { svg: null, error: r.error, modules: [] }));
  view.diagrams.set(key, p);
  return p;
}

// Graphviz draws a cluster or node as a <g> whose shapes may sit inside a tooltip <a>; nodes
// inside a cluster are separate <g>s, so a cluster's own path/polygon descendants are its frame.
function highlightKernel(svgHost, k) {
  for (const el of Array.from(svgHost.querySelectorAll(".tv-hl"))) {
    el.classList.remove("tv-hl");
    for (const shape of Array.from(el.querySelectorAll("path, polygon"))) {
      shape.setAttribute("stroke", shape.dataset.tvStroke || "");
      shape.setAttribute("stroke-width", shape.dataset.tvWidth || "1");
    }
  }
  if (!k) return;
  for (const g of kernelShapes(svgHost, k)) {
    g.classList.add("tv-hl");
    for (const shape of Array.from(g.querySelectorAll("path, polygon"))) {
      shape.dataset.tvStroke = shape.getAttribute("stroke") || "";
      shape.dataset.tvWidth = shape.getAttribute("stroke-width") || "1";
      shape.setAttribute("stroke", "#d1242f");
      shape.setAttribute("stroke-width", "6");
    }
  }
}

// The <g>s that draw kernel k: its cluster (titled cluster_<uid>) or, collapsed, its node (named k.name).
function kernelShapes(svgHost, k) {
  return Array.from(svgHost.querySelectorAll("g.cluster, g.node")).filter((g) => {
    const title = g.querySelector("title");
    const first = g.querySelector("text");
    return (title && title.textContent === `cluster_${k.uid}`) || (g.classList.contains("node") && first && first.textContent === k.name);
  });
}

function fusionsTab(view, c) {
  const { model, ask, data, set, render } = view;
  const state = view.fusions;
  const frag = h("div", { class: "tv-fusions" });
  const g = view.graphOf();
  const kernels = g.kernels.filter((k) => k.chain === c.kind);
  const modSel = h("select", { class: "tv-module", "aria-label": "module" }, h("option", { value: "", text: "all modules" }));
  const collapse = h("input", { type: "checkbox", class: "tv-collapse" });
  const zoomIn = h("button", { text: "+", title: "zoom in" });
  const zoomOut = h("button", { text: "−", title: "zoom out" });
  const fitBtn = h("button", { text: "fit", title: "fit to width" });
  // Module blocks (model.layers.3): one box each; a click expands one, this list folds it back.
  const blockSel = h("select", { class: "tv-blocks", "aria-label": "blocks" });
  const blockBox = h("label", { class: "tv-block-tools", hidden: true }, "blocks ", blockSel);
  // which trace the diagram draws: the chain's diagram_pass, as the payload names it
  const drawn = c.passes.find((p) => p.index === c.diagram_pass);
  const drawnLabel = drawn ? h("span", { class: "tv-muted tv-diagram-pass", text: `pass ${drawn.index} · ${drawn.name}` }) : null;
  const tools = h("div", { class: "tv-diagram-tools" }, drawnLabel,
    h("label", {}, "module ", modSel), h("label", {}, collapse, " one node per kernel"), blockBox, zoomIn, zoomOut, fitBtn);
  const viewport = h("div", { class: "tv-viewport" }, h("div", { class: "tv-muted", text: "drawing…" }));
  // A checked run (run --check-numerics): each kernel's verdict right after its name, as in the TUI;
  // the cell (text, verdict, errors on hover) is present.numerics.verdict_cell's.
  const checked = kernels.some((k) => k.numerics);
  const columns = ["kernel", ...(checked ? ["numerics"] : []), "executor", "ops", "median", "roofline µs", "% roof", "share", "source lines"];
  const [table, tb] = headedTable("tv-kernels", columns);
  const kdetail = h("div", { class: "tv-kernel-detail" });
  // A profiled run: the chain's wall time per call against its kernels (present.chain_times, the
  // line `thundervis ls` prints under the chain), the same on every kernel of the chain.
  const chainTime = kernels.length && kernels[0].chain_time
    ? h("div", { class: "tv-muted tv-chain-time", text: `${c.kind} chain: ${kernels[0].chain_time}` }) : null;
  frag.append(tools, h("div", { class: "tv-fusion-main" }, viewport, h("div", { class: "tv-kernel-side" }, chainTime, table, kdetail)));

  const sel = () => kernels.find((k) => k.name === state.kernel);
  const showKernel = () => {
    for (const tr of Array.from(tb.children)) tr.classList.toggle("tv-selected", tr.dataset.kernel === state.kernel);
    highlightKernel(viewport, sel());
    clear(kdetail);
    const k = sel();
    if (!k) {
      kdetail.appendChild(h("div", { class: "tv-muted", text: "Click a kernel to highlight its cluster and source lines." }));
      return;
    }
    const folded = k.fold && k.fold.folded; // present.kernel_folds: the first of a repeated layer's kernels
    kdetail.append(
      h("div", { class: "tv-detail-title", text: `${folded ? k.fold.row_label : k.label || k.name} · ${k.n_ops} ops` }),
      h("div", { class: "tv-kv" }, h("span", { class: "tv-k", text: "ops" }), h("span", { class: "tv-v", text: k.ops.map((o) => o.replace(/^prims\./, "")).join(", ") })),
    );
    if (folded) kdetail.appendChild(h("div", { class: "tv-kv tv-kernel-fold" }, h("span", { class: "tv-k", text: k.fold.label }), h("span", { class: "tv-v", text: k.fold.summary })));
    if (k.fallback) kdetail.appendChild(h("div", { class: "tv-kv tv-fellback" }, h("span", { class: "tv-k", text: k.status }), h("span", { class: "tv-v", text: k.fallback_text })));
    if (k.note) kdetail.appendChild(h("div", { class: "tv-kv" }, h("span", { class: "tv-k", text: "note" }), h("span", { class: "tv-v", text: k.note })));
    if (k.numerics) {
      kdetail.appendChild(h("div", { class: "tv-kv tv-kernel-numerics" }, h("span", { class: "tv-k", text: "numerics" }),
        h("span", { class: `tv-v ${verdictClass(k.numerics.verdict)}`, text: `${k.numerics.text} · ${k.numerics.title}` })));
    }
    const srcs = h("div", { class: "tv-kernel-sources" });
    for (const s of k.source_lines || []) {
      srcs.appendChild(
        h("div", { class: "tv-src-line tv-kernel-hl" },
          h("span", { class: "tv-lno", text: `${baseName(s.file)}:${s.line}  ` }), s.code || "",
          s.module ? h("span", { class: "tv-muted", text: `  [${s.module}]` }) : null,
          s.direction ? h("span", { class: "tv-muted", text: `  (${s.direction})` }) : null),
      );
    }
    kdetail.appendChild(srcs);
    if ((k.asm_targets || []).length) kdetail.appendChild(asmPanel(ask, model.get("graph"), c.kind, k.name, k.asm_targets));
  };
  const executorParts = (tag) => String(tag || "").split(" · ").flatMap((part, i, all) =>
    [h("span", { text: i < all.length - 1 ? `${part} ·` : part }), i < all.length - 1 ? " " : null]);
  for (const k of kernels) {
    const folded = k.fold && k.fold.folded; // one row for a repeated layer's kernels: the first one's, which opens
    if (folded && k.fold.opens !== k.id) continue;
    const tr = h(
      "tr",
      { class: "tv-kernel-row", "data-kernel": k.name },
      h("td", {}, folded ? k.fold.label : k.name,
        // a kernel that ran in torch at run time: present.kernel_rows status, its fallback_text on hover
        k.fallback ? h("span", { class: "tv-fellback", title: k.fallback_text, text: ` ⚠ ${k.status}` }) : null),
      checked ? h("td", { class: `tv-verdict ${verdictClass(k.numerics ? k.numerics.verdict : "")}`, title: k.numerics ? k.numerics.title : "",
                          text: k.numerics ? k.numerics.text : "-" }) : null,
      // present's tag, cut only at its " · ": "triton ·" / "ran on cpu via torch", two lines at most
      h("td", { class: "tv-executor" }, ...executorParts(k.tag || k.executor)),
      h("td", { text: k.n_ops }),
      // its chain's wall time per call against its kernels (present.chain_times) on hover
      h("td", { text: folded ? k.fold.median : k.median, title: k.chain_time ? `${k.chain} chain: ${k.chain_time}` : null }),
      h("td", { class: "tv-roofline", title: data.roofline_target ? `roofline on ${data.roofline_target}` : "", text: k.roofline_text }),
      h("td", { class: "tv-roof-pct", text: k.pct_of_roofline_text }),
      h("td", { text: folded ? k.fold.share_text : k.share_text }), // the fold's share: summed, as its median
      h("td", { text: k.sources_cell, title: k.sources }), // present.kernel_rows: the cell every table shows
    );
    tr.addEventListener("click", () => {
      state.kernel = state.kernel === k.name ? "" : k.name;
      set({ selected_kernel: state.kernel });
      showKernel();
    });
    tb.appendChild(tr);
  }
  if (!kernels.length) tb.appendChild(h("tr", {}, h("td", { colspan: columns.length, class: "tv-muted", text: "no kernels in this chain" })));

  diagramFor(view, c).then((d) => {
    clear(viewport);
    clear(modSel);
    modSel.appendChild(h("option", { value: "", text: "all modules" }));
    for (const m of d.modules || []) modSel.appendChild(h("option", { value: m, text: m }));
    modSel.value = state.module;
    collapse.checked = !!d.collapsed;
    const blocks = d.blocks || [];
    clear(blockSel);
    blockBox.hidden = !blocks.length;
    blockSel.appendChild(h("option", { value: "", text: blocks.some((b) => b.expanded) ? "expanded: fold…" : "click a box to expand it" }));
    for (const b of blocks.filter((x) => x.expanded)) blockSel.appendChild(h("option", { value: b.path, text: `fold ${b.path}` }));
    if (blocks.some((b) => b.expanded)) blockSel.appendChild(h("option", { value: "*", text: "fold all" }));
    // a fold of equal layers (dot_blocks.fold_blocks) expands its first layer
    for (const b of blocks.filter((x) => !x.expanded)) {
      blockSel.appendChild(h("option", { value: "+" + b.path, text: b.fold ? `expand ${b.path} (the first of ${b.fold})` : `expand ${b.path}` }));
    }
    const svg = d.svg ? safeSvg(d.svg) : null;
    if (!svg) {
      viewport.appendChild(h("div", { class: "tv-muted", text: d.error || "no diagram" }));
      showKernel();
      return;
    }
    svg.classList.add("tv-svg");
    viewport.appendChild(svg);
    const pz = panZoom(viewport, svg);
    zoomIn.addEventListener("click", () => pz.zoom(1.25));
    zoomOut.addEventListener("click", () => pz.zoom(0.8));
    fitBtn.addEventListener("click", () => pz.fit());
    requestAnimationFrame(() => pz.fit());
    for (const b of blocks) {
      if (b.expanded || !/^block_\d+$/.test(b.id)) continue;
      const node = svg.querySelector(`g.node[id="${b.id}"]`);
      if (!node) continue;
      node.classList.add("tv-clickable", "tv-block");
      node.addEventListener("click", (e) => {
        e.stopPropagation();
        state.expand = [...state.expand, b.path];
        render();
      });
    }
    for (const k of kernels) {
      for (const g2 of kernelShapes(svg, k)) {
        g2.classList.add("tv-clickable");
        g2.addEventListener("click", (e) => {
          e.stopPropagation();
          state.kernel = k.name;
          set({ selected_kernel: k.name });
          showKernel();
        });
      }
    }
    showKernel();
  });
  modSel.addEventListener("change", () => {
    state.module = modSel.value;
    state.expand = [];
    render();
  });
  collapse.addEventListener("change", () => {
    state.collapse = collapse.checked;
    render();
  });
  blockSel.addEventListener("change", () => {
    const v = blockSel.value;
    if (!v) return;
    if (v === "*") state.expand = [];
    else if (v.startsWith("+")) state.expand = [...state.expand, v.slice(1)];
    else state.expand = state.expand.filter((p) => p !== v);
    render();
  });
  showKernel();
  return frag;
}
