// thundervis notebook widget, the recording widget (thundervis.api.show): graph and chain pickers,
// tabs and the banners, and which tab draws the body. The tabs are drawn by their own files: Passes
// (passes_view.js, with a symbol's details in detail_view.js), Fusions (fusions_view.js), Source (source_view.js),
// Communication (comm_view.js, when collectives ran between the graphs), Numerics
// (numerics_view.js), Memory (memory_view.js) and, for a group of ranks, the group bar and the Ranks tab (group_view.js).
// Drawn again whenever "data" changes (a rank switch): `shared` holds what outlives one drawing
// (requests, the rank comparison).

// -- the recording widget ------------------------------------------------------------------------

// The functions Dynamo ran eagerly (present.status.dynamo_fallbacks): no graph of theirs exists, so
// this banner is the only place the widget can say so. Recorded text goes in as text, never markup.
// The code Dynamo left to eager (present.eager_regions: graph breaks and functions it could not
// trace) comes first, each in its one wording; the functions it listed stand for the rest.
function dynamoBanner(data) {
  const regions = data.eager_regions || [];
  const items = data.dynamo_rest || data.dynamo_fallbacks || [];
  // present.compiled_share: by time and by ops, shown when measured or when code ran eagerly
  const share = data.compiled_share && (data.compiled_share.measured || regions.length) ? data.compiled_share : null;
  if (!items.length && !regions.length && !share && (data.graphs || []).length) return null;
  const box = h("div", { class: "tv-eager-banner tv-dynamo-banner" });
  if (data.run_status.no_graph) box.appendChild(h("div", { text: data.run_status.no_graph })); // present.run_status
  if (share) box.appendChild(h("div", { class: "tv-compiled-share", text: share.text }));
  for (const r of regions) box.appendChild(h("div", { text: r.text }));
  for (const f of items) {
    box.appendChild(h("div", {}, h("b", { text: `${f.what}${f.source ? " · " + f.source : ""}: ` }), f.reason));
  }
  return box;
}

// An abstract run (present.abstract_fit): fake tensors, its placeholders, and the fit and modelled
// step per GPU, each line as present words it. Text only.
function abstractBanner(data) {
  const lines = data.abstract_lines || [];
  if (!lines.length) return null;
  const box = h("div", { class: "tv-eager-banner tv-abstract-banner" });
  for (const line of lines) box.appendChild(h("div", { text: line }));
  return box;
}

function renderRecording(model, el, ask, shared) {
  const data = model.get("data");
  const groupInfo = model.get("group");
  const isGroup = !!(groupInfo && groupInfo.kind === "group");
  const fusionsState = { module: "", collapse: null, expand: [], kernel: model.get("selected_kernel") || "" };

  const comm = data.communication || null;
  const root = h("div", { class: "tv-root" });
  el.appendChild(root);

  const header = h(
    "div",
    { class: "tv-header" },
    h("span", { class: "tv-brand", text: "thundervis" }),
    h("span", { class: "tv-title", text: data.title }),
    h("span", {
      class: "tv-muted",
      // a session recording (thundervis.jit in this kernel) stays "running" while the kernel lives
      text: `${data.run_status.label}${data.device ? " · " + data.device : ""}`, // present.run_status
    }),
    comm && comm.header ? h("span", { class: "tv-comm-count", title: "communication ops in the traces · collectives run between compiled graphs", text: comm.header }) : null,
  );
  const graphSel = h("select", { class: "tv-graph", "aria-label": "graph" });
  const chainSel = h("select", { class: "tv-chain", "aria-label": "chain" });
  const tabPasses = h("button", { class: "tv-tab", "data-tab": "passes", text: "Passes" });
  const tabFusions = h("button", { class: "tv-tab", "data-tab": "fusions", text: "Fusions" });
  const tabSource = h("button", { class: "tv-tab", "data-tab": "source", text: "Source" });
  const sourceState = { file: null, graph: null, line: null, onlyOps: false, cache: new Map() };
  const tabComm = hasCommTab(comm) ? h("button", { class: "tv-tab", "data-tab": "comm", text: "Communication" }) : null;
  const numerics = data.numerics || null;
  const numericsState = { key: null, row: null, bisects: new Map() };
  const tabNumerics = hasNumericsTab(numerics) ? h("button", { class: "tv-tab", "data-tab": "numerics", text: "Numerics" }) : null;
  const memory = hasMemoryTab(data.memory) ? data.memory : null;
  const tabMemory = memory ? h("button", { class: "tv-tab", "data-tab": "memory", text: "Memory" }) : null;
  const tabRanks = isGroup ? h("button", { class: "tv-tab", "data-tab": "ranks", text: "Ranks" }) : null;
  const toolbar = h(
    "div",
    { class: "tv-toolbar" },
    h("label", {}, "graph ", graphSel),
    h("label", {}, "chain ", chainSel),
    h("span", { class: "tv-tabs" }, tabPasses, tabFusions, tabSource, tabComm, tabNumerics, tabMemory, tabRanks),
  );
  const eagerBanner = h("div", { class: "tv-eager-banner" });
  const body = h("div", { class: "tv-body" });
  const bar = isGroup ? groupBar(model) : null;
  root.append(...[header, abstractBanner(data), dynamoBanner(data), bar && bar.el, toolbar, eagerBanner, body].filter(Boolean));

  // what is picked, else the view present.default_view opens (default_graph, default_chain)
  const graphOf = () =>
    data.graphs.find((g) => g.id === model.get("graph")) || data.graphs.find((g) => g.id === data.default_graph);
  const chainOf = () => {
    const g = graphOf();
    if (!g) return null;
    return g.chains.find((c) => c.kind === model.get("chain")) || g.chains.find((c) => c.kind === g.default_chain);
  };
  const set = (changes) => {
    for (const [k, v] of Object.entries(changes)) model.set(k, v);
    model.save_changes();
  };
  // what the Passes and Fusions tabs (passes_view.js, fusions_view.js) read and keep across drawings
  const view = {
    model, ask, data, set, graphOf, chainOf, comm, render: () => render(),
    infos: data.infos || [],
    lineTable: data.lines || [], // [uid, depth, text, info, kind, spans]; each pass lists indexes into it
    diffCache: new Map(),
    pickedPass: null, // the pass a clicked diff cell belongs to (the before side: the compared pass)
    fusions: fusionsState,
    diagrams: new Map(),
  };

  function fillPickers() {
    clear(graphSel);
    for (const g of data.graphs) {
      const eager = g.chains.some((c) => c.eager);
      graphSel.appendChild(
        // present.compile_times' words: forward plus the lazily compiled backward, each part
        h("option", { value: g.id, text: `graph ${g.id}${eager ? " (eager chains)" : ""}${g.compile ? " · " + g.compile.text : ""}` }),
      );
    }
    graphSel.value = String(model.get("graph"));
    clear(chainSel);
    const g = graphOf();
    for (const c of g ? g.chains : []) {
      // present.compile_times per chain: "built in 0.21 s after the partition, from cache" when the compile cache was on
      const cc = g.compile && g.compile.chains ? g.compile.chains[c.kind] : null;
      const cached = cc && cc.from_cache !== null && cc.text ? " · " + cc.text : "";
      chainSel.appendChild(
        h("option", { value: c.kind, text: `${c.kind} · ${c.passes.length} passes${c.eager ? " · ran eagerly" : ""}${cached}` }),
      );
    }
    chainSel.value = model.get("chain");
    const c = chainOf();
    clear(eagerBanner);
    if (c && c.eager) {
      eagerBanner.append(h("b", { text: "ran eagerly: " }), c.eager);
      eagerBanner.style.display = "";
    } else {
      eagerBanner.style.display = "none";
    }
  }

  graphSel.addEventListener("change", () => {
    const g = data.graphs.find((x) => String(x.id) === graphSel.value);
    const kind = (g.chain_on_switch || {})[model.get("chain")] || g.default_chain; // present.default_view.chain_on_switch
    const c = g.chains.find((x) => x.kind === kind);
    set({ graph: g.id, chain: c ? c.kind : "", pass_index: c ? c.default_pass : 0, compare_index: -1, selected_uid: "" });
  });
  chainSel.addEventListener("change", () => {
    const c = graphOf().chains.find((x) => x.kind === chainSel.value);
    set({ chain: c.kind, pass_index: c.default_pass, compare_index: -1, selected_uid: "" });
  });
  tabPasses.addEventListener("click", () => set({ tab: "passes" }));
  tabFusions.addEventListener("click", () => set({ tab: "fusions" }));
  tabSource.addEventListener("click", () => set({ tab: "source" }));
  if (tabComm) tabComm.addEventListener("click", () => set({ tab: "comm" }));
  if (tabNumerics) tabNumerics.addEventListener("click", () => set({ tab: "numerics" }));
  if (tabMemory) tabMemory.addEventListener("click", () => set({ tab: "memory" }));
  if (tabRanks) tabRanks.addEventListener("click", () => set({ tab: "ranks" }));

  function render() {
    if (model.get("data") !== data) return; // a new rank's payload came: the view is drawn again
    fillPickers();
    const wanted = model.get("tab");
    const tab = wanted === "fusions" || wanted === "source" || (wanted === "ranks" && isGroup) || (wanted === "comm" && tabComm) ||
      (wanted === "numerics" && tabNumerics) || (wanted === "memory" && tabMemory) ? wanted : "passes";
    tabPasses.classList.toggle("tv-tab-on", tab === "passes");
    tabFusions.classList.toggle("tv-tab-on", tab === "fusions");
    tabSource.classList.toggle("tv-tab-on", tab === "source");
    if (tabComm) tabComm.classList.toggle("tv-tab-on", tab === "comm");
    if (tabNumerics) tabNumerics.classList.toggle("tv-tab-on", tab === "numerics");
    if (tabMemory) tabMemory.classList.toggle("tv-tab-on", tab === "memory");
    if (tabRanks) tabRanks.classList.toggle("tv-tab-on", tab === "ranks");
    clear(body);
    if (tab === "ranks") {
      body.appendChild(ranksTab(model, shared));
      return;
    }
    if (tab === "comm") {
      body.appendChild(commTab(comm));
      return;
    }
    if (tab === "numerics") {
      body.appendChild(numericsTab(numerics, ask, numericsState, render, set));
      return;
    }
    if (tab === "memory") {
      body.appendChild(memoryTab(memory));
      return;
    }
    if (tab === "source") {
      body.appendChild(sourceTab(model, ask, data, set, sourceState));
      return;
    }
    const c = chainOf();
    if (!c) {
      body.appendChild(h("div", { class: "tv-muted", text: "this recording holds no compiled graph" }));
      return;
    }
    body.appendChild(tab === "fusions" ? fusionsTab(view, c) : passesTab(view, c));
  }

  const rerender = () => render();
  for (const name of ["graph", "chain", "pass_index", "compare_index", "tab", "selected_uid"]) {
    model.on(`change:${name}`, rerender);
  }
  const kernelPicked = () => {
    fusionsState.kernel = model.get("selected_kernel") || "";
    render();
  };
  model.on("change:selected_kernel", kernelPicked);
  render();
  return () => {
    for (const name of ["graph", "chain", "pass_index", "compare_index", "tab", "selected_uid"]) {
      model.off(`change:${name}`, rerender);
    }
    model.off("change:selected_kernel", kernelPicked);
    if (bar) bar.dispose();
  };
}
