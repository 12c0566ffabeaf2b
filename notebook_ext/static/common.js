// thundervis notebook widget, the helpers every part uses: DOM helpers, requests to the kernel, the
// SVG diagram's sanitising and pan/zoom, and the side-by-side diff table. widget.py joins the parts
// (its FRONT_END_PARTS, this one first and widget.js last) into the one ES module anywidget loads.
//
// Plain ES module, shipped as is (no build step, nothing loaded from the network). Everything from
// a recording reaches the page through textContent / attribute setters, never as markup; the
// fusion diagram (SVG made by Graphviz in the kernel) is parsed as XML and stripped of scripts,
// event handlers, foreign objects and links before it is shown.

// C0 controls but newline and tab, DEL, C1 controls (8-bit CSI U+009B, OSC U+009D), the Unicode
// format characters that reorder or hide text (bidi marks, overrides and isolates, zero-width ones,
// BOM) and lone surrogates: the same set as the terminal views' thundervis/safe_text.py. A recorded
// U+202E must not reorder what the page shows. (No `u` flag: surrogates are matched as code units,
// a well-formed pair is left alone.)
const UNSAFE_CHARS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function visible(text) {
  return String(text).replace(UNSAFE_CHARS, (ch) => {
    const c = ch.charCodeAt(0);
    if (ch === "\r") return "\\r";
    return c < 0x100 ? "\\x" + c.toString(16).padStart(2, "0") : "\\u" + c.toString(16).padStart(4, "0");
  });
}

// Set an element's text to `text` made visible: every text a view sets outside h() goes through it.
function setText(el, text) {
  el.textContent = visible(text === null || text === undefined ? "" : text);
}

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = visible(v);
    else if (k === "text") el.textContent = visible(v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, visible(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(visible(c)));
  }
  return el;
}

// A table of class `cls` with one header row of `headers`; returns [table, tbody] (the body is in the table).
function headedTable(cls, headers) {
  const body = h("tbody");
  return [h("table", { class: cls }, h("thead", {}, h("tr", {}, ...headers.map((t) => h("th", { text: t })))), body), body];
}

function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

function baseName(path) {
  const s = String(path || "?");
  const i = s.lastIndexOf("/");
  return i >= 0 ? s.slice(i + 1) : s;
}

// -- requests to the kernel ----------------------------------------------------------------------

function makeAsk(model) {
  let next = 0;
  const pending = new Map();
  model.on("msg:custom", (msg) => {
    if (msg && pending.has(msg.id)) {
      const resolve = pending.get(msg.id);
      pending.delete(msg.id);
      resolve(msg);
    }
  });
  return (request) =>
    new Promise((resolve) => {
      next += 1;
      pending.set(next, resolve);
      model.send({ id: next, request });
    });
}

// -- the SVG diagram -----------------------------------------------------------------------------

function safeSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  if (!root || root.nodeName.toLowerCase() !== "svg" || doc.getElementsByTagName("parsererror").length) {
    return null;
  }
  for (const bad of Array.from(root.querySelectorAll("script, foreignObject, iframe, object, embed, use"))) {
    bad.remove();
  }
  for (const el of [root, ...Array.from(root.querySelectorAll("*"))]) {
    for (const attr of Array.from(el.attributes)) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on") || name === "href" || name === "xlink:href" || name === "style") {
        el.removeAttribute(attr.name);
      }
    }
  }
  return document.importNode(root, true);
}

function panZoom(viewport, svg) {
  const state = { x: 0, y: 0, k: 1 };
  const apply = () => {
    svg.style.transform = `translate(${state.x}px, ${state.y}px) scale(${state.k})`;
  };
  svg.style.transformOrigin = "0 0";
  viewport.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const r = viewport.getBoundingClientRect();
      const mx = e.clientX - r.left;
      const my = e.clientY - r.top;
      const f = Math.exp(-e.deltaY * 0.0015);
      const k = Math.min(8, Math.max(0.05, state.k * f));
      state.x = mx - ((mx - state.x) * k) / state.k;
      state.y = my - ((my - state.y) * k) / state.k;
      state.k = k;
      apply();
    },
    { passive: false },
  );
  let drag = null;
  viewport.addEventListener("mousedown", (e) => {
    drag = { x: e.clientX - state.x, y: e.clientY - state.y };
    viewport.classList.add("tv-grabbing");
  });
  window.addEventListener("mouseup", () => {
    drag = null;
    viewport.classList.remove("tv-grabbing");
  });
  viewport.addEventListener("mousemove", (e) => {
    if (!drag) return;
    state.x = e.clientX - drag.x;
    state.y = e.clientY - drag.y;
    apply();
  });
  const fit = () => {
    // measure the drawing at scale 1, then fit it into the viewport (never blown up past 1.5x)
    svg.style.transform = "none";
    const r = svg.getBoundingClientRect();
    const vw = viewport.clientWidth || 800;
    const vh = viewport.clientHeight || 500;
    // a tall graph (most traces) is fitted to the width and read by panning down, not shrunk unreadable
    const kw = (vw - 8) / r.width;
    state.k = r.width > 0 && r.height > 0 ? Math.min(1.5, kw, Math.max((vh - 8) / r.height, 0.6 * kw)) : 1;
    state.x = Math.max(0, (vw - r.width * state.k) / 2);
    state.y = 4;
    apply();
  };
  const zoom = (f) => {
    state.k = Math.min(8, Math.max(0.05, state.k * f));
    apply();
  };
  apply();
  return { fit, zoom };
}

// -- diff tables ---------------------------------------------------------------------------------

const STATUS_CLASS = {
  unchanged: "tv-unchanged",
  changed: "tv-changed",
  added: "tv-added",
  removed: "tv-removed",
  "replaced-by": "tv-replaced",
  "fused-into": "tv-fused",
  moved: "tv-moved",
};

function textWithSpans(text, spans, cls) {
  const frag = document.createDocumentFragment();
  let pos = 0;
  for (const [s, e] of spans || []) {
    if (s > pos) frag.appendChild(document.createTextNode(visible(text.slice(pos, s))));
    frag.appendChild(h("span", { class: cls, text: text.slice(s, e) }));
    pos = e;
  }
  frag.appendChild(document.createTextNode(visible(text.slice(pos))));
  return frag;
}

// rows: [status, left, right, note] or, for unchanged lines Python folded (notebook_ext/diff_data.py
// diff_json), ["fold", null, null, text, rows], or for what a pass did to repeated layers
// (thundervis.diff.layer_folds) ["layer", null, null, text, rows, key, open_text]; cell: [marker,
// depth, text, spans, uid, source]. A click opens an unchanged run; a layer fold opens and closes
// (`opened`: the keys of the layer folds open, kept by the caller across redraws). A fold holding
// the `selected` symbol (a jump from another tab) is drawn open; closing it calls `onUnselect`.
function diffTable(diff, { onPick = null, selected = null, sources = [], opened = new Set(), onUnselect = null } = {}) {
  const table = h("table", { class: "tv-diff-table" });
  table.appendChild(
    h("thead", {}, h("tr", {}, h("th", { text: diff.before }), h("th", { text: diff.after }), h("th", { text: "" }))),
  );
  const body = h("tbody");
  table.appendChild(body);
  const cell = (c, side, status) => {
    if (!c) return h("td", { class: "tv-empty" });
    const [marker, depth, text, spans, uid, src] = c;
    const source = typeof src === "number" ? sources[src] : src; // payload diffs share one table
    const cls = status === "changed" ? (side === "a" ? "tv-hl-a" : "tv-hl-b") : "";
    const td = h(
      "td",
      {
        class: `tv-code ${STATUS_CLASS[status] || ""}` + (selected && uid === selected ? " tv-selected" : ""),
        title: source ? `${text}\n${source}` : text,
        "data-uid": uid,
        "data-side": side,
      },
      h("span", { class: "tv-marker", text: marker === " " ? " " : marker }),
      "  ".repeat(depth),
      textWithSpans(text, spans, cls),
    );
    if (onPick && uid) td.addEventListener("click", () => onPick(uid, side));
    return td;
  };
  const folded = (r) => r[0] === "fold" || r[0] === "layer";
  const holds = (rows) =>
    !!selected && rows.some((r) => (folded(r) ? holds(r[4]) : [r[1], r[2]].some((c) => c && c[4] === selected)));
  const runs = new Set(); // the unchanged runs opened, by their place in the rows
  const draw = () => {
    clear(body);
    emit(diff.rows, "");
  };
  const emit = (rows, path) =>
    rows.forEach((r, i) => {
      const [status, left, right, note] = r;
      if (!folded(r)) {
        body.appendChild(
          h(
            "tr",
            { class: `tv-row ${STATUS_CLASS[status] || ""}`, "data-status": status },
            cell(left, "a", status),
            cell(right, "b", status),
            h("td", { class: "tv-note", text: note || "", title: note || null }),
          ),
        );
        return;
      }
      const layer = status === "layer";
      const open = layer ? opened.has(r[5]) : runs.has(path + i);
      if (!layer && open) return emit(r[4], `${path}${i}/`); // an opened run leaves no row
      const toggle = () => {
        if (!layer) runs.add(path + i);
        else if (open) opened.delete(r[5]);
        else opened.add(r[5]);
        if (layer && open && onUnselect && holds(r[4])) onUnselect(); // else it would open again
        else draw();
      };
      const td = h("td", { colspan: 3, text: open ? r[6] : r[3], onclick: toggle });
      body.appendChild(h("tr", { class: layer ? "tv-fold tv-layer-fold" : "tv-fold", "data-fold": layer ? r[5] : null }, td));
      if (open) emit(r[4], `${path}${i}/`);
    });
  const opening = (rows, path) =>
    rows.forEach((r, i) => {
      if (!folded(r) || !holds(r[4])) return;
      if (r[0] === "layer") opened.add(r[5]);
      else runs.add(path + i);
      opening(r[4], `${path}${i}/`);
    });
  opening(diff.rows, ""); // a jump into a fold opens it (once: closing it again is the user's)
  draw();
  return table;
}

function countsLine(diff) {
  return h("div", { class: "tv-summary", text: diff.summary });
}
