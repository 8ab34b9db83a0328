// The tickscope HTML report: plain JavaScript, no dependency, no request of any kind.
// Reads the JSON block #ts-meta and the base64 block #ts-blob (see src/export/html/mod.rs).
(function () {
  'use strict';
  const api = (window.tickscope = { ready: false, errors: [], timeline: { drawn: {} } });
  window.addEventListener('error', (e) => api.errors.push(String(e.message)));

  // ---------- formatting (as the text table writes numbers) ----------
  // Rust's `{:.N}`: the exact decimal value of the double rounded to N places, ties to even.
  // (`toFixed` rounds ties up, and `x * 10^N` is itself rounded, so neither alone agrees.)
  // `toPrecision(100)` writes the double's exact expansion for the magnitudes shown here.
  function fixed(x, d) {
    if (!Number.isFinite(x)) return String(x);
    const neg = x < 0;
    const exact = Math.abs(x).toPrecision(100);
    if (exact.includes('e')) return x.toFixed(d);
    const [ip, fp0 = ''] = exact.split('.');
    const fp = fp0.padEnd(d + 1, '0');
    const keep = ip + fp.slice(0, d);
    const rest = fp.slice(d);
    const last = Number(keep[keep.length - 1]);
    const up = rest[0] > '5' || (rest[0] === '5' && (/[1-9]/.test(rest.slice(1)) || last % 2 === 1));
    const n = (BigInt(keep) + (up ? 1n : 0n)).toString().padStart(d + 1, '0');
    const out = d > 0 ? n.slice(0, n.length - d) + '.' + n.slice(n.length - d) : n;
    return (neg && /[1-9]/.test(out) ? '-' : '') + out;
  }
  function fmtNs(ns) {
    const neg = ns < 0;
    const a = Math.round(Math.abs(ns));
    let s;
    if (a < 1e3) s = a + ' ns';
    else if (a < 1e6) s = fixed(a / 1e3, 2) + ' µs';
    else if (a < 1e9) s = fixed(a / 1e6, 2) + ' ms';
    else s = fixed(a / 1e9, 3) + ' s';
    return (neg ? '-' : '') + s;
  }
  function fmtBytes(b) {
    if (b < 1024) return b + ' B';
    if (b < 1048576) return fixed(b / 1024, 2) + ' KiB';
    if (b < 1073741824) return fixed(b / 1048576, 2) + ' MiB';
    return fixed(b / 1073741824, 2) + ' GiB';
  }
  const fmtPct = (p) => fixed(p, 1) + ' %';
  const fmtCount = (n) => String(n);
  function fmtNum(v) {
    if (Number.isInteger(v)) return String(v);
    return fixed(v, 3).replace(/\.?0+$/, '');
  }
  function fmtRel(r) {
    if (r === null || r === undefined || !isFinite(r)) return '–';
    return (r >= 0 ? '+' : '') + fixed(r * 100, 1) + ' %';
  }

  // ---------- DOM helpers: text only through textContent ----------
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        const v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.appendChild(typeof kid === 'string' ? document.createTextNode(kid) : kid);
    }
    return e;
  }
  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function hashHue(s) {
    let x = 2166136261;
    const n = Math.min(s.length, 256);
    for (let i = 0; i < n; i++) x = Math.imul(x ^ s.charCodeAt(i), 16777619);
    return (x >>> 0) % 360;
  }
  const PALETTE = 24;
  function colorIndex(name) { return Math.floor(hashHue(name) / (360 / PALETTE)); }
  function paletteColor(i, alpha) {
    const dark = matchMedia('(prefers-color-scheme: dark)').matches;
    return 'hsla(' + Math.round(i * (360 / PALETTE)) + ',' + (dark ? '45%,45%,' : '60%,72%,') + alpha + ')';
  }
  function clip(s, px, charPx) {
    const n = Math.floor((px - 6) / charPx);
    if (n <= 0) return '';
    if (s.length <= n) return s;
    return n <= 1 ? '…' : s.slice(0, n - 1) + '…';
  }
  function setupCanvas(canvas, w, hgt) {
    const r = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.floor(w * r));
    canvas.height = Math.max(1, Math.floor(hgt * r));
    canvas.style.width = w + 'px';
    canvas.style.height = hgt + 'px';
    const ctx = canvas.getContext('2d');
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return ctx;
  }
  const tip = h('div', { class: 'tip', role: 'tooltip' });
  function showTip(ev, lines) {
    tip.replaceChildren();
    lines.forEach((l, i) => tip.appendChild(h(i === 0 ? 'b' : 'div', { text: l })));
    tip.style.display = 'block';
    const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    const y = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 4);
    tip.style.left = Math.max(0, x) + 'px';
    tip.style.top = Math.max(0, y) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }

  // ---------- data ----------
  const meta = JSON.parse(document.getElementById('ts-meta').textContent);
  api.meta = meta;
  const names = meta.names;

  function base64Bytes(text) {
    const map = new Int16Array(128).fill(-1);
    const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    for (let i = 0; i < 64; i++) map[abc.charCodeAt(i)] = i;
    const out = new Uint8Array(Math.floor((text.length * 3) / 4) + 3);
    let n = 0, acc = 0, bits = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      const v = c < 128 ? map[c] : -1;
      if (v < 0) continue;
      acc = ((acc << 6) | v) & 0xffffff;
      bits += 6;
      if (bits >= 8) { bits -= 8; out[n++] = (acc >> bits) & 0xff; }
    }
    return out.subarray(0, n);
  }
  async function blobBytes() {
    const bytes = base64Bytes(document.getElementById('ts-blob').textContent);
    if (!meta.blob.gzip) return bytes;
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  // The four varint columns: name, parent distance, gap (zigzag), duration.
  function decodeSpans(bytes) {
    let pos = 0;
    function v() {
      let x = 0, mul = 1, b;
      do { b = bytes[pos++]; x += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
      return x;
    }
    for (let i = 0; i < 4; i++) v();
    // Of a level of detail (meta.lod), a thread's blob holds `shown` of its `spans`.
    const threads = meta.threads.map((t) => ({ info: t, n: t.shown === undefined ? t.spans : t.shown }));
    for (const t of threads) t.name = new Uint32Array(t.n);
    for (const t of threads) for (let i = 0; i < t.n; i++) t.name[i] = v();
    for (const t of threads) t.parent = new Int32Array(t.n);
    for (const t of threads) for (let i = 0; i < t.n; i++) { const d = v(); t.parent[i] = d ? i - d : -1; }
    for (const t of threads) t.start = new Float64Array(t.n);
    const gaps = threads.map((t) => { const g = new Float64Array(t.n); for (let i = 0; i < t.n; i++) { const z = v(); g[i] = z % 2 ? -(z + 1) / 2 : z / 2; } return g; });
    for (const t of threads) t.dur = new Float64Array(t.n);
    for (const t of threads) for (let i = 0; i < t.n; i++) t.dur[i] = v();
    threads.forEach((t, ti) => {
      const g = gaps[ti];
      const lastChildEnd = new Float64Array(t.n).fill(NaN);
      let rootEnd = 0;
      t.depth = new Uint16Array(t.n);
      let maxDepth = -1;
      for (let i = 0; i < t.n; i++) {
        const p = t.parent[i];
        const ref = p >= 0 ? (isNaN(lastChildEnd[p]) ? t.start[p] : lastChildEnd[p]) : rootEnd;
        t.start[i] = ref + g[i];
        const end = t.start[i] + t.dur[i];
        if (p >= 0) { lastChildEnd[p] = end; t.depth[i] = Math.min(t.depth[p] + 1, 65535); } else rootEnd = end;
        if (t.depth[i] > maxDepth) maxDepth = t.depth[i];
      }
      t.maxDepth = maxDepth;
      // Spans of one depth never overlap: index them by depth, in order of start.
      const counts = new Int32Array(maxDepth + 1);
      for (let i = 0; i < t.n; i++) counts[t.depth[i]]++;
      t.byDepth = [];
      for (let d = 0; d <= maxDepth; d++) t.byDepth.push(new Int32Array(counts[d]));
      counts.fill(0);
      for (let i = 0; i < t.n; i++) { const d = t.depth[i]; t.byDepth[d][counts[d]++] = i; }
    });
    return threads;
  }

  // Pre-aggregated levels of one depth of one thread: covered fraction and the name covering
  // most of each bin, for bins of base width `bin` ns halved level by level.
  function buildLevels(t, idx, wall) {
    const n = idx.length;
    let bins = 64;
    while (bins < n / 4 && bins < (1 << 17)) bins *= 2;
    const bin = Math.max(1, wall / bins);
    const cover = new Float32Array(bins), best = new Float32Array(bins), name = new Int32Array(bins).fill(-1);
    for (let k = 0; k < n; k++) {
      const i = idx[k];
      const s = Math.max(0, t.start[i]) / bin, e = Math.min(wall, t.start[i] + t.dur[i]) / bin;
      if (e <= s) continue;
      let b = Math.floor(s);
      const last = Math.min(bins - 1, Math.floor(e));
      for (; b <= last; b++) {
        const c = Math.min(e, b + 1) - Math.max(s, b);
        if (c <= 0) continue;
        cover[b] += c;
        if (c > best[b]) { best[b] = c; name[b] = t.name[i]; }
      }
    }
    const levels = [{ bin, cover, name, best }];
    while (levels[levels.length - 1].cover.length > 1) {
      const prev = levels[levels.length - 1];
      const m = prev.cover.length >> 1;
      const c = new Float32Array(m), nm = new Int32Array(m), bs = new Float32Array(m);
      for (let b = 0; b < m; b++) {
        const a = 2 * b, z = 2 * b + 1;
        c[b] = (prev.cover[a] + prev.cover[z]) / 2;
        const pick = prev.best[a] >= prev.best[z] ? a : z;
        nm[b] = prev.name[pick];
        bs[b] = Math.max(prev.best[a], prev.best[z]) / 2;
      }
      levels.push({ bin: prev.bin * 2, cover: c, name: nm, best: bs });
    }
    return levels;
  }

  // ---------- call trees ----------
  function buildTree(tree) {
    const nodes = tree.name.map((nm, i) => ({
      name: names[nm] + (tree.poll[i] ? ' (poll)' : ''), calls: tree.calls[i], total: tree.total_ns[i], self: tree.self_ns[i],
      thread: tree.thread[i], children: [], parent: null,
    }));
    const roots = [];
    tree.parent.forEach((p, i) => {
      if (p >= 0) { nodes[i].parent = nodes[p]; nodes[p].children.push(nodes[i]); } else roots.push(nodes[i]);
    });
    return roots;
  }
  // The roots of one thread (`thread` >= 0), or of every thread merged by path.
  function mergedRoots(roots, thread) {
    const pick = thread >= 0 ? roots.filter((r) => r.thread === thread) : roots;
    function merge(list, parent) {
      const by = new Map();
      for (const n of list) {
        let m = by.get(n.name);
        if (!m) { m = { name: n.name, calls: 0, total: 0, self: 0, kids: [], parent }; by.set(n.name, m); }
        m.calls += n.calls; m.total += n.total; m.self += n.self;
        for (const c of n.children) m.kids.push(c);
      }
      const out = [...by.values()];
      for (const m of out) { m.children = merge(m.kids, m); delete m.kids; }
      out.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      return out;
    }
    const top = merge(pick, null);
    const root = { name: thread >= 0 ? meta.threads[thread].name : 'all threads', calls: 0, self: 0, parent: null, children: top, root: true };
    root.total = top.reduce((s, c) => s + c.total, 0);
    for (const c of top) c.parent = root;
    return root;
  }
  const newRoots = buildTree(meta.tree);
  const baseRoots = meta.base ? buildTree(meta.base.tree) : null;

  // ---------- app shell ----------
  const VIEWS = [
    ['summary', 'Summary'], ['tree', 'Call tree'], ['flame', 'Flame graph'], ['timeline', 'Timeline'],
  ];
  if (meta.table.alloc_bytes || meta.memory) VIEWS.push(['memory', 'Memory']);
  VIEWS.push(['session', 'Session']);
  if (meta.diff) VIEWS.push(['diff', 'Diff']);
  api.views = VIEWS.map((v) => v[0]);

  const app = document.getElementById('app');
  const nav = h('nav', { role: 'tablist', 'aria-label': 'Views' });
  const main = h('main', { id: 'view', role: 'tabpanel', tabindex: '-1' });
  const s = meta.session;
  const info = h('span', { class: 'info', text:
    fmtNs(meta.covered_ns) + ' wall · ' + meta.processes.length + ' process' + (meta.processes.length === 1 ? '' : 'es') +
    ' · ' + s.thread_count + ' thread' + (s.thread_count === 1 ? '' : 's') + ' · ' + s.scopes + ' scopes · ' +
    s.dropped_events + ' dropped events' });
  const buttons = {};
  for (const [id, label] of VIEWS) {
    buttons[id] = h('button', { role: 'tab', id: 'tab-' + id, 'aria-selected': 'false', 'aria-controls': 'view',
      onclick: () => { location.hash = id; } , text: label });
    nav.appendChild(buttons[id]);
  }
  nav.addEventListener('keydown', (e) => {
    const ids = VIEWS.map((v) => v[0]);
    const at = ids.indexOf(current);
    if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
      const next = ids[(at + (e.key === 'ArrowRight' ? 1 : ids.length - 1)) % ids.length];
      location.hash = next;
      buttons[next].focus();
      e.preventDefault();
    }
  });
  let current = null;
  let threads = null; // decoded spans
  let cleanup = null;

  function route() {
    let id = (location.hash || '').replace(/^#/, '').split('&')[0];
    if (!buttons[id]) id = 'summary';
    if (id === current && main.childNodes.length) return;
    current = id;
    for (const k in buttons) {
      buttons[k].setAttribute('aria-selected', String(k === id));
      buttons[k].tabIndex = k === id ? 0 : -1;
    }
    if (cleanup) { cleanup(); cleanup = null; }
    hideTip();
    main.replaceChildren();
    const view = { summary: viewSummary, tree: viewTree, flame: viewFlame, timeline: viewTimeline,
      memory: viewMemory, session: viewSession, diff: viewDiff }[id];
    try { cleanup = view(main) || null; } catch (err) { api.errors.push(String(err && err.stack || err)); main.appendChild(h('p', { class: 'error', text: 'This view failed: ' + err })); }
    api.view = id;
  }

  // ---------- Summary ----------
  const COLS = [
    ['name', 'Name', null], ['thread', 'Thread', null], ['calls', 'Calls', fmtCount], ['total_ns', 'Total', fmtNs],
    ['total_percent', 'Total %', fmtPct], ['self_ns', 'Self', fmtNs], ['self_percent', 'Self %', fmtPct],
    ['busy_ns', 'Busy', (v) => (v === null ? '' : fmtNs(v))],
    ['busy_percent', 'Busy %', (v) => (v === null ? '' : fmtPct(v))],
    ['avg_ns', 'Avg', fmtNs], ['min_ns', 'Min', fmtNs], ['max_ns', 'Max', fmtNs], ['p50_ns', 'P50', fmtNs],
    ['p99_ns', 'P99', fmtNs], ['alloc_bytes', 'Alloc', fmtBytes],
    ['self_alloc_bytes', 'Self alloc', fmtBytes], ['allocs', 'Allocs', fmtCount], ['freed_bytes', 'Freed', fmtBytes],
    ['peak_bytes', 'Peak', fmtBytes],
  ];
  const summaryState = { sort: 'total_ns', desc: true, filter: '', byThread: false, selected: null };
  const MAX_ROWS = 3000;
  function tableRows(table) {
    const rows = [];
    // Of a level of detail, each row's histogram over every call, counted when written.
    const hists = !meta.hist ? null : table === meta.table ? meta.hist.table : table === meta.by_thread ? meta.hist.by_thread : null;
    for (let i = 0; i < table.rows; i++) {
      const r = { name: names[table.name[i]], threadIndex: table.thread[i] };
      if (hists) r.hist = hists[i];
      r.thread = r.threadIndex >= 0 ? meta.threads[r.threadIndex].name : '';
      for (const [k] of COLS) if (k !== 'name' && k !== 'thread' && table[k]) r[k] = table[k][i];
      if (r.open_at_stop > 0) r.open = true;
      rows.push(r);
    }
    return rows;
  }
  const cmpName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  function sortRows(rows, key, desc) {
    rows.sort((a, b) => {
      let c;
      if (key === 'name' || key === 'thread') c = cmpName(a[key], b[key]);
      else c = (a[key] === null ? -1 : a[key]) - (b[key] === null ? -1 : b[key]);
      if (desc) c = -c;
      return c || cmpName(a.thread, b.thread) || cmpName(a.name, b.name);
    });
  }
  function viewSummary(root) {
    const st = summaryState;
    const filter = h('input', { type: 'search', placeholder: 'Filter by name', 'aria-label': 'Filter by name', value: st.filter });
    const split = h('input', { type: 'checkbox', id: 'split' });
    split.checked = st.byThread;
    const table = h('table', { class: 'grid', id: 'summary' });
    const note = h('p', { class: 'note' });
    const hist = h('div', { class: 'hist', hidden: true });
    root.append(h('div', { class: 'controls' }, filter, h('label', null, split, ' per thread'),
      h('span', { class: 'legend', text: 'Times per call in the unit shown. Total % and Self %: shares of the time in scopes, all threads (every row\'s Self added up; async calls count their Busy time); Busy %: of the row\'s Total. Click a row for its call durations.' })),
    h('div', { class: 'scroll' }, table), note, hist);
    function render() {
      const src = st.byThread ? meta.by_thread : meta.table;
      let rows = tableRows(src);
      const f = st.filter.toLowerCase();
      if (f) rows = rows.filter((r) => r.name.toLowerCase().includes(f));
      sortRows(rows, st.sort, st.desc);
      const cols = COLS.filter(([k]) => (k === 'thread' ? st.byThread : k === 'name' || !!src[k]));
      const head = h('tr');
      for (const [k, label] of cols) {
        const active = st.sort === k;
        const b = h('button', { text: label + (active ? (st.desc ? ' ▼' : ' ▲') : ''), 'data-key': k,
          onclick: () => { if (st.sort === k) st.desc = !st.desc; else { st.sort = k; st.desc = !(k === 'name' || k === 'thread'); } render(); } });
        head.appendChild(h('th', { class: k === 'name' || k === 'thread' ? 'name' : null, scope: 'col',
          'aria-sort': active ? (st.desc ? 'descending' : 'ascending') : 'none' }, b));
      }
      const body = h('tbody');
      rows.slice(0, MAX_ROWS).forEach((r) => {
        const tr = h('tr', { tabindex: '0', 'aria-selected': String(st.selected === r.name + '\u0000' + r.threadIndex) });
        for (const [k, , fmt] of cols) {
          const v = r[k];
          let text = fmt ? fmt(v) : v;
          if (k === 'name' && r.open) text += ' *';
          tr.appendChild(h('td', { class: k === 'name' || k === 'thread' ? 'name' : null, 'data-key': k,
            'data-value': typeof v === 'number' ? String(v) : null, title: k === 'name' && v.length > 60 ? v.slice(0, 2000) : null, text }));
        }
        const pick = () => { st.selected = r.name + '\u0000' + r.threadIndex; for (const x of body.children) x.setAttribute('aria-selected', String(x === tr)); histogram(hist, r); };
        tr.addEventListener('click', pick);
        tr.addEventListener('keydown', (e) => {
          if (e.key === 'Enter' || e.key === ' ') { pick(); e.preventDefault(); }
          else if (e.key === 'ArrowDown' && tr.nextSibling) { tr.nextSibling.focus(); e.preventDefault(); }
          else if (e.key === 'ArrowUp' && tr.previousSibling) { tr.previousSibling.focus(); e.preventDefault(); }
        });
        body.appendChild(tr);
      });
      table.replaceChildren(h('thead', null, head), body);
      note.textContent = rows.length > MAX_ROWS ? 'The first ' + MAX_ROWS + ' of ' + rows.length + ' rows are shown: filter by name to see the others.'
        : rows.length + ' row' + (rows.length === 1 ? '' : 's') + (rows.some((r) => r.open) ? ' · * calls still open at stop' : '');
    }
    filter.addEventListener('input', () => { st.filter = filter.value; render(); });
    split.addEventListener('change', () => { st.byThread = split.checked; if (!st.byThread && st.sort === 'thread') st.sort = 'total_ns'; render(); });
    render();
  }
  api.sortSummary = (key, desc) => { summaryState.sort = key; summaryState.desc = desc; if (current === 'summary') { main.replaceChildren(); viewSummary(main); } };

  function durationsOf(name, threadIndex) {
    const id = names.indexOf(name);
    const out = [];
    const A = meta.async;
    for (let i = 0; i < A.name.length; i++) if (A.name[i] === id) out.push(A.end[i] - A.start[i]);
    if (out.length) return out;
    if (!threads) return out;
    threads.forEach((t, ti) => {
      if (threadIndex >= 0 && ti !== threadIndex) return;
      for (let i = 0; i < t.n; i++) if (t.name[i] === id) out.push(t.dur[i]);
    });
    return out;
  }
  function histogram(box, row) {
    box.hidden = false;
    const d = row.hist ? [] : durationsOf(row.name, row.threadIndex);
    box.replaceChildren(h('h2', { text: 'Call durations of ' + (row.name.length > 200 ? row.name.slice(0, 200) + '…' : row.name) + (row.thread ? ' on ' + row.thread : '') }));
    const n = row.hist ? row.hist.reduce((a, c) => a + c, 0) : d.length;
    if (!n) { box.appendChild(h('p', { class: 'note', text: 'No call durations in this report.' })); return; }
    let min = Infinity, max = -Infinity;
    if (row.hist) { min = row.min_ns; max = row.max_ns; }
    for (const x of d) { if (x < min) min = x; if (x > max) max = x; }
    // The bins the report's writer uses for a level of detail's histograms (src/export/html/hist.rs).
    const log = max > 0 && min > 0 && max / min > 50;
    const B = 40;
    const lo = log ? Math.log(min) : min, hi = log ? Math.log(max) : max;
    const w = (hi - lo) / B || 1;
    const counts = row.hist ? row.hist.slice() : new Array(B).fill(0);
    for (const x of d) counts[Math.min(B - 1, Math.max(0, Math.floor(((log ? Math.log(x) : x) - lo) / w)))]++;
    const edge = (b) => (log ? Math.exp(lo + b * w) : lo + b * w);
    const W = Math.min(900, box.clientWidth - 20 || 800), H = 180;
    const canvas = h('canvas', { role: 'img', 'aria-label': 'Histogram of ' + n + ' call durations, ' + fmtNs(min) + ' to ' + fmtNs(max) });
    box.appendChild(canvas);
    const ctx = setupCanvas(canvas, W, H);
    const peak = Math.max(...counts);
    const fg = css('--fg'), acc = css('--accent');
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = acc;
    const pw = (W - 60) / B;
    counts.forEach((c, b) => { const bh = (c / peak) * (H - 40); ctx.fillRect(50 + b * pw, H - 22 - bh, Math.max(1, pw - 1), bh); });
    ctx.fillStyle = fg;
    ctx.fillText(peak + ' calls', 2, 12);
    ctx.fillText('0', 30, H - 22);
    for (let b = 0; b <= B; b += 10) ctx.fillText(fmtNs(edge(b)), 40 + b * pw, H - 6);
    box.appendChild(h('p', { class: 'note', text: n + ' calls · ' + (log ? 'logarithmic' : 'linear') + ' bins from ' + fmtNs(min) + ' to ' + fmtNs(max) }));
  }

  // ---------- thread selector shared by the call tree and the flame graph ----------
  let treeThread = -1;
  function threadSelect(onchange) {
    const sel = h('select', { 'aria-label': 'Thread' }, h('option', { value: '-1', text: 'All threads (merged)' }));
    meta.threads.forEach((t, i) => sel.appendChild(h('option', { value: String(i), text: t.name + (meta.processes.length > 1 ? ' (' + meta.processes[t.process].label + ')' : '') })));
    sel.value = String(treeThread);
    sel.addEventListener('change', () => { treeThread = Number(sel.value); onchange(); });
    return sel;
  }

  // ---------- Call tree ----------
  function viewTree(root) {
    const box = h('div', { class: 'tree', role: 'tree', 'aria-label': 'Call tree' });
    const expanded = new Set();
    let top;
    const sel = threadSelect(() => { reset(); render(); });
    root.append(h('div', { class: 'controls' }, sel, h('span', { class: 'legend', text: 'Arrow keys: move, → expand, ← collapse. Share: of the parent\'s total.' })), box);
    function key(n) { const p = []; for (let x = n; x && !x.root; x = x.parent) p.push(x.name); return p.reverse().join('\u0000'); }
    function reset() {
      top = mergedRoots(newRoots, treeThread);
      expanded.clear();
      for (const c of top.children) { expanded.add(key(c)); }
    }
    let focusKey = null;
    function render() {
      const head = h('div', { class: 'row head', role: 'presentation' }, h('span', { text: 'Name' }), h('span', { text: 'Calls' }),
        h('span', { text: 'Total' }), h('span', { text: 'Self' }), h('span', { text: 'Share' }));
      const rows = [head];
      let count = 0;
      function walk(n, depth) {
        for (const c of n.children) {
          if (++count > 5000) return;
          const k = key(c);
          const open = expanded.has(k);
          const share = n.total > 0 ? (c.total * 100) / n.total : 0;
          const row = h('div', { class: 'row', role: 'treeitem', tabindex: '-1', 'aria-level': String(depth + 1),
            'aria-expanded': c.children.length ? String(open) : null, 'data-key': k },
          h('span', { style: 'padding-left:' + depth * 14 + 'px', title: c.name.length > 60 ? c.name.slice(0, 2000) : null },
            h('span', { class: 'twisty', text: c.children.length ? (open ? '▾' : '▸') : '' }), c.name),
          h('span', { text: fmtCount(c.calls) + ' calls' }), h('span', { text: fmtNs(c.total) }), h('span', { text: fmtNs(c.self) }),
          h('span', null, h('span', { class: 'bar', style: 'width:' + Math.round(share / 4) + 'px' }), fmtPct(share)));
          row.addEventListener('click', () => { focusKey = k; toggle(k, c); });
          rows.push(row);
          if (open) walk(c, depth + 1);
        }
      }
      walk(top, 0);
      box.replaceChildren(...rows);
      const items = rows.slice(1);
      const f = items.find((r) => r.getAttribute('data-key') === focusKey) || items[0];
      if (f) { f.tabIndex = 0; if (focusKey !== null && box.contains(document.activeElement) === false && document.activeElement === document.body) f.focus(); }
      api.treeRoots = () => top.children.map((c) => [c.name, c.calls, c.total]);
    }
    function toggle(k, n) { if (!n.children.length) return; if (expanded.has(k)) expanded.delete(k); else expanded.add(k); render(); focusRow(k); }
    function focusRow(k) { const r = box.querySelector('[data-key="' + CSS.escape(k) + '"]'); if (r) { for (const x of box.querySelectorAll('[tabindex="0"]')) x.tabIndex = -1; r.tabIndex = 0; r.focus(); focusKey = k; } }
    box.addEventListener('keydown', (e) => {
      const items = [...box.querySelectorAll('[role="treeitem"]')];
      const at = items.indexOf(document.activeElement);
      if (at < 0) return;
      const row = items[at];
      const k = row.getAttribute('data-key');
      const exp = row.getAttribute('aria-expanded');
      const level = Number(row.getAttribute('aria-level'));
      let target = null;
      if (e.key === 'ArrowDown') target = items[at + 1];
      else if (e.key === 'ArrowUp') target = items[at - 1];
      else if (e.key === 'Home') target = items[0];
      else if (e.key === 'End') target = items[items.length - 1];
      else if (e.key === 'ArrowRight') { if (exp === 'false') { expanded.add(k); render(); focusRow(k); } else if (exp === 'true') target = items[at + 1]; }
      else if (e.key === 'ArrowLeft') {
        if (exp === 'true') { expanded.delete(k); render(); focusRow(k); }
        else for (let i = at - 1; i >= 0; i--) if (Number(items[i].getAttribute('aria-level')) < level) { target = items[i]; break; }
      } else if (e.key === 'Enter' || e.key === ' ') { if (exp !== null) { if (exp === 'true') expanded.delete(k); else expanded.add(k); render(); focusRow(k); } }
      else return;
      e.preventDefault();
      if (target) focusRow(target.getAttribute('data-key'));
    });
    reset();
    render();
  }
  api.treeRoots = () => mergedRoots(newRoots, -1).children.map((c) => [c.name, c.calls, c.total]);
  // Every node of the merged tree: [path (names joined by U+0000), calls, total ns].
  api.treePaths = () => {
    const out = [];
    (function walk(n, path) { for (const c of n.children) { const p = path.concat(c.name); out.push([p.join('\u0000'), c.calls, c.total]); walk(c, p); } })(mergedRoots(newRoots, -1), []);
    return out;
  };

  // ---------- Flame graph (icicle), also the differential one ----------
  function flameGraph(container, getRoot, opts) {
    const canvas = h('canvas', { tabindex: '0', role: 'img', 'aria-label': opts.label });
    container.appendChild(canvas);
    const ROW = 18;
    let zoom = null, search = '', boxes = [];
    function depthOf(n) { let d = 0; for (const c of n.children) d = Math.max(d, depthOf(c)); return d + 1; }
    function draw() {
      const root = getRoot();
      if (zoom && !isIn(zoom, root)) zoom = null;
      const focus = zoom || root;
      const chain = [];
      for (let x = focus; x; x = x.parent) chain.unshift(x);
      const depth = chain.length - 1 + depthOf(focus);
      const W = Math.max(300, container.clientWidth - 4), H = Math.min(20000, depth * ROW + 4);
      const ctx = setupCanvas(canvas, W, H);
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      boxes = [];
      const fg = css('--fg');
      let matched = 0;
      const q = search.toLowerCase();
      function rect(n, x, y, w, dim) {
        let color = opts.color ? opts.color(n) : paletteColor(colorIndex(n.name), 1);
        const hit = q && n.name.toLowerCase().includes(q);
        if (q && !hit) color = paletteColor(colorIndex(n.name), 0.25);
        if (hit) color = css('--hl');
        ctx.fillStyle = dim ? paletteColor(colorIndex(n.name), 0.5) : color;
        ctx.fillRect(x, y, Math.max(0.5, w - 1), ROW - 1);
        if (w > 24) { ctx.fillStyle = fg; ctx.fillText(clip(n.name, w, 6.2), x + 3, y + ROW / 2); }
        boxes.push([x, y, w, n]);
        return hit;
      }
      chain.forEach((n, d) => rect(n, 0, d * ROW, W, n !== focus));
      // `counted`: an enclosing frame matched, and its time holds this one's.
      function lay(n, x, w, d, counted) {
        if (w < 0.3) return;
        let cx = x;
        for (const c of n.children) {
          const cw = n.total > 0 ? (c.total / n.total) * w : 0;
          if (cw >= 0.3) {
            const hit = rect(c, cx, d * ROW, cw, false);
            if (hit && !counted) matched += c.total;
            lay(c, cx, cw, d + 1, counted || hit);
          }
          cx += cw;
        }
      }
      lay(focus, 0, W, chain.length, false);
      api.flameRoots = () => root.children.map((c) => [c.name, c.calls, c.total]);
      if (opts.onDraw) opts.onDraw({ matched, total: focus.total, search });
    }
    function isIn(n, root) { for (let x = n; x; x = x.parent) if (x === root) return true; return false; }
    function at(ev) {
      const r = canvas.getBoundingClientRect();
      const x = ev.clientX - r.left, y = ev.clientY - r.top;
      for (let i = boxes.length - 1; i >= 0; i--) { const b = boxes[i]; if (x >= b[0] && x < b[0] + b[2] && y >= b[1] && y < b[1] + ROW) return b[3]; }
      return null;
    }
    canvas.addEventListener('mousemove', (ev) => {
      const n = at(ev);
      if (!n) return hideTip();
      const root = getRoot();
      const lines = [n.name, 'total ' + fmtNs(n.total) + (root.total ? ' (' + fmtPct((n.total * 100) / root.total) + ' of all)' : ''),
        'self ' + fmtNs(n.self), n.calls + ' calls'];
      if (opts.tipExtra) lines.push(...opts.tipExtra(n));
      showTip(ev, lines);
    });
    canvas.addEventListener('mouseleave', hideTip);
    canvas.addEventListener('click', (ev) => { const n = at(ev); zoom = n && !n.root ? n : null; api.flameZoom = zoom ? zoom.name : null; draw(); });
    canvas.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' || e.key === 'Backspace') { zoom = zoom && zoom.parent && !zoom.parent.root ? zoom.parent : null; draw(); e.preventDefault(); }
    });
    const onResize = () => draw();
    window.addEventListener('resize', onResize);
    draw();
    return { draw, setSearch: (q) => { search = q; draw(); }, reset: () => { zoom = null; draw(); }, dispose: () => window.removeEventListener('resize', onResize) };
  }
  function viewFlame(root) {
    const q = h('input', { type: 'search', placeholder: 'Search names', 'aria-label': 'Search names' });
    const stat = h('span', { class: 'legend' });
    const sel = threadSelect(() => fg.reset());
    root.append(h('div', { class: 'controls' }, sel, q, stat,
      h('span', { class: 'legend', text: 'Width: total time. Click a frame to zoom, click the top or Esc to zoom out.' })));
    const fg = flameGraph(root, () => mergedRoots(newRoots, treeThread), { label: 'Flame graph of the merged call tree',
      onDraw: (r) => { stat.textContent = r.search ? 'matched ' + fmtNs(r.matched) + ' (' + fmtPct(r.total ? (r.matched * 100) / r.total : 0) + ')' : ''; } });
    q.addEventListener('input', () => fg.setSearch(q.value));
    return fg.dispose;
  }

  // ---------- Timeline ----------
  const ROWH = 16;
  let tlState = null;
  function viewTimeline(root) {
    if (!threads) { root.appendChild(h('p', { text: 'Decoding…' })); return; }
    const wall = Math.max(1, meta.wall_ns);
    const canvas = h('canvas', { tabindex: '0', role: 'img', id: 'timeline',
      'aria-label': 'Timeline of ' + meta.threads.length + ' threads. Keys: W/S or +/- zoom, A/D or ←/→ pan, ↑/↓ scroll, 0 resets.' });
    const status = h('span', { class: 'legend' });
    const reset = h('button', { text: 'Reset zoom', onclick: () => { st.t0 = 0; st.t1 = wall; st.y = 0; draw(); } });
    root.append(h('div', { class: 'controls' }, reset, status,
      h('span', { class: 'legend', text: 'Wheel: zoom · drag: pan · shift+wheel: pan · keys W/S A/D ←/→ ↑/↓' })), canvas);
    const st = tlState || (tlState = { t0: 0, t1: wall, y: 0 });
    const LABEL = 180;
    // Tracks: per process a header, threads (a row per depth), async lanes, counters.
    const tracks = [];
    meta.processes.forEach((p, pi) => {
      tracks.push({ kind: 'process', label: p.label, h: 18, process: pi });
      threads.forEach((t, ti) => { if (t.info.process === pi) tracks.push({ kind: 'thread', label: t.info.name, t, ti, h: (Math.max(0, t.maxDepth) + 1) * ROWH + 6 }); });
      const A = meta.async;
      const lanes = [];
      const laneOf = [];
      const order = [];
      for (let i = 0; i < A.name.length; i++) if (A.process[i] === pi) order.push(i);
      order.sort((a, b) => A.start[a] - A.start[b]);
      for (const i of order) {
        let l = lanes.findIndex((end) => end <= A.start[i]);
        if (l < 0) { l = lanes.length; lanes.push(0); }
        lanes[l] = A.end[i];
        laneOf.push([i, l]);
      }
      if (order.length) tracks.push({ kind: 'async', label: 'async calls', calls: laneOf, h: lanes.length * ROWH + 6, process: pi });
      meta.counters.forEach((c) => { if (c.process === pi) tracks.push({ kind: 'counter', label: names[c.name], c, h: 44 }); });
      const pInst = [];
      for (let i = 0; i < meta.instants.name.length; i++) if (meta.instants.thread[i] < 0 && meta.instants.process[i] === pi) pInst.push(i);
      if (pInst.length) tracks.push({ kind: 'instants', label: 'process instants', list: pInst, h: 18 });
    });
    const threadInstants = new Map();
    for (let i = 0; i < meta.instants.name.length; i++) { const t = meta.instants.thread[i]; if (t >= 0) { if (!threadInstants.has(t)) threadInstants.set(t, []); threadInstants.get(t).push(i); } }
    let y = 0;
    for (const tr of tracks) { tr.y = y; y += tr.h; }
    const totalH = y;
    // Pre-aggregated levels, built once per thread and depth.
    for (const tr of tracks) if (tr.kind === 'thread' && !tr.t.levels) tr.t.levels = tr.t.byDepth.map((idx) => buildLevels(tr.t, idx, wall));
    let W = 800, H = 400, ctx = null;
    function size() {
      W = Math.max(400, root.clientWidth - 4);
      H = Math.max(200, Math.min(totalH + 4, window.innerHeight - canvas.getBoundingClientRect().top - 16));
      ctx = setupCanvas(canvas, W, H);
    }
    const groups = new Map();
    function queue(color, x, y0, w, hh) { let g = groups.get(color); if (!g) { g = []; groups.set(color, g); } g.push(x, y0, w, hh); }
    function flush() {
      // One fill style per colour, then plain rectangles: the fast path of every canvas.
      for (const [color, g] of groups) { ctx.fillStyle = color; for (let i = 0; i < g.length; i += 4) ctx.fillRect(g[i], g[i + 1], g[i + 2], g[i + 3]); }
      groups.clear();
    }
    const colorCache = new Map();
    function nameColor(id, alpha) {
      const k = id * 8 + alpha;
      let c = colorCache.get(k);
      if (!c) { c = paletteColor(colorIndex(names[id] || ''), [0.3, 0.55, 0.8, 1][alpha]); colorCache.set(k, c); }
      return c;
    }
    let hits = [];
    function draw() {
      const t0f = performance.now();
      if (!ctx) size();
      st.y = Math.max(0, Math.min(st.y, Math.max(0, totalH - H + 4)));
      const span = st.t1 - st.t0;
      const px = (W - LABEL) / span; // px per ns
      const X = (t) => LABEL + (t - st.t0) * px;
      ctx.clearRect(0, 0, W, H);
      const fg = css('--fg'), muted = css('--muted'), line = css('--line'), panel = css('--panel');
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      hits = [];
      const labels = [];
      const drawn = {};
      let exact = 0, binned = 0;
      for (const tr of tracks) {
        const top = tr.y - st.y;
        if (top > H || top + tr.h < 0) continue;
        if (tr.kind === 'process') { labels.push([tr.label, top + 9, true]); continue; }
        if (tr.kind === 'thread') {
          const t = tr.t;
          let count = 0;
          for (let d = 0; d <= t.maxDepth; d++) {
            const yy = top + 3 + d * ROWH;
            if (yy > H || yy + ROWH < 0) continue;
            const idx = t.byDepth[d];
            // First span ending after t0 (ends are in order at one depth).
            let lo = 0, hi = idx.length;
            while (lo < hi) { const m = (lo + hi) >> 1; const i = idx[m]; if (t.start[i] + t.dur[i] < st.t0) lo = m + 1; else hi = m; }
            let end = lo, hi2 = idx.length;
            while (end < hi2) { const m = (end + hi2) >> 1; if (t.start[idx[m]] <= st.t1) end = m + 1; else hi2 = m; }
            const visible = end - lo;
            if (visible > (W - LABEL) * 3) {
              const levels = t.levels[d];
              const nsPerPx = 1 / px;
              let L = 0;
              while (L < levels.length - 1 && levels[L].bin < nsPerPx) L++;
              const lv = levels[L];
              const b0 = Math.max(0, Math.floor(st.t0 / lv.bin)), b1 = Math.min(lv.cover.length - 1, Math.ceil(st.t1 / lv.bin));
              for (let b = b0; b <= b1; b++) {
                const c = lv.cover[b];
                if (c <= 0 || lv.name[b] < 0) continue;
                const x = X(b * lv.bin);
                queue(nameColor(lv.name[b], Math.min(3, Math.floor(c * 4))), x, yy, Math.max(1, lv.bin * px), ROWH - 1);
                binned++;
              }
              count += visible;
            } else {
              let runX0 = -1, runX1 = -1, runName = 0;
              for (let k = lo; k < end; k++) {
                const i = idx[k];
                const x0 = X(t.start[i]), x1 = X(t.start[i] + t.dur[i]);
                if (x1 - x0 < 2) {
                  if (runX0 >= 0 && x0 <= runX1 + 1) { runX1 = Math.max(runX1, x1); continue; }
                  if (runX0 >= 0) queue(nameColor(runName, 2), runX0, yy, Math.max(1, runX1 - runX0), ROWH - 1);
                  runX0 = x0; runX1 = x1; runName = t.name[i];
                  continue;
                }
                const cx0 = Math.max(LABEL, x0), cx1 = Math.min(W, x1);
                queue(nameColor(t.name[i], 3), cx0, yy, Math.max(1, cx1 - cx0 - 0.5), ROWH - 1);
                if (cx1 - cx0 > 30) labels.push([clip(names[t.name[i]], cx1 - cx0, 6.2), yy + ROWH / 2, false, cx0 + 3]);
                hits.push([cx0, yy, cx1 - cx0, tr.ti, i]);
                exact++;
              }
              if (runX0 >= 0) queue(nameColor(runName, 2), runX0, yy, Math.max(1, runX1 - runX0), ROWH - 1);
              count += visible;
            }
          }
          const inst = threadInstants.get(tr.ti);
          if (inst) for (const i of inst) { const x = X(meta.instants.t[i]); if (x >= LABEL && x <= W) queue(fg, x - 1, top, 2, 6); }
          drawn[tr.ti] = count;
          labels.push([tr.label, top + 9, false]);
        } else if (tr.kind === 'async') {
          const A = meta.async;
          for (const [i, l] of tr.calls) {
            const x0 = X(A.start[i]), x1 = X(A.end[i]);
            if (x1 < LABEL || x0 > W) continue;
            const yy = top + 3 + l * ROWH;
            const cx0 = Math.max(LABEL, x0), cx1 = Math.min(W, x1);
            queue(nameColor(A.name[i], 2), cx0, yy, Math.max(1, cx1 - cx0), ROWH - 1);
            if (cx1 - cx0 > 30) labels.push([clip(names[A.name[i]], cx1 - cx0, 6.2), yy + ROWH / 2, false, cx0 + 3]);
            hits.push([cx0, yy, cx1 - cx0, -1, i]);
          }
          labels.push([tr.label, top + 9, false]);
        } else if (tr.kind === 'counter') {
          flush();
          const c = tr.c;
          let mn = Infinity, mx = -Infinity;
          for (const v of c.v) { if (v < mn) mn = v; if (v > mx) mx = v; }
          const rng = mx - mn || 1;
          ctx.strokeStyle = css('--accent');
          ctx.beginPath();
          let first = true, prevY = 0;
          for (let k = 0; k < c.t.length; k++) {
            const x = Math.max(LABEL, Math.min(W, X(c.t[k])));
            const yy = top + tr.h - 6 - ((c.v[k] - mn) / rng) * (tr.h - 12);
            if (first) { ctx.moveTo(x, yy); first = false; } else { ctx.lineTo(x, prevY); ctx.lineTo(x, yy); }
            prevY = yy;
          }
          if (!first) ctx.lineTo(W, prevY);
          ctx.stroke();
          labels.push([tr.label + ' (' + fmtNum(mn) + '…' + fmtNum(mx) + ')', top + 9, false]);
        } else if (tr.kind === 'instants') {
          for (const i of tr.list) { const x = X(meta.instants.t[i]); if (x >= LABEL && x <= W) queue(fg, x - 1, top + 3, 2, 12); }
          labels.push([tr.label, top + 9, false]);
        }
        queue(line, 0, top + tr.h - 0.5, W, 0.5);
      }
      flush();
      // Flows between linked scopes, when few enough are in view.
      const F = meta.flows;
      let flows = 0;
      if (F.length && F.length / 4 < 20000) {
        ctx.strokeStyle = muted;
        ctx.beginPath();
        for (let k = 0; k < F.length; k += 4) {
          const a = threads[F[k]], b = threads[F[k + 2]];
          if (!a || !b) continue;
          const ia = F[k + 1], ib = F[k + 3];
          const ta = trackOf(F[k]), tb = trackOf(F[k + 2]);
          if (!ta || !tb) continue;
          const xa = X(a.start[ia] + a.dur[ia]), xb = X(b.start[ib]);
          if ((xa < LABEL && xb < LABEL) || (xa > W && xb > W)) continue;
          const ya = ta.y - st.y + 3 + a.depth[ia] * ROWH + ROWH / 2, yb = tb.y - st.y + 3 + b.depth[ib] * ROWH + ROWH / 2;
          ctx.moveTo(xa, ya); ctx.lineTo(xb, yb);
          flows++;
          ctx.moveTo(xb, yb); ctx.lineTo(xb - 5, yb - 3); ctx.moveTo(xb, yb); ctx.lineTo(xb - 5, yb + 3);
        }
        ctx.stroke();
      }
      // Names of spans, then the track labels over a gutter.
      ctx.fillStyle = fg;
      for (const l of labels) if (l.length === 4) ctx.fillText(l[0], l[3], l[1]);
      ctx.fillStyle = panel;
      ctx.fillRect(0, 0, LABEL, H);
      for (const l of labels) if (l.length === 3) { ctx.fillStyle = l[2] ? fg : muted; ctx.font = (l[2] ? 'bold ' : '') + '11px system-ui, sans-serif'; ctx.fillText(clip(l[0], LABEL - 4, 6.2), 4, l[1]); }
      ctx.font = '11px system-ui, sans-serif';
      // Time axis.
      ctx.fillStyle = muted;
      const step = niceStep(span / 8);
      for (let t = Math.ceil(st.t0 / step) * step; t <= st.t1; t += step) { const x = X(t); ctx.fillRect(x, 0, 1, 4); ctx.fillText(fmtNs(t), x + 2, 8); }
      status.textContent = fmtNs(st.t0) + ' – ' + fmtNs(st.t1) + ' (' + fmtNs(span) + ' in view) · ' + exact + ' scopes drawn exactly, ' + binned + ' pre-aggregated bins';
      api.timeline.drawn = drawn;
      api.timeline.flows = flows;
      api.timeline.lastFrameMs = performance.now() - t0f;
    }
    const trackMap = new Map();
    for (const tr of tracks) if (tr.kind === 'thread') trackMap.set(tr.ti, tr);
    function trackOf(ti) { return trackMap.get(ti); }
    function niceStep(x) { const p = Math.pow(10, Math.floor(Math.log10(Math.max(1, x)))); const m = x / p; return (m < 2 ? 2 : m < 5 ? 5 : 10) * p; }
    let pending = false;
    function redraw() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }
    function zoomAt(x, factor) {
      const f = Math.max(0, Math.min(1, (x - LABEL) / (W - LABEL)));
      const span = st.t1 - st.t0;
      const ns = Math.max(50, Math.min(wall * 1.2, span * factor));
      const at = st.t0 + f * span;
      st.t0 = at - f * ns; st.t1 = st.t0 + ns;
      redraw();
    }
    function pan(dx) { const d = (dx / (W - LABEL)) * (st.t1 - st.t0); st.t0 += d; st.t1 += d; redraw(); }
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = canvas.getBoundingClientRect();
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan((e.shiftKey ? e.deltaY : e.deltaX));
      else zoomAt(e.clientX - r.left, Math.pow(1.0015, e.deltaY));
    }, { passive: false });
    let drag = null;
    canvas.addEventListener('mousedown', (e) => { drag = [e.clientX, e.clientY]; canvas.focus(); });
    const move = (e) => {
      if (drag) { pan(drag[0] - e.clientX); st.y += drag[1] - e.clientY; drag = [e.clientX, e.clientY]; hideTip(); return; }
      if (e.target !== canvas) return;
      const r = canvas.getBoundingClientRect();
      const x = e.clientX - r.left, yy = e.clientY - r.top;
      const hit = hits.find((b) => x >= b[0] && x < b[0] + b[2] && yy >= b[1] && yy < b[1] + ROWH);
      if (!hit) return hideTip();
      if (hit[3] < 0) { const A = meta.async; showTip(e, [names[A.name[hit[4]]], 'async call, ' + fmtNs(A.end[hit[4]] - A.start[hit[4]]) + ' wall', A.polls[hit[4]] + ' polls']); return; }
      const t = threads[hit[3]], i = hit[4];
      showTip(e, [names[t.name[i]], fmtNs(t.dur[i]) + ' from ' + fmtNs(t.start[i]), 'thread ' + t.info.name]);
    };
    const up = () => { drag = null; };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
    canvas.addEventListener('keydown', (e) => {
      const k = e.key;
      if (k === 'w' || k === '+' || k === '=') zoomAt(LABEL + (W - LABEL) / 2, 0.8);
      else if (k === 's' || k === '-') zoomAt(LABEL + (W - LABEL) / 2, 1.25);
      else if (k === 'a' || k === 'ArrowLeft') pan(-(W - LABEL) / 10);
      else if (k === 'd' || k === 'ArrowRight') pan((W - LABEL) / 10);
      else if (k === 'ArrowUp') { st.y -= 40; redraw(); }
      else if (k === 'ArrowDown') { st.y += 40; redraw(); }
      else if (k === '0') { st.t0 = 0; st.t1 = wall; st.y = 0; redraw(); }
      else return;
      e.preventDefault();
    });
    const onResize = () => { ctx = null; draw(); };
    window.addEventListener('resize', onResize);
    size();
    draw();
    api.timeline.view = (t0, t1) => { st.t0 = t0; st.t1 = t1; draw(); };
    api.timeline.draw = draw;
    api.timeline.wall = wall;
    return () => { window.removeEventListener('mousemove', move); window.removeEventListener('mouseup', up); window.removeEventListener('resize', onResize); };
  }

  // ---------- Memory ----------
  function viewMemory(root) {
    const M = meta.memory;
    if (M) {
      const panel = h('div', { class: 'panel' }, h('h2', { text: 'Live bytes over time (' + M.events + ' allocation events; the largest of each stretch)' }));
      root.appendChild(panel);
      const canvas = h('canvas', { role: 'img', 'aria-label': 'Live bytes over time' });
      panel.appendChild(canvas);
      const W = Math.max(400, root.clientWidth - 10), H = 200;
      const ctx = setupCanvas(canvas, W, H);
      const max = Math.max(1, ...M.live);
      ctx.strokeStyle = css('--accent');
      ctx.beginPath();
      const wall = Math.max(1, meta.wall_ns);
      M.t.forEach((t, i) => { const x = 70 + (t / wall) * (W - 80), yy = H - 20 - (M.live[i] / max) * (H - 30); if (i) ctx.lineTo(x, yy); else ctx.moveTo(x, yy); });
      ctx.stroke();
      ctx.fillStyle = css('--fg');
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText(fmtBytes(max), 2, 14);
      ctx.fillText('0 B', 2, H - 20);
      ctx.fillText('0 ns', 70, H - 5);
      ctx.fillText(fmtNs(wall), W - 70, H - 5);
    } else root.appendChild(h('p', { class: 'note', text: 'The session counted memory per scope (no timeline of allocations).' }));
    if (meta.table.alloc_bytes) {
      const rows = tableRows(meta.table);
      sortRows(rows, 'alloc_bytes', true);
      const t = h('table', { class: 'grid' });
      t.appendChild(h('thead', null, h('tr', null, ...['Name', 'Alloc', 'Self alloc', 'Allocs', 'Freed', 'Peak'].map((x, i) => h('th', { class: i ? null : 'name', text: x })))));
      const b = h('tbody');
      for (const r of rows.slice(0, MAX_ROWS)) b.appendChild(h('tr', null, h('td', { class: 'name', text: r.name }), h('td', { text: fmtBytes(r.alloc_bytes) }),
        h('td', { text: fmtBytes(r.self_alloc_bytes) }), h('td', { text: fmtCount(r.allocs) + ' allocs' }), h('td', { text: fmtBytes(r.freed_bytes) }), h('td', { text: fmtBytes(r.peak_bytes) })));
      t.appendChild(b);
      root.append(h('div', { class: 'panel' }, h('h2', { text: 'Allocations per scope' }), t));
    }
  }

  // ---------- Session ----------
  function viewSession(root) {
    const kv = h('dl', { class: 'kv' });
    const add = (k, v) => kv.append(h('dt', { text: k }), h('dd', { text: v }));
    const sv = s.salvage;
    add('Wall time', fmtNs(meta.wall_ns) + (meta.covered_ns !== meta.wall_ns ? ' (data covers ' + fmtNs(meta.covered_ns) + ': flight recorder window)' : ''));
    add('Started', new Date(Number(BigInt(meta.start_unix_ns) / 1000000n)).toISOString() + ' (' + meta.start_unix_ns + ' ns since the Unix epoch)');
    add('Clock source', s.clock || 'not recorded');
    add('Overhead compensation', s.compensation || 'nothing recorded (exact clock or older capture)');
    add('Dropped events', s.dropped_events + ' events');
    add('Overwritten events', s.overwritten_events + ' events (flight recorder)');
    add('Events', s.event_count + ' events, ' + s.scopes + ' scopes, ' + s.async_calls + ' async calls');
    add('Memory tracking', s.memory || 'off');
    add('Salvage', sv.sessions ? sv.sessions + ' session(s) cut short: ' + sv.lost_bytes + ' bytes lost, ' + sv.open_scopes + ' scopes cut open, ' + sv.threads_without_records + ' threads without records' : 'every session whole');
    root.append(h('div', { class: 'panel' }, h('h2', { text: 'Session' }), kv));
    const pt = h('table', { class: 'grid' }, h('thead', null, h('tr', null, h('th', { class: 'name', text: 'Process' }), h('th', { class: 'name', text: 'Host' }), h('th', { text: 'Threads' }), h('th', { text: 'Scopes' }))));
    const pb = h('tbody');
    meta.processes.forEach((p, i) => {
      const ts = meta.threads.filter((t) => t.process === i);
      pb.appendChild(h('tr', null, h('td', { class: 'name', text: p.label }), h('td', { class: 'name', text: p.host || '–' }), h('td', { text: ts.length + ' threads' }), h('td', { text: ts.reduce((a, t) => a + t.spans, 0) + ' scopes' })));
    });
    pt.appendChild(pb);
    const tt = h('table', { class: 'grid' }, h('thead', null, h('tr', null, h('th', { class: 'name', text: 'Thread' }), h('th', { class: 'name', text: 'Process' }), h('th', { text: 'Id' }), h('th', { text: 'Scopes' }))));
    const tb = h('tbody');
    meta.threads.forEach((t) => tb.appendChild(h('tr', null, h('td', { class: 'name', text: t.name }), h('td', { class: 'name', text: meta.processes[t.process].label }), h('td', { text: String(t.id) }), h('td', { text: t.spans + ' scopes' }))));
    tt.appendChild(tb);
    root.append(h('div', { class: 'panel' }, h('h2', { text: 'Processes' }), pt), h('div', { class: 'panel' }, h('h2', { text: 'Threads' }), tt),
      h('div', { class: 'panel' }, h('h2', { text: 'The table\'s footer' }), h('pre', { class: 'footer', text: meta.footer })));
  }

  // ---------- Diff ----------
  function viewDiff(root) {
    const D = meta.diff;
    const base = new Map(tableRows(meta.base.table).map((r) => [r.name, r]));
    const cur = new Map(tableRows(meta.table).map((r) => [r.name, r]));
    const verdict = new Map(D.rows.map((r) => [names[r[0]], r]));
    const all = [...new Set([...cur.keys(), ...base.keys()])];
    const order = ['regressed', 'improved', 'inconclusive', 'unchanged', 'added', 'removed'];
    all.sort((a, b) => {
      const va = verdict.get(a), vb = verdict.get(b);
      return (order.indexOf(va ? va[1] : 'unchanged') - order.indexOf(vb ? vb[1] : 'unchanged')) || cmpName(a, b);
    });
    const counts = {};
    for (const r of D.rows) counts[r[1]] = (counts[r[1]] || 0) + 1;
    root.appendChild(h('p', { class: 'note', text: 'Baseline ' + fmtNs(meta.base.wall_ns) + ' wall → this run ' + fmtNs(meta.wall_ns) + ' wall. ' +
      order.map((o) => (counts[o] || 0) + ' ' + o).join(', ') + '. Verdicts: ' + D.metric + ' times, threshold ' + fixed(D.threshold * 100, 1) + ' % and ' + fmtNs(D.min_change_ns) +
      ', ' + D.judged + ' names judged at ' + fixed(D.row_confidence * 100, 2) + ' % confidence each. Colours: red slower or more, green faster or fewer.' }));
    const METRICS = [['calls', 'Calls', fmtCount], ['total_ns', 'Total', fmtNs], ['avg_ns', 'Avg', fmtNs], ['p50_ns', 'P50', fmtNs], ['p99_ns', 'P99', fmtNs]];
    const head = h('tr', null, h('th', { class: 'name', text: 'Name' }), h('th', { text: 'Verdict' }), h('th', { text: 'Change per call' }));
    for (const [, label] of METRICS) head.append(h('th', { text: label + ' base' }), h('th', { text: label + ' new' }), h('th', { text: label + ' Δ' }));
    const body = h('tbody');
    for (const name of all) {
      const b = base.get(name), n = cur.get(name), v = verdict.get(name);
      const vname = v ? v[1] : (b && n ? 'unchanged' : b ? 'removed' : 'added');
      const tr = h('tr', { tabindex: '0' }, h('td', { class: 'name', text: name }), h('td', { class: 'verdict-' + vname, text: vname }),
        h('td', { text: v && v[2] !== null ? fmtNs(v[2]) + (v[3] !== null ? ' [' + fmtNs(v[3]) + ', ' + fmtNs(v[4]) + ']' : '') + ' ' + fmtRel(v[5]) : '–' }));
      for (const [k, , fmt] of METRICS) {
        const bv = b ? b[k] : null, nv = n ? n[k] : null;
        const rel = bv && nv !== null ? (nv - bv) / bv : null;
        const td = h('td', { text: rel === null ? '–' : fmtRel(rel) });
        if (rel !== null && isFinite(rel)) {
          const a = Math.min(1, Math.abs(rel) / 0.5) * 0.55;
          td.style.background = rel > 0 ? 'rgba(220,50,50,' + a + ')' : 'rgba(50,170,80,' + a + ')';
        }
        tr.append(h('td', { text: bv === null ? '–' : fmt(bv) }), h('td', { text: nv === null ? '–' : fmt(nv) }), td);
      }
      body.appendChild(tr);
    }
    root.appendChild(h('div', { class: 'scroll' }, h('table', { class: 'grid', id: 'diff' }, h('thead', null, head), body)));
    api.diffNames = () => all.slice();
    // Differential flame graph: widths of this run, colours by the change of each path's total.
    const panel = h('div', { class: 'panel' }, h('h2', { text: 'Differential flame graph (widths: this run; red: more time than the baseline on that path, blue: less)' }));
    root.appendChild(panel);
    const baseMerged = mergedRoots(baseRoots, -1);
    function pathOf(n) { const p = []; for (let x = n; x && !x.root; x = x.parent) p.push(x.name); return p.reverse(); }
    function find(path) { let x = baseMerged; for (const nm of path) { x = x.children.find((c) => c.name === nm); if (!x) return null; } return x; }
    const fg = flameGraph(panel, () => mergedRoots(newRoots, -1), {
      label: 'Differential flame graph',
      color: (n) => {
        if (n.root) return 'hsl(0,0%,60%)';
        const b = find(pathOf(n));
        if (!b) return 'hsl(0,75%,55%)';
        const r = b.total ? (n.total - b.total) / b.total : 0;
        const a = Math.min(1, Math.abs(r) / 0.5);
        return r >= 0 ? 'hsl(0,' + Math.round(20 + 60 * a) + '%,' + Math.round(80 - 25 * a) + '%)' : 'hsl(215,' + Math.round(20 + 60 * a) + '%,' + Math.round(80 - 25 * a) + '%)';
      },
      tipExtra: (n) => { const b = n.root ? baseMerged : find(pathOf(n)); return b ? ['baseline total ' + fmtNs(b.total) + ' (' + fmtRel(b.total ? (n.total - b.total) / b.total : null) + ')'] : ['not in the baseline']; },
    });
    return fg.dispose;
  }

  // ---------- start ----------
  // A level of detail: the timeline shows the longest scopes; everything else counts them all.
  // Past the budget of async calls too (meta.lod.calls), the timeline's async lanes show the longest calls.
  const L = meta.lod;
  const lodText = !L ? '' : (L.calls === undefined || L.shown < L.scopes ? 'Showing ' + L.shown + ' of ' + L.scopes +
    ' scopes on the timeline: those of ' + fmtNs(L.min_ns) + ' or more, with their parents (at most ' + L.budget +
    ' scopes are kept); the table, call tree, flame graph and histograms count every scope. ' : '') +
    (L.calls === undefined ? '' : 'Showing ' + L.calls_shown + ' of ' + L.calls + ' async calls on the timeline: those of ' +
    fmtNs(L.calls_min_ns) + ' or more (at most ' + L.calls_budget + ' calls are kept); the table and histograms count every call.');
  const lod = L ? h('p', { class: 'note', id: 'lod', text: lodText.trim() }) : null;
  app.replaceChildren(h('header', null, h('h1', { text: meta.title }), nav, info, lod), main);
  document.body.appendChild(tip);
  window.addEventListener('hashchange', route);
  route();
  const t0 = performance.now();
  blobBytes().then((bytes) => {
    threads = decodeSpans(bytes);
    api.threads = threads;
    api.decodeMs = performance.now() - t0;
    api.readyAt = performance.now();
    api.ready = true;
    if (current === 'timeline') { current = null; route(); }
    document.documentElement.setAttribute('data-ready', 'true');
  }).catch((err) => {
    api.errors.push('cannot decode the scopes: ' + err);
    main.prepend(h('p', { class: 'error', text: 'Cannot decode the scopes of this report: ' + err }));
    document.documentElement.setAttribute('data-ready', 'error');
  });
})();
