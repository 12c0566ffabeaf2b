// thundervis notebook widget, the Passes tab's side panel: one symbol's details (source line, module,
// executor, kernel, why) from the payload, then its lineage, snippet and timing as the kernel's
// "detail" request answers them (present.symbol_detail.SymbolView.as_json: rows ready to show).
// `view` is what recording_view.js shares with the tabs (see passes_view.js). Recorded text only
// ever goes into textContent, through h().

// A trace line's info: an index into the payload's shared `infos`, or (a chain loaded later) inline.
function infoAt(view, info) {
  if (info === null || info === undefined) return null;
  return typeof info === "number" ? view.infos[info] : info;
}

// The info of symbol `uid` in pass `index` of chain c, or null.
function infoOf(view, c, index, uid) {
  for (const [u, , , info] of linesAt(view, c, index)) {
    if (u === uid && info !== null && info !== undefined) return infoAt(view, info);
  }
  return null;
}

// A "key: value" row; nothing for an empty value.
function kv(k, v) {
  if (v === null || v === undefined || v === "") return null;
  return h("div", { class: "tv-kv" }, h("span", { class: "tv-k", text: k }), h("span", { class: "tv-v", text: v }));
}

// The lineage rows of a "detail" answer, appended to `more`.
function detailRows(more, d, inf) {
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
}

// The side panel for the selected symbol of chain c at pass `shown` (or at the pass of the diff
// side that was clicked, view.pickedPass).
function detailView(view, c, shown) {
  const { model, ask, data } = view;
  const uid = model.get("selected_uid");
  const index = view.pickedPass !== null ? view.pickedPass : shown;
  const box = h("div", { class: "tv-detail" });
  if (!uid) {
    box.appendChild(h("div", { class: "tv-muted", text: "Click a line for its source, lineage, kernel and fallback reason." }));
    return box;
  }
  const inf = infoOf(view, c, index, uid) || infoOf(view, c, model.get("compare_index"), uid);
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
    detailRows(more, r.data.detail, inf);
  });
  return box;
}
