// thundervis notebook widget, the recording widget (thundervis.api.show): graph and chain pickers,
// tabs, the pass stepper, the trace or the diff of two passes, and a symbol's details and lineage.
// The other tabs are drawn by their own files: Fusions (fusions_view.js), Source (source_view.js),
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
  if (!items.length && !regions.length && (data.graphs || []).length) return null;
  const box = h("div", { class: "tv-eager-banner tv-dynamo-banner" });
  if (data.run_status.no_graph) box.appendChild(h("div", { text: data.run_status.no_graph })); // present.run_status
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
  const infos = data.infos || [];
  const lineTable = data.lines || []; // [uid, depth, text, info, kind, spans]; each pass lists indexes into it
  const diffCache = new Map();
  const fusionsState = { module: "", collapse: null, expand: [], kernel: model.get("selected_kernel") || "" };
  let pickedPass = null; // the pass a clicked diff cell belongs to (the before side: the compared pass)

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
  // what the Fusions tab (fusions_view.js) reads and keeps across drawings
  const fusionsView = { model, ask, data, set, graphOf, render: () => render(), fusions: fusionsState, diagrams: new Map() };

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
      chainSel.appendChild(
        h("option", { value: c.kind, text: `${c.kind} · ${c.passes.length} passes${c.eager ? " · ran eagerly" : ""}` }),
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

  // -- passes tab ---------------------------------------------------------------------------------

  function infoAt(info) {
    if (info === null || info === undefined) return null;
    return typeof info === "number" ? infos[info] : info;
  }

  function loadChain(c) {
    // a big chain comes without its traces; fetch them once, then draw again
    if (c.loading) return;
    c.loading = true;
    ask({ what: "chain", graph: model.get("graph"), chain: c.kind }).then((r) => {
      c.loading = false;
      if (!r.ok) {
        c.loadError = r.error;
      } else {
        Object.assign(c, r.data, { lazy: false });
      }
      render();
    });
  }

  function linesAt(c, index) {
    const p = c.passes.find((x) => x.index === index);
    const held = p && p.same_as !== null && p.same_as !== undefined ? p.same_as : index;
    // payload lines are indexes into the shared table; a chain loaded later has them inline
    return ((c.lines && c.lines[String(held)]) || []).map((i) => (typeof i === "number" ? lineTable[i] : i));
  }

  function getDiff(c, a, b) {
    const key = `${model.get("graph")}/${c.kind}/${a}:${b}`;
    if (c.diffs && c.diffs[`${a}:${b}`]) return Promise.resolve(c.diffs[`${a}:${b}`]);
    if (diffCache.has(key)) return diffCache.get(key);
    const p = ask({ what: "diff", graph: model.get("graph"), chain: c.kind, a, b }).then((r) => {
      if (!r.ok) throw new Error(r.error);
      return r.data;
    });
    diffCache.set(key, p);
    return p;
  }

  function kernelUids(name) {
    const g = graphOf();
    const k = g && g.kernels.find((x) => x.name === name && x.chain === model.get("chain"));
    return k ? new Set([k.uid, ...k.members]) : new Set();
  }

  function traceView(c, index) {
    const hl = fusionsState.kernel ? kernelUids(fusionsState.kernel) : new Set();
    const pre = h("div", { class: "tv-trace" });
    const shown = c.passes.find((x) => x.index === index);
    const same = shown && shown.same_as !== null && shown.same_as !== undefined;
    for (const [uid, , printed, info, kind, spans] of linesAt(c, index)) {
      // an unchanged pass shows the trace of the pass before it: its header says so
      const text = same && kind === "header" ? `${printed}  · unchanged by "${shown.name}"` : printed;
      // the printer's line (present.trace_lines), as the CLI and the TUI show it; spans style its parts
      const inf = infoAt(info);
      const src = inf && inf.source;
      const line = h(
        "div",
        {
          class:
            `tv-line tv-${kind || "stmt"}` +
            (uid && uid === model.get("selected_uid") ? " tv-selected" : "") +
            (uid && hl.has(uid) ? " tv-kernel-hl" : "") +
            (inf && inf.comm ? " tv-comm" : inf && inf.status ? " tv-fallback" : ""), // present.status.symbol_status
          "data-uid": uid || "",
          title:
            (inf && inf.comm ? (comm ? comm.note : "communication op") + ". " : "") +
            (src ? `${src.label}  ${src.code}${src.module ? "  [" + src.module + "]" : ""}` : ""),
        },
        inf && inf.comm ? h("span", { class: "tv-comm-mark", text: "⇄ " }) : null,
        ...spanned(text, spans || []),
      );
      if (!uid) {
        pre.appendChild(line);
        continue;
      }
      line.addEventListener("click", () => {
        pickedPass = null;
        set({ selected_uid: uid });
      });
      pre.appendChild(line);
    }
    return pre;
  }

  function spanned(text, spans) {
    // the text cut at the printer's spans (outermost first; nested ones stay inside), as text nodes
    const out = [];
    let at = 0;
    for (const [a, e, k] of spans) {
      if (a < at) continue; // nested in the span before: its text is already out
      if (a > at) out.push(text.slice(at, a));
      out.push(h("span", { class: `tv-sp-${k}`, text: text.slice(a, e) }));
      at = e;
    }
    if (at < text.length) out.push(text.slice(at));
    return out;
  }

  function infoOf(c, index, uid) {
    for (const [u, , , info] of linesAt(c, index)) {
      if (u === uid && info !== null && info !== undefined) return infoAt(info);
    }
    return null;
  }

  function kv(k, v) {
    if (v === null || v === undefined || v === "") return null;
    return h("div", { class: "tv-kv" }, h("span", { class: "tv-k", text: k }), h("span", { class: "tv-v", text: v }));
  }

  function detailView(c, shown) {
    const uid = model.get("selected_uid");
    const index = pickedPass !== null ? pickedPass : shown;
    const box = h("div", { class: "tv-detail" });
    if (!uid) {
      box.appendChild(h("div", { class: "tv-muted", text: "Click a line for its source, lineage, kernel and fallback reason." }));
      return box;
    }
    const inf = infoOf(c, index, uid) || infoOf(c, model.get("compare_index"), uid);
    box.appendChild(h("div", { class: "tv-detail-title", text: `${inf ? inf.sym : uid}  (uid ${uid})` }));
    if (inf) {
      const src = inf.source;
      box.append(
        ...[
          kv("source", src ? `${src.label}  ${src.code}` : "no user source line"),
          kv("module", src && src.module),
          inf.comm ? kv("communication", (data.communication || {}).note) : null, // present.collectives.CLAIM_NOTE
          kv("executor", inf.executor),
          kv("kernel", inf.kernel),
          kv("why", inf.note),
          kv("aten", inf.aten),
        ].filter(Boolean),
      );
    }
    if (uid.startsWith("<")) {
      box.appendChild(h("div", { class: "tv-muted", text: "the signature or return line: no symbol to follow" }));
      return box;
    }
    const more = h("div", { class: "tv-more tv-muted", text: "loading lineage…" });
    box.appendChild(more);
    ask({ what: "detail", graph: model.get("graph"), chain: c.kind, pass: index, uid }).then((r) => {
      clear(more);
      more.className = "tv-more";
      if (!r.ok) {
        more.appendChild(h("div", { class: "tv-muted", text: r.error }));
        return;
      }
      const d = r.data.detail; // present.symbol_detail.SymbolView.as_json(): rows ready to show
      if (d.snippet.length) {
        const sn = h("div", { class: "tv-snippet" });
        for (const [n, t] of d.snippet) {
          sn.appendChild(
            h("div", { class: n === d.source_line ? "tv-snip-line tv-snip-hit" : "tv-snip-line" },
              h("span", { class: "tv-lno", text: String(n).padStart(4) + "  " }), t),
          );
        }
        more.append(h("div", { class: "tv-k", text: baseName(d.source_file || "") }), sn);
      }
      if (d.ended_in.length) more.appendChild(kv("ended in", d.ended_in.join(", ")));
      if (d.timing) more.appendChild(kv("time", d.timing));
      if (d.fallback && (!inf || d.fallback !== inf.note)) more.appendChild(kv("fallback", d.fallback));
      if (d.came_from.length) more.appendChild(kv("came from", d.came_from.join(", ")));
      if (d.became.length) more.appendChild(kv("became", d.became.join(", ")));
      if (d.twins.length) more.appendChild(kv("twins", d.twins.join("; ")));
      const lin = h("div", { class: "tv-lineage" }, h("div", { class: "tv-k", text: "lineage" }));
      for (const cl of d.lineage) {
        const steps = cl.steps.map(([passes, syms]) => `${passes}: ${syms}`);
        lin.appendChild(
          h("div", { class: "tv-lin-chain" },
            h("b", { text: cl.chain }), h("span", { class: "tv-muted", text: cl.link ? ` (${cl.link})` : "" }),
            h("div", { class: "tv-lin-steps", text: steps.join("  →  ") })),
        );
      }
      more.appendChild(lin);
    });
    return box;
  }

  function passesTab(c) {
    const frag = h("div", { class: "tv-passes" });
    if (c && c.lazy) {
      frag.appendChild(h("div", { class: c.loadError ? "tv-error" : "tv-muted", text: c.loadError || `loading ${c.kind}…` }));
      if (!c.loadError) loadChain(c);
      return frag;
    }
    if (!c || !c.passes.length) {
      frag.appendChild(h("div", { class: "tv-muted", text: "no recorded pass" }));
      return frag;
    }
    const idx = c.passes.findIndex((p) => p.index === model.get("pass_index"));
    const pos = idx < 0 ? c.passes.findIndex((q) => q.index === c.default_pass) : idx;
    const p = c.passes[pos];
    const go = (k) => {
      const q = c.passes[Math.max(0, Math.min(c.passes.length - 1, k))];
      set({ pass_index: q.index, selected_uid: model.get("selected_uid") });
    };
    const slider = h("input", { type: "range", class: "tv-slider", min: 0, max: c.passes.length - 1, step: 1, value: pos, "aria-label": "pass" });
    slider.addEventListener("input", () => go(Number(slider.value)));
    const label = h("span", {
      class: "tv-pass-label",
      text: `pass ${p.index} · ${p.name} · ${p.ms_text} · ${p.changed ? "changed" : "unchanged"} · ${p.n_symbols} symbols`,
    });
    const stepper = h(
      "div",
      { class: "tv-stepper" },
      h("button", { class: "tv-first", title: "first pass", text: "|◀", onclick: () => go(0) }),
      h("button", { class: "tv-prev", title: "previous pass", text: "◀", onclick: () => go(pos - 1) }),
      slider,
      h("button", { class: "tv-next", title: "next pass", text: "▶", onclick: () => go(pos + 1) }),
      h("button", { class: "tv-last", title: "last pass", text: "▶|", onclick: () => go(c.passes.length - 1) }),
      label,
    );
    const ticks = h("div", { class: "tv-ticks" });
    c.passes.forEach((q, k) => {
      ticks.appendChild(
        h("span", {
          class: "tv-tick" + (k === pos ? " tv-tick-on" : "") + (q.changed ? "" : " tv-tick-same"),
          text: q.name,
          title: `${q.index} ${q.name}: ${q.changed ? "changed" : "unchanged"}, ${q.ms_text}`,
          onclick: () => go(k),
        }),
      );
    });
    const cmp = model.get("compare_index");
    const modeSel = h("select", { class: "tv-compare", "aria-label": "compare with" });
    modeSel.appendChild(h("option", { value: -1, text: "trace only" }));
    for (const q of c.passes) {
      if (q.index !== p.index) modeSel.appendChild(h("option", { value: q.index, text: `diff from ${q.index} ${q.name}` }));
    }
    modeSel.value = String(cmp);
    modeSel.addEventListener("change", () => set({ compare_index: Number(modeSel.value) }));
    const prevBtn = h("button", {
      class: "tv-diff-prev",
      text: "diff with previous",
      disabled: pos === 0 ? "disabled" : null,
      onclick: () => set({ compare_index: c.passes[pos - 1].index }),
    });
    const modes = h("div", { class: "tv-modes" }, h("label", {}, "view ", modeSel), prevBtn);
    frag.append(stepper, ticks, modes);
    const main = h("div", { class: "tv-main" });
    const left = h("div", { class: "tv-left" });
    main.append(left, detailView(c, p.index));
    frag.appendChild(main);
    if (cmp >= 0 && cmp !== p.index) {
      left.appendChild(h("div", { class: "tv-muted", text: "computing diff…" }));
      getDiff(c, cmp, p.index).then(
        (d) => {
          clear(left);
          left.append(
            countsLine(d),
            diffTable(d, {
              onPick: (uid, side) => {
                pickedPass = side === "a" ? cmp : p.index;
                set({ selected_uid: uid });
              },
              selected: model.get("selected_uid"),
              sources: data.sources || [],
            }),
          );
        },
        (e) => {
          clear(left);
          left.appendChild(h("div", { class: "tv-error", text: String(e.message || e) }));
        },
      );
    } else {
      left.appendChild(traceView(c, p.index));
    }
    return frag;
  }

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
    body.appendChild(tab === "fusions" ? fusionsTab(fusionsView, c) : passesTab(c));
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
