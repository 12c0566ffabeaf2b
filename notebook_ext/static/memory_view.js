// thundervis notebook widget: the Memory tab of the recording widget (issue 38). The payload's
// `memory` (notebook_ext/memory_plot.memory_tab) holds present.memory's peak line and matplotlib's
// SVG of the step's timeline (live bytes over the step, forward then backward, the peak marked), or,
// for a recording made before the ledger, present's "not recorded" sentence. The SVG is shown as an
// <img> with a data: URL, never as markup: an image runs no script and its text is not ours to
// insert. Every string reaches the page through h(), so visible() applies.

function hasMemoryTab(mem) {
  return !!(mem && typeof mem === "object");
}

// A base64 data: URL of an SVG text (UTF-8 bytes first: btoa takes only Latin-1).
function svgDataUrl(svg) {
  const bytes = new TextEncoder().encode(String(svg));
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return "data:image/svg+xml;base64," + btoa(bin);
}

function memoryTab(mem) {
  const frag = h("div", { class: "tv-memtab" });
  if (!mem.recorded) {
    frag.appendChild(h("div", { class: "tv-muted tv-mem-message", text: mem.message || "" }));
    return frag;
  }
  frag.appendChild(h("div", { class: "tv-summary tv-mem-peak", text: mem.peak_line || "" }));
  if (mem.message) frag.appendChild(h("div", { class: "tv-muted tv-mem-message", text: mem.message }));
  if (typeof mem.svg === "string" && mem.svg) {
    frag.appendChild(h("img", { class: "tv-mem-plot", src: svgDataUrl(mem.svg),
      alt: "live bytes over the step, forward then backward, the peak marked" }));
  } else {
    frag.appendChild(h("div", { class: "tv-muted tv-mem-noplot",
      text: "no timeline plot: no final trace has a timeline, or matplotlib (the 'plot' extra) is not installed" }));
  }
  return frag;
}
