// thundervis notebook widget, the Passes tab of the recording widget: the pass stepper (buttons,
// slider, one tick per pass), the trace at a pass as the printer wrote it, or the diff of two passes,
// beside the selected symbol's details (detail_view.js).
// `view` is what recording_view.js shares with the tabs: { model, ask, data, set, graphOf, chainOf,
// render, infos, lineTable (the payload's shared trace lines), comm, diffCache, pickedPass (the pass
// a clicked diff cell belongs to), fusions: the Fusions tab's state, diagrams }.

// Ask for a big chain's traces (it came without them) once, then draw again.
function loadChain(view, c) {
  if (c.loading) return;
  c.loading = true;
  view.ask({ what: "chain", graph: view.model.get("graph"), chain: c.kind }).then((r) => {
    c.loading = false;
    if (!r.ok) {
      c.loadError = r.error;
    } else {
      Object.assign(c, r.data, { lazy: false });
    }
    view.render();
  });
}

// The trace lines of pass `index` of chain c: [uid, depth, text, info, kind, spans] each.
function linesAt(view, c, index) {
  const p = c.passes.find((x) => x.index === index);
  const held = p && p.same_as !== null && p.same_as !== undefined ? p.same_as : index;
  // payload lines are indexes into the shared table; a chain loaded later has them inline
  return ((c.lines && c.lines[String(held)]) || []).map((i) => (typeof i === "number" ? view.lineTable[i] : i));
}

// The folds of pass `index` of chain c (present.trace_folds: a run of equal layers behind one
// line), keyed by the printed line each starts at.
function foldsAt(c, index) {
  const p = c.passes.find((x) => x.index === index);
  const held = p && p.same_as !== null && p.same_as !== undefined ? p.same_as : index;
  const out = new Map();
  for (const f of (c.folds && c.folds[String(held)]) || []) out.set(f.start, f);
  return out;
}

// A promise of the diff of passes a -> b of chain c: sent in the payload, or asked for once.
function getDiff(view, c, a, b) {
  const key = `${view.model.get("graph")}/${c.kind}/${a}:${b}`;
  if (c.diffs && c.diffs[`${a}:${b}`]) return Promise.resolve(c.diffs[`${a}:${b}`]);
  if (view.diffCache.has(key)) return view.diffCache.get(key);
  const p = view.ask({ what: "diff", graph: view.model.get("graph"), chain: c.kind, a, b }).then((r) => {
    if (!r.ok) throw new Error(r.error);
    return r.data;
  });
  view.diffCache.set(key, p);
  return p;
}

// The uids of kernel `name` of the shown chain and of its members (highlighted in the trace).
function kernelUids(view, name) {
  const g = view.graphOf();
  const k = g && g.kernels.find((x) => x.name === name && x.chain === view.model.get("chain"));
  return k ? new Set([k.uid, ...k.members]) : new Set();
}

// The text cut at the printer's spans (outermost first; nested ones stay inside), as text nodes.
function spanned(text, spans) {
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

// The trace of chain c at pass `index`, one clickable line per symbol.
function traceView(view, c, index) {
  const { model, set, comm } = view;
  const hl = view.fusions.kernel ? kernelUids(view, view.fusions.kernel) : new Set();
  const pre = h("div", { class: "tv-trace" });
  const shown = c.passes.find((x) => x.index === index);
  const same = shown && shown.same_as !== null && shown.same_as !== undefined;
  const lines = linesAt(view, c, index);
  const folds = foldsAt(c, index);
  const opened = view.openFolds || (view.openFolds = new Set());
  for (let i = 0; i < lines.length; i++) {
    const f = folds.get(i);
    if (f) {
      // a fold hiding the selected symbol (a jump from Source or Fusions) opens
      const holds = lines.slice(f.start, f.end).some((ln) => ln[0] && ln[0] === model.get("selected_uid"));
      const open = opened.has(f.key) || holds;
      pre.appendChild(
        h("div", {
          class: "tv-line tv-fold-line",
          "data-fold": f.key,
          text: open ? f.open_line : f.line,
          onclick: () => {
            if (open) opened.delete(f.key);
            else opened.add(f.key);
            if (open && holds) set({ selected_uid: "" }); // closing the selected symbol's fold
            else view.render();
          },
        }),
      );
      if (!open) {
        i = f.end - 1;
        continue;
      }
    }
    const [uid, , printed, info, kind, spans] = lines[i];
    // an unchanged pass shows the trace of the pass before it: its header says so
    const text = same && kind === "header" ? `${printed}  · unchanged by "${shown.name}"` : printed;
    // the printer's line (present.trace_lines), as the CLI and the TUI show it; spans style its parts
    const inf = infoAt(view, info);
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
    if (uid) {
      line.addEventListener("click", () => {
        view.pickedPass = null;
        set({ selected_uid: uid });
      });
    }
    pre.appendChild(line);
  }
  return pre;
}

// The stepper: first, previous, slider, next, last, the pass's label, then one tick per pass.
function passStepper(c, pos, go) {
  const p = c.passes[pos];
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
  return [stepper, ticks];
}

// The "view" picker (trace only, or the diff from another pass) and the "diff with previous" button.
function compareModes(view, c, pos) {
  const p = c.passes[pos];
  const modeSel = h("select", { class: "tv-compare", "aria-label": "compare with" });
  modeSel.appendChild(h("option", { value: -1, text: "trace only" }));
  for (const q of c.passes) {
    if (q.index !== p.index) modeSel.appendChild(h("option", { value: q.index, text: `diff from ${q.index} ${q.name}` }));
  }
  modeSel.value = String(view.model.get("compare_index"));
  modeSel.addEventListener("change", () => view.set({ compare_index: Number(modeSel.value) }));
  const prevBtn = h("button", {
    class: "tv-diff-prev",
    text: "diff with previous",
    disabled: pos === 0 ? "disabled" : null,
    onclick: () => view.set({ compare_index: c.passes[pos - 1].index }),
  });
  return h("div", { class: "tv-modes" }, h("label", {}, "view ", modeSel), prevBtn);
}

// The diff of passes cmp -> shown into `left` once it arrives; a clicked cell selects its symbol.
function diffInto(view, left, c, cmp, shown) {
  left.appendChild(h("div", { class: "tv-muted", text: "computing diff…" }));
  getDiff(view, c, cmp, shown).then(
    (d) => {
      clear(left);
      left.append(
        countsLine(d),
        diffTable(d, {
          onPick: (uid, side) => {
            view.pickedPass = side === "a" ? cmp : shown;
            view.set({ selected_uid: uid });
          },
          selected: view.model.get("selected_uid"),
          sources: view.data.sources || [],
          opened: view.openDiffFolds || (view.openDiffFolds = new Set()),
          onUnselect: () => view.set({ selected_uid: "" }),
        }),
      );
    },
    (e) => {
      clear(left);
      left.appendChild(h("div", { class: "tv-error", text: String(e.message || e) }));
    },
  );
}

// The Passes tab of chain c (null: no graph shown).
function passesTab(view, c) {
  const { model, set } = view;
  const frag = h("div", { class: "tv-passes" });
  if (c && c.lazy) {
    frag.appendChild(h("div", { class: c.loadError ? "tv-error" : "tv-muted", text: c.loadError || `loading ${c.kind}…` }));
    if (!c.loadError) loadChain(view, c);
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
  frag.append(...passStepper(c, pos, go), compareModes(view, c, pos));
  const main = h("div", { class: "tv-main" });
  const left = h("div", { class: "tv-left" });
  main.append(left, detailView(view, c, p.index));
  frag.appendChild(main);
  const cmp = model.get("compare_index");
  if (cmp >= 0 && cmp !== p.index) {
    diffInto(view, left, c, cmp, p.index);
  } else {
    left.appendChild(traceView(view, c, p.index));
  }
  return frag;
}
