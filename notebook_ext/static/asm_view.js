// thundervis notebook widget, the asm panel of a kernel (loaded after recording_view.js): its machine code per GPU
// target and stage (TTIR, TTGIR, LLVM IR, PTX, SASS) beside the compiled Triton source. Clicking a
// Triton line highlights the instructions generated for it (and, lighter, for its symbol); clicking
// an instruction shows its symbol, op and user source line and marks its Triton line. Rows come
// from notebook_ext/asm_data.py (thundervis.present.asm); every recorded string is set through
// visible() (h(..., {text}) or setText), never as markup.

const ASM_STAGE_NAMES = { ttir: "TTIR", ttgir: "TTGIR", llir: "LLVM IR", ptx: "PTX", sass: "SASS" };

function asmPanel(ask, graph, chain, kernel, targets) {
  const box = h("div", { class: "tv-asm", "data-kernel": kernel });
  const state = { target: (targets || [])[0] || null, stage: "sass", line: 0, data: null };
  const bar = h("div", { class: "tv-asm-bar" });
  const src = h("div", { class: "tv-asm-src" });
  const code = h("div", { class: "tv-asm-code" });
  const info = h("div", { class: "tv-asm-info tv-muted", text: "loading the machine code…" });
  box.append(h("div", { class: "tv-k", text: "machine code" }), bar, h("div", { class: "tv-asm-panes" }, src, code), info);

  const symbolOf = (line) => (state.data && state.data.line_uids[String(line)]) || null;
  let symbolSel = null;

  // the kernel's symbols that became instructions, by their first Triton line
  function symbolLines(d) {
    const firsts = new Map();
    const lines = Object.keys(d.line_uids).map(Number).sort((a, b) => a - b);
    for (const l of lines) {
      const uid = d.line_uids[String(l)];
      if (!firsts.has(uid) && d.rows.some((r) => r[2] === uid)) firsts.set(uid, l);
    }
    return Array.from(firsts.entries()).sort((a, b) => a[1] - b[1]);
  }

  function selectLine(line) {
    const d = state.data;
    state.line = line;
    const uid = symbolOf(line);
    let first = null;
    let n = 0;
    let nSym = 0;
    for (const el of Array.from(code.children)) {
      const row = d.rows[Number(el.dataset.index)];
      const hit = row[1] === line && line > 0;
      const sym = !hit && uid !== null && row[2] === uid;
      el.classList.toggle("tv-asm-hl", hit);
      el.classList.toggle("tv-asm-sym", sym);
      if (hit) n += 1;
      if (hit || (uid !== null && row[2] === uid)) nSym += 1;
      if (hit && first === null) first = el;
    }
    for (const el of Array.from(src.children)) {
      const l = Number(el.dataset.line);
      el.classList.toggle("tv-asm-hl", l === line);
      el.classList.toggle("tv-asm-sym", l !== line && uid !== null && symbolOf(l) === uid);
    }
    if (first && first.scrollIntoView) first.scrollIntoView({ block: "nearest" });
    if (symbolSel) symbolSel.value = uid || "";
    const m = uid ? d.members[uid] || {} : {};
    info.className = "tv-asm-info";
    setText(info, `triton line ${line}: ${n} ${ASM_STAGE_NAMES[d.stage]} lines` +
      (uid ? ` · symbol ${uid} ${m.sym || ""} (${nSym} lines)${m.where ? " · " + m.where : ""}` : " · no symbol"));
  }

  function selectRow(i) {
    const d = state.data;
    const [, tline, uid, sym, where] = d.rows[i];
    for (const el of Array.from(code.children)) el.classList.toggle("tv-asm-picked", Number(el.dataset.index) === i);
    if (tline) {
      for (const el of Array.from(src.children)) el.classList.toggle("tv-asm-hl", Number(el.dataset.line) === tline);
    }
    info.className = "tv-asm-info";
    setText(info, `${ASM_STAGE_NAMES[d.stage]} line ${i + 1}: ` +
      (uid ? `symbol ${uid} ${sym || ""}${where ? " · " + where : ""}` : "no symbol (prologue, epilogue or Triton library code)") +
      (tline ? ` · triton line ${tline}` : ""));
  }

  function drawBar(d) {
    clear(bar);
    if ((d.targets || []).length > 1) {
      const sel = h("select", { class: "tv-asm-target", "aria-label": "target" });
      for (const t of d.targets) sel.appendChild(h("option", { value: t, text: t }));
      sel.value = d.target;
      sel.addEventListener("change", () => { state.target = sel.value; load(); });
      bar.appendChild(sel);
    } else {
      bar.appendChild(h("span", { class: "tv-asm-target", text: d.target }));
    }
    for (const s of d.stages) {
      const b = h("button", { class: "tv-asm-stage" + (s === state.stage ? " tv-active" : ""), "data-stage": s, text: ASM_STAGE_NAMES[s] || s });
      b.addEventListener("click", () => { state.stage = s; load(); });
      bar.appendChild(b);
    }
    symbolSel = h("select", { class: "tv-asm-symbol", "aria-label": "symbol" }, h("option", { value: "", text: "symbol…" }));
    for (const [uid, line] of symbolLines(d)) {
      const m = d.members[uid] || {};
      symbolSel.appendChild(h("option", { value: uid, "data-line": line, text: [uid, m.sym, m.where].filter((x) => x).join(" ") }));
    }
    symbolSel.addEventListener("change", () => {
      const opt = symbolSel.selectedOptions[0];
      if (opt && opt.dataset.line) selectLine(Number(opt.dataset.line));
    });
    bar.appendChild(symbolSel);
    const r = d.build || {};
    bar.appendChild(h("span", { class: "tv-muted", text: ` ${r.summary_text}` }));
  }

  function draw(d) {
    state.data = d;
    state.target = d.target;
    drawBar(d);
    clear(src);
    clear(code);
    d.source.forEach((t, i) => {
      const el = h("div", { class: "tv-asm-line", "data-line": i + 1 }, h("span", { class: "tv-lno", text: `${String(i + 1).padStart(4)} ` }), h("span", { text: t }));
      el.addEventListener("click", () => selectLine(i + 1));
      src.appendChild(el);
    });
    d.rows.forEach((row, i) => {
      const note = [row[2], row[4]].filter((x) => x).join(" ");
      const el = h("div", { class: "tv-asm-row", "data-index": i }, h("span", { text: row[0] }), note ? h("span", { class: "tv-muted", text: `   # ${note}` }) : null);
      el.addEventListener("click", () => selectRow(i));
      code.appendChild(el);
    });
    if (d.truncated) code.appendChild(h("div", { class: "tv-muted", text: `… ${d.truncated} more lines (thundervis asm prints them all)` }));
    const mapped = d.rows.filter((r) => r[1] && r[2]).map((r) => r[1]);
    selectLine(state.line || (mapped.length ? Math.min(...mapped) : 1));
  }

  function load() {
    info.className = "tv-asm-info tv-muted";
    setText(info, "loading the machine code…");
    ask({ what: "asm", graph, chain, kernel, target: state.target, stage: state.stage }).then((r) => {
      if (!r.ok) {
        clear(src);
        clear(code);
        for (const b of Array.from(bar.querySelectorAll(".tv-asm-stage"))) b.classList.toggle("tv-active", b.dataset.stage === state.stage);
        info.className = "tv-asm-info tv-asm-error";
        setText(info, r.error);
        return;
      }
      draw(r.data);
    });
  }

  load();
  return box;
}
