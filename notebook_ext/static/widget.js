// thundervis notebook widget, the last part: the diff widget (thundervis.diff) and the entry point.

// -- the diff widget -----------------------------------------------------------------------------

function renderDiff(model, el) {
  const data = model.get("data");
  const root = h("div", { class: "tv-root" });
  el.appendChild(root);
  root.appendChild(
    h("div", { class: "tv-header" }, h("span", { class: "tv-brand", text: "thundervis diff" }), h("span", { class: "tv-title", text: data.title })),
  );
  if (data.kind === "passes") {
    root.append(countsLine(data.diff), diffTable(data.diff));
    return;
  }
  const comp = data.comparison;
  const counts = Object.entries(comp.counts)
    .filter(([, n]) => n)
    .map(([k, n]) => `${n} ${k}`)
    .join(", ");
  root.appendChild(h("div", { class: "tv-summary", text: `fusions: ${counts || "none"}` }));
  const [table, tb] = headedTable("tv-kernels", ["change", "graph", "chain", "A", "B", "time A → B"]);
  for (const d of comp.differences) {
    tb.appendChild(
      h("tr", { class: `tv-run-${d.kind}` },
        h("td", { text: d.kind }),
        h("td", { text: d.graph_a !== null ? d.graph_a : d.graph_b }),
        h("td", { text: d.chain }),
        h("td", { text: d.a.map((f) => f.name).join(" + ") || "(unfused)" }),
        h("td", { text: d.b.map((f) => f.name).join(" + ") || "(unfused)" }),
        h("td", { text: `${d.time_a_text} → ${d.time_b_text}` })),
    );
  }
  // thundervis.diff.paths: the same fusions can still run through other paths (torch, Inductor)
  const paths = (comp.paths && comp.paths.lines) || [];
  if (!comp.differences.length) tb.appendChild(h("tr", {}, h("td", { colspan: 6, class: "tv-muted", text: paths.length ? "no fusion differences in what was fused" : "no fusion differences" })));
  for (const line of paths) tb.appendChild(h("tr", {}, h("td", { colspan: 6, text: line })));
  root.append(table, h("pre", { class: "tv-trace", text: data.text }));
}

function render({ model, el }) {
  el.classList.add("thundervis-widget");
  const data = model.get("data") || {};
  if (data.kind !== "recording") return renderDiff(model, el);
  // a group's widget gets a new payload when another rank is picked: draw the view again
  const shared = { ask: makeAsk(model) };
  let dispose = null;
  const draw = () => {
    if (dispose) dispose();
    clear(el);
    dispose = renderRecording(model, el, shared.ask, shared);
  };
  model.on("change:data", draw);
  draw();
  return () => {
    model.off("change:data", draw);
    if (dispose) dispose();
  };
}

export default { render };
