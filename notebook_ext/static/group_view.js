// thundervis notebook widget, a group of rank recordings (thundervis.api.show of a
// *.tvgroup folder): the group bar with the rank picker, and the Ranks tab (identical or not, the
// passes where each variant differs with the cross-rank diff of any of them, per-kernel skew).
//
// The group's overview comes in the "group" trait; picking a rank sets the "rank" trait and the
// kernel answers with that rank's payload in "data" (the recording view is then drawn again). The
// comparison is asked for the first time the Ranks tab opens and kept for the widget's life in
// `shared` (it survives rank switches). Every string goes through textContent (h()).

function rankOptionText(r) {
  const bits = [`rank ${r.rank}`];
  if (r.error) bits.push("unreadable");
  else bits.push(r.status || "?");
  if (r.exit_code !== null && r.exit_code !== undefined && r.exit_code !== 0) bits.push(`exit ${r.exit_code}`);
  if (r.host) bits.push(r.host);
  if (r.variant) bits.push(`variant ${r.variant}`);
  if (r.restart) bits.push(`restart ${r.restart}`);
  if (r.missing && r.missing.length) bits.push("texts missing");
  return bits.join(" · ");
}

// The bar under the header: group status, identical or not, the rank picker and what is wrong with
// the shown rank. Returns { el, dispose }.
function groupBar(model) {
  const g = model.get("group");
  const picker = h("select", { class: "tv-rank-picker", "aria-label": "rank" });
  const entries = g.ranks.map((r) => ({ rank: r.rank, r }));
  for (const a of g.absent || []) entries.push({ rank: a, r: null });
  entries.sort((x, y) => x.rank - y.rank);
  for (const { rank, r } of entries) {
    if (r) {
      picker.appendChild(
        h("option", {
          value: rank,
          text: rankOptionText(r),
          title: r.error || (r.missing && r.missing.length ? r.missing.join("\n") : r.file),
          "data-status": r.error ? "unreadable" : r.status,
        }),
      );
    } else {
      picker.appendChild(h("option", { value: rank, disabled: "disabled", text: `rank ${rank} · absent: no recording` }));
    }
  }
  picker.value = String(model.get("rank"));
  const traces = g.identical
    ? "traces identical on every rank"
    : `traces differ: ${g.variants.length} variants (see the Ranks tab)`;
  const status = h("span", { class: `tv-group-status tv-status-${g.status}`, text: g.status });
  const note = h("div", { class: "tv-rank-note" });
  const bar = h(
    "div",
    { class: "tv-group-bar", "data-rank": model.get("rank") }, // the rank this drawing shows
    h(
      "div",
      { class: "tv-group-line" },
      h("span", { class: "tv-group-name", text: `group ${g.name}`, title: g.path }),
      status,
      h("span", { class: "tv-muted", text: `${g.world_size} ranks · ${g.ranks.length} recordings` }),
      h("span", { class: g.identical ? "tv-identical" : "tv-differ", text: traces }),
      h("label", {}, "rank ", picker),
    ),
    note,
  );
  const shown = () => g.ranks.find((r) => r.rank === model.get("rank"));
  const fillNote = (loading) => {
    clear(note);
    const err = model.get("rank_error");
    if (loading !== null) note.appendChild(h("span", { class: "tv-muted", text: `loading rank ${loading}…` }));
    if (err) note.appendChild(h("span", { class: "tv-error", text: err }));
    const r = shown();
    for (const m of (r && r.missing) || []) note.appendChild(h("div", { class: "tv-error", text: `missing: ${m}` }));
    if (g.absent && g.absent.length) {
      note.appendChild(h("div", { class: "tv-muted", text: `absent: ranks ${g.absent_text} (no recording: the worker never started recording)` }));
    }
  };
  picker.addEventListener("change", () => {
    const rank = Number(picker.value);
    fillNote(rank);
    model.set("rank", rank);
    model.save_changes();
  });
  const sync = () => {
    picker.value = String(model.get("rank"));
    fillNote(null);
  };
  model.on("change:rank_error", sync);
  model.on("change:rank", sync);
  fillNote(null);
  return {
    el: bar,
    dispose: () => {
      model.off("change:rank_error", sync);
      model.off("change:rank", sync);
    },
  };
}

function countsText(counts) {
  if (!counts) return "";
  const changes = Object.entries(counts).filter(([k, n]) => n && k !== "unchanged");
  if (!changes.length) return "same code on every line: shapes or metadata differ";
  return changes.map(([k, n]) => `${n} ${k}`).join(", ");
}

// When every line's code is the same on both ranks: the printed traces' diff (shapes, dtypes...).
function printedDiff(d) {
  const pre = h("div", { class: "tv-trace tv-printed-diff" });
  for (const [marker, text] of d.printed_diff) {
    const cls = marker === "-" ? "tv-removed" : marker === "+" ? "tv-added" : marker === "@" ? "tv-muted" : "";
    pre.appendChild(h("div", { class: `tv-printed-line ${cls}`, "data-marker": marker, text: marker === "@" ? text : `${marker} ${text}` }));
  }
  return h(
    "div",
    {},
    h("div", { class: "tv-summary", text: "every line's code is the same on both ranks; the printed traces differ:" }),
    h("div", { class: "tv-muted", text: `${d.before}  →  ${d.after}` }),
    pre,
  );
}

function diffKey(rank, d) {
  return `${rank}/${d.graph}/${d.chain}/${d.index}`;
}

// The Ranks tab. `shared` keeps the comparison, the diffs asked for and the picked difference.
function ranksTab(model, shared) {
  const box = h("div", { class: "tv-ranks" });
  if (!shared.comparison) {
    shared.comparison = shared.ask({ what: "ranks" });
  }
  box.appendChild(h("div", { class: "tv-muted tv-ranks-loading", text: "comparing the ranks…" }));
  shared.comparison.then((r) => {
    clear(box);
    if (!r.ok) {
      box.appendChild(h("div", { class: "tv-error", text: r.error }));
      shared.comparison = null; // ask again next time
      return;
    }
    drawComparison(box, model, shared, r.data);
  });
  return box;
}

function drawComparison(box, model, shared, comp) {
  const summary =
    comp.reference_rank < 0
      ? "no rank recording could be read"
      : comp.identical
        ? `traces identical on all ${comp.n_ranks} ranks`
        : `traces differ: ${comp.variants.length} variants; reference rank ${comp.reference_rank}`;
  box.appendChild(h("div", { class: `tv-summary ${comp.identical ? "tv-identical" : "tv-differ"}`, text: summary }));

  const [vt, vb] = headedTable("tv-kernels tv-variants", ["variant", "ranks", "passes that differ", ""]);
  for (const v of comp.variants) {
    const open = h("button", {
      class: "tv-open-rank",
      text: `show rank ${v.first_rank}`,
      disabled: v.first_rank === model.get("rank") ? "disabled" : null,
      onclick: () => {
        model.set("rank", v.first_rank);
        model.save_changes();
      },
    });
    vb.appendChild(
      h("tr", { class: "tv-variant-row", "data-variant": v.label },
        h("td", { text: `${v.label}${v.reference ? " (reference)" : ""}`, title: v.fingerprint }),
        h("td", { text: `${v.ranks_text} (${v.n_ranks})` }),
        h("td", { text: v.reference ? "–" : String(v.n_differences) }),
        h("td", {}, open)),
    );
  }
  box.appendChild(vt);

  // each variant: per chain, its differing passes as chips; a click shows that pass's diff from
  // the reference rank right under the variant (only the chips and the diff change: the tab keeps
  // its scroll position)
  const chips = [];
  const diffHost = h("div", { class: "tv-rank-diff" });
  const pick = (key, p, list) => {
    shared.picked = shared.picked === key ? null : key;
    shared.pickedDiff = p;
    for (const c of chips) c.classList.toggle("tv-tick-on", c.dataset.key === shared.picked);
    clear(diffHost);
    diffHost.remove();
    if (shared.picked) {
      list.after(diffHost);
      showRankDiff(diffHost, shared);
    }
  };
  for (const v of comp.variants) {
    if (v.reference || !v.differences.length) continue;
    box.appendChild(
      h("div", {
        class: "tv-k tv-variant-title",
        text: `variant ${v.label} (rank ${v.first_rank}) against rank ${comp.reference_rank}: ${v.n_differences} passes differ`,
      }),
    );
    const chains = new Map();
    for (const d of v.differences) {
      const where = `graph ${d.graph} · ${d.chain}`;
      if (!chains.has(where)) chains.set(where, []);
      chains.get(where).push(d);
    }
    const list = h("div", { class: "tv-rank-diffs" });
    for (const [where, diffs] of chains) {
      const first = diffs.find((d) => d.counts);
      const line = h(
        "div",
        { class: "tv-rank-chain" },
        h("span", { class: "tv-where", text: `${where}: ` }),
      );
      for (const d of diffs) {
        const key = diffKey(v.first_rank, d);
        const what = d.only
          ? `only on the ${d.only === "reference" ? `reference (rank ${comp.reference_rank})` : `variant (rank ${v.first_rank})`}`
          : countsText(d.counts) || "the traces differ: click for the diff";
        const chip = h("span", {
          class: "tv-tick tv-rank-pass" + (d.only ? " tv-only" : "") + (shared.picked === key ? " tv-tick-on" : ""),
          text: `${d.index} ${d.name}`,
          title: what,
          "data-graph": d.graph,
          "data-chain": d.chain,
          "data-index": d.index,
          "data-rank": v.first_rank,
          "data-key": key,
        });
        if (!d.only) {
          const p = { rank: v.first_rank, graph: d.graph, chain: d.chain, index: d.index };
          chip.addEventListener("click", () => pick(key, p, list));
        }
        chips.push(chip);
        line.appendChild(chip);
      }
      if (first) line.appendChild(h("span", { class: "tv-muted", text: `  first: ${first.index} ${first.name}, ${countsText(first.counts)}` }));
      list.appendChild(line);
    }
    if (v.n_differences > v.differences.length) {
      list.appendChild(h("div", { class: "tv-muted", text: `… ${v.n_differences - v.differences.length} more (thundervis diff --ranks GROUP --json lists all)` }));
    }
    box.appendChild(list);
    if (shared.picked && chips.some((c) => c.dataset.key === shared.picked && list.contains(c))) {
      box.appendChild(diffHost);
      showRankDiff(diffHost, shared);
    }
  }

  for (const u of comp.unreadable) {
    box.appendChild(h("div", { class: "tv-error", text: `rank ${u.rank}: unreadable: ${u.error}` }));
  }

  box.appendChild(h("div", { class: "tv-k tv-skew-title", text: "kernel time across ranks (median per rank, most skewed first)" }));
  if (comp.skew_note) {
    box.appendChild(h("div", { class: "tv-muted tv-skew-note", text: comp.skew_note }));
    return;
  }
  const [st, sb] = headedTable("tv-kernels tv-skew-table",
    ["kernel", "graph · chain", "slowest rank", "median", "fastest rank", "median", "median of ranks", "skew"]);
  for (const k of comp.skew) {
    sb.appendChild(
      h("tr", { class: "tv-skew-row", "data-kernel": k.name },
        h("td", { text: k.name }),
        h("td", { text: `${k.graph} · ${k.chain}` }),
        h("td", { text: `rank ${k.slowest_rank}` }),
        h("td", { text: k.slowest_text }),
        h("td", { text: `rank ${k.fastest_rank}` }),
        h("td", { text: k.fastest_text }),
        h("td", { text: k.median_text }),
        h("td", { text: k.skew_text })),
    );
  }
  box.appendChild(st);
  if (comp.n_skews > comp.skew.length) {
    box.appendChild(h("div", { class: "tv-muted", text: `… ${comp.n_skews - comp.skew.length} more kernels` }));
  }
}

function showRankDiff(host, shared) {
  const p = shared.pickedDiff;
  const key = `${p.rank}/${p.graph}/${p.chain}/${p.index}`;
  shared.diffs = shared.diffs || new Map();
  if (!shared.diffs.has(key)) {
    shared.diffs.set(key, shared.ask({ what: "rank_diff", rank: p.rank, graph: p.graph, chain: p.chain, index: p.index }));
  }
  host.appendChild(h("div", { class: "tv-muted", text: "computing the diff…" }));
  shared.diffs.get(key).then((r) => {
    if (shared.picked !== key) return; // another pass was picked meanwhile
    clear(host);
    if (!r.ok) {
      shared.diffs.delete(key);
      host.appendChild(h("div", { class: "tv-error", text: r.error }));
      return;
    }
    if (r.data.printed_diff) host.appendChild(printedDiff(r.data));
    else host.append(countsLine(r.data), diffTable(r.data));
  });
}
