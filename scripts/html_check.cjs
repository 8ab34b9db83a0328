// The HTML report's browser check, run by scripts/html_check.sh: opens each report from
// file:// in headless Chromium with the network blocked and checks it from the page itself.
//
// node html_check.cjs MANIFEST.json
// MANIFEST: { chromium, playwright, shots, cases: [{ name, html, table_json, table_text,
//             tree_json, base_table_json (diff cases), expect_names (hostile case),
//             expect_lod (a capture of more scopes than the blob holds) }] }
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { chromium } = require(manifest.playwright);

let failures = 0;
function check(ok, what) {
  if (ok) console.log('  ok   ' + what);
  else { failures++; console.log('  FAIL ' + what); }
}
const short = (s) => (s.length > 60 ? JSON.stringify(s.slice(0, 40)) + '…(' + s.length + ' chars)' : JSON.stringify(s));

// Rust's format_ns (src/record/clock.rs): the text table's unit per value.
// Rust's `{:.N}`: the exact decimal value of the double rounded to N places, ties to even
// (written apart from the page's own, so that the two are checked against each other).
function rustFixed(x, d) {
  const exact = Math.abs(x).toPrecision(100);
  if (exact.includes('e')) return x.toFixed(d);
  const [ip, fp0 = ''] = exact.split('.');
  const fp = fp0.padEnd(d + 1, '0');
  let digits = ip + fp.slice(0, d);
  const rest = fp.slice(d);
  const tie = rest[0] === '5' && !/[1-9]/.test(rest.slice(1));
  if (rest[0] > '5' || (rest[0] === '5' && (!tie || Number(digits.at(-1)) % 2 === 1))) {
    digits = (BigInt(digits) + 1n).toString();
  }
  digits = digits.padStart(d + 1, '0');
  const out = d > 0 ? digits.slice(0, -d) + '.' + digits.slice(-d) : digits;
  return (x < 0 && /[1-9]/.test(out) ? '-' : '') + out;
}
function formatNs(ns) {
  if (ns < 1e3) return ns + ' ns';
  if (ns < 1e6) return rustFixed(ns / 1e3, 2) + ' µs';
  if (ns < 1e9) return rustFixed(ns / 1e6, 2) + ' ms';
  return rustFixed(ns / 1e9, 3) + ' s';
}

// The Total cells of `tickscope table`'s text, by name, where names split cleanly.
function textTotals(text) {
  const lines = text.split('\n');
  const head = lines[0].split(/\s{2,}/);
  const ti = head.indexOf('Total');
  const out = new Map();
  for (const line of lines.slice(1)) {
    if (!line.trim()) break;
    const cells = line.split(/\s{2,}/);
    if (cells.length !== head.length) continue;
    out.set(cells[0].replace(/ \*$/, ''), cells[ti]);
  }
  return out;
}

async function main() {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tickscope-chromium-'));
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: manifest.chromium,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      // Nothing resolves and any proxy use fails: the network is blocked for the page.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost', '--proxy-server=http://127.0.0.1:9'],
    viewport: { width: 1400, height: 900 },
  });
  await context.route(/^(https?|wss?|ftp):/, (route) => route.abort());
  fs.mkdirSync(manifest.shots, { recursive: true });
  for (const c of manifest.cases) {
    console.log('== ' + c.name + ' (' + c.html + ', ' + fs.statSync(c.html).size + ' bytes)');
    const page = await context.newPage();
    const url = 'file://' + path.resolve(c.html);
    const requests = [];
    const consoleErrors = [];
    page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith('data:')) requests.push(r.url()); });
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => document.documentElement.getAttribute('data-ready'), null, { timeout: 60000 });
    check(await page.evaluate(() => document.documentElement.getAttribute('data-ready') === 'true'), 'the scopes decode');
    const views = await page.evaluate(() => window.tickscope.views);

    // Summary: rows equal the table's.
    await page.evaluate(() => { location.hash = 'summary'; });
    await page.waitForSelector('#summary tbody');
    const table = JSON.parse(fs.readFileSync(c.table_json, 'utf8'));
    const rows = await page.$$eval('#summary tbody tr', (trs) => trs.map((tr) => {
      const cell = (k) => tr.querySelector('td[data-key="' + k + '"]');
      return { name: cell('name').textContent, calls: Number(cell('calls').getAttribute('data-value')),
        total: Number(cell('total_ns').getAttribute('data-value')), totalText: cell('total_ns').textContent };
    }));
    const want = table.rows.map((r) => ({ name: r.name + (r.open_at_stop > 0 ? ' *' : ''), calls: r.calls, total: r.total_ns }));
    check(rows.length === want.length, 'summary has ' + want.length + ' rows, as `tickscope table` (got ' + rows.length + ')');
    const sortByName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    const got = rows.slice().sort(sortByName), exp = want.slice().sort(sortByName);
    let same = got.length === exp.length;
    for (let i = 0; same && i < exp.length; i++) {
      if (got[i].name !== exp[i].name || got[i].calls !== exp[i].calls || got[i].total !== exp[i].total || got[i].totalText !== formatNs(exp[i].total)) {
        same = false;
        console.log('    differs: page ' + short(got[i].name) + ' ' + got[i].calls + ' ' + got[i].totalText + ' / table ' + short(exp[i].name) + ' ' + exp[i].calls + ' ' + formatNs(exp[i].total));
      }
    }
    check(same, 'summary rows: names, calls and totals (ns, and as displayed) equal `tickscope table --format json`');
    if (c.table_text) {
      const totals = textTotals(fs.readFileSync(c.table_text, 'utf8'));
      let n = 0, agree = 0;
      for (const r of rows) {
        const t = totals.get(r.name.replace(/ \*$/, ''));
        if (t === undefined) continue;
        n++;
        if (t === r.totalText) agree++;
        else console.log('    ' + short(r.name) + ': page ' + r.totalText + ' (' + r.total + ' ns), text table ' + t);
      }
      check(n > 0 && agree === n, 'summary totals read as the text table prints them (' + agree + '/' + n + ' rows)');
    }
    // Sorting by each column orders the rows.
    const keys = await page.$$eval('#summary thead button', (bs) => bs.map((b) => b.getAttribute('data-key')));
    let sortOk = true;
    for (const key of keys) {
      for (const desc of [true, false]) {
        await page.evaluate(([k, d]) => window.tickscope.sortSummary(k, d), [key, desc]);
        const vals = await page.$$eval('#summary tbody td[data-key="' + key + '"]', (tds) => tds.map((td) => td.hasAttribute('data-value') ? Number(td.getAttribute('data-value')) : td.textContent));
        for (let i = 1; i < vals.length; i++) {
          const a = vals[i - 1], b = vals[i];
          const ordered = desc ? a >= b : a <= b;
          if (!ordered && !(typeof a === 'string' && a === b)) { sortOk = false; console.log('    sort ' + key + (desc ? ' desc' : ' asc') + ' breaks at row ' + i); break; }
        }
      }
      // Also by clicking the header (the keyboard's way too: it is a button).
      await page.click('#summary thead button[data-key="' + key + '"]');
    }
    check(sortOk && keys.length >= 10, 'sorting by each of the ' + keys.length + ' columns orders the rows both ways');
    await page.evaluate(() => window.tickscope.sortSummary('total_ns', true));
    await page.click('#summary tbody tr');
    await page.waitForSelector('.hist canvas');
    check(true, 'a row click shows the histogram of its call durations');
    const firstCalls = await page.$eval('#summary tbody tr td[data-key="calls"]', (td) => Number(td.getAttribute('data-value')));
    const histNote = await page.$eval('.hist p.note', (p) => p.textContent);
    check(histNote.startsWith(firstCalls + ' calls '), 'the histogram counts every call of the row (' + histNote + '; ' + firstCalls + ' calls)');
    // A level of detail: said above the views, with the numbers of the data.
    const lod = await page.evaluate(() => window.tickscope.meta.lod || null);
    if (c.expect_lod) check(!!lod && lod.shown > 0 && lod.shown <= lod.budget && lod.scopes > lod.budget, 'a level of detail: ' + JSON.stringify(lod));
    else check(!lod, 'every scope in the blob (no level of detail)');
    if (lod) {
      const note = await page.$eval('#lod', (p) => p.textContent);
      check(note.startsWith('Showing ' + lod.shown + ' of ' + lod.scopes + ' scopes on the timeline: those of '), 'the page says what it shows: ' + note);
    }
    await page.screenshot({ path: path.join(manifest.shots, c.name + '-summary.png'), fullPage: false });

    // Call tree and flame graph.
    await page.evaluate(() => { location.hash = 'tree'; });
    await page.waitForSelector('.tree [role="treeitem"]');
    await page.focus('.tree [role="treeitem"]');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowRight');
    await page.screenshot({ path: path.join(manifest.shots, c.name + '-tree.png') });
    const treeRoots = await page.evaluate(() => window.tickscope.treeRoots());
    await page.evaluate(() => { location.hash = 'flame'; });
    await page.waitForSelector('main canvas');
    const flameRoots = await page.evaluate(() => window.tickscope.flameRoots());
    check(JSON.stringify(treeRoots) === JSON.stringify(flameRoots), 'the flame graph\'s root children equal the call tree\'s (' + treeRoots.length + ')');
    if (c.tree_json) {
      const tree = JSON.parse(fs.readFileSync(c.tree_json, 'utf8'));
      const label = (r) => r.name + (r.poll ? ' (poll)' : '');
      const top = tree.rows.filter((r) => r.depth === 0).map((r) => [label(r), r.calls, r.total_ns]).sort();
      const mine = treeRoots.slice().sort();
      check(JSON.stringify(top) === JSON.stringify(mine), 'the call tree\'s roots equal `tickscope table --tree`\'s (names, calls, totals)');
      // Every path of the tree, at every depth.
      const stack = [];
      const paths = [];
      for (const r of tree.rows) {
        stack.length = r.depth;
        stack.push(label(r));
        paths.push([stack.join('\u0000'), r.calls, r.total_ns]);
      }
      paths.sort();
      const pagePaths = (await page.evaluate(() => window.tickscope.treePaths())).sort();
      check(JSON.stringify(paths) === JSON.stringify(pagePaths), 'every path of the call tree (' + paths.length + ') has `tickscope table --tree`\'s calls and total');
    }
    // Search highlights, click zooms.
    const first = treeRoots.length ? treeRoots[0][0] : null;
    if (first) {
      await page.fill('main input[type="search"]', first.slice(0, 50));
      const stat = await page.evaluate(() => document.querySelector('main .controls .legend').textContent);
      check(stat.startsWith('matched '), 'the flame graph\'s search sums the matching frames (' + stat + ')');
      await page.screenshot({ path: path.join(manifest.shots, c.name + '-flame-search.png') });
      await page.fill('main input[type="search"]', '');
      const box = await page.$eval('main canvas', (cv) => { const r = cv.getBoundingClientRect(); return [r.left, r.top]; });
      await page.mouse.click(box[0] + 5, box[1] + 18 + 9);
      const zoomed = await page.evaluate(() => window.tickscope.flameZoom);
      check(zoomed === first, 'a click on a frame zooms to it (' + short(String(zoomed)) + ')');
    }
    await page.screenshot({ path: path.join(manifest.shots, c.name + '-flame.png') });

    // Timeline: every thread drawn.
    await page.evaluate(() => { location.hash = 'timeline'; });
    await page.waitForSelector('#timeline');
    const drawn = await page.evaluate(() => {
      const d = window.tickscope.timeline.drawn;
      return window.tickscope.meta.threads.map((t, i) => [t.name, t.shown === undefined ? t.spans : t.shown, d[i] || 0]);
    });
    const missing = drawn.filter(([, n, d]) => n > 0 && !(d > 0));
    check(drawn.length > 0 && missing.length === 0, 'the timeline draws every thread (' + drawn.length + ' threads' + (missing.length ? '; missing ' + missing.map((m) => short(m[0])).join(', ') : '') + ')');
    const flows = await page.evaluate(() => [window.tickscope.meta.flows.length / 4, window.tickscope.timeline.flows]);
    if (flows[0] > 0) check(flows[1] === flows[0], 'the timeline draws every flow between linked scopes (' + flows[1] + ' of ' + flows[0] + ')');
    await page.focus('#timeline');
    for (const k of ['w', 'w', 'd', 's', '0']) await page.keyboard.press(k);
    await page.screenshot({ path: path.join(manifest.shots, c.name + '-timeline.png') });

    for (const v of ['memory', 'session']) {
      if (!views.includes(v)) continue;
      await page.evaluate((x) => { location.hash = x; }, v);
      await page.waitForTimeout(50);
      await page.screenshot({ path: path.join(manifest.shots, c.name + '-' + v + '.png'), fullPage: v === 'session' });
    }
    check(await page.evaluate(() => location.hash === '#session' && window.tickscope.view === 'session'), 'the URL hash keeps the view');
    await page.reload();
    await page.waitForFunction(() => document.documentElement.getAttribute('data-ready'));
    check(await page.evaluate(() => window.tickscope.view === 'session'), 'reloading opens the view the hash names');

    // Keyboard: the tab bar moves between views with the arrow keys, and Tab reaches the rows.
    await page.evaluate(() => { location.hash = 'summary'; });
    await page.waitForSelector('#summary tbody tr');
    await page.focus('#tab-summary');
    await page.keyboard.press('ArrowRight');
    await page.waitForFunction(() => window.tickscope.view === 'tree');
    const viaKeys = await page.evaluate(() => location.hash);
    await page.keyboard.press('ArrowLeft');
    await page.waitForFunction(() => window.tickscope.view === 'summary' && document.querySelector('#summary tbody tr'));
    await page.focus('#tab-summary');
    let reached = false;
    for (let i = 0; i < 40 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement && document.activeElement.matches('#summary tbody tr'));
    }
    if (!reached) console.log('    focus ended on ' + await page.evaluate(() => { const e = document.activeElement; return e ? e.tagName + '#' + e.id + ' ' + (e.textContent || '').slice(0, 30) : 'nothing'; }));
    if (reached) await page.keyboard.press('Enter');
    check(viaKeys === '#tree' && reached && await page.evaluate(() => !!document.querySelector('.hist canvas')),
      'keyboard: arrows move between views, Tab reaches the rows, Enter opens a row\'s histogram (' + viaKeys + ', ' + reached + ')');
    // The dark theme, as a system in dark mode shows it.
    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    check(dark !== 'rgb(255, 255, 255)', 'a dark system theme gives a dark page (' + dark + ')');
    await page.screenshot({ path: path.join(manifest.shots, c.name + '-summary-dark.png') });
    await page.evaluate(() => { location.hash = 'timeline'; });
    await page.waitForSelector('#timeline');
    await page.screenshot({ path: path.join(manifest.shots, c.name + '-timeline-dark.png') });
    await page.emulateMedia({ colorScheme: 'light' });

    if (c.base_table_json) {
      await page.evaluate(() => { location.hash = 'diff'; });
      await page.waitForSelector('#diff');
      const listed = new Set(await page.evaluate(() => window.tickscope.diffNames()));
      const rowsShown = await page.$$eval('#diff tbody tr td.name', (tds) => tds.map((td) => td.textContent));
      const both = new Set([...table.rows.map((r) => r.name), ...JSON.parse(fs.readFileSync(c.base_table_json, 'utf8')).rows.map((r) => r.name)]);
      check(both.size === rowsShown.length && [...both].every((n) => listed.has(n) && rowsShown.includes(n)), 'the diff view lists the names of both captures (' + both.size + ')');
      await page.screenshot({ path: path.join(manifest.shots, c.name + '-diff.png'), fullPage: true });
    }
    if (c.expect_names) {
      const shown = await page.evaluate(() => window.tickscope.meta.names);
      const expected = JSON.parse(fs.readFileSync(c.expect_names, 'utf8'));
      check(expected.every((n) => shown.includes(n)), 'hostile names reach the page intact (' + expected.length + ')');
      check(await page.evaluate(() => document.querySelectorAll('img, iframe, object, embed').length === 0 && document.scripts.length === 3), 'no name turned into an element (no img, no extra script)');
      await page.evaluate(() => { location.hash = 'summary'; });
      const texts = await page.$$eval('#summary tbody td[data-key="name"]', (tds) => tds.map((td) => td.textContent.replace(/ \*$/, '')));
      check(expected.every((n) => texts.includes(n)), 'hostile names render as text in the summary');
    }
    check(requests.length === 0, 'no request left the page' + (requests.length ? ': ' + requests.slice(0, 3).join(' ') : ''));
    const errs = consoleErrors.concat(await page.evaluate(() => window.tickscope.errors));
    check(errs.length === 0, 'no console error' + (errs.length ? ': ' + errs.slice(0, 3).join(' | ') : ''));
    await page.close();
  }
  await context.close();
  fs.rmSync(userDir, { recursive: true, force: true });
  console.log('screenshots in ' + path.resolve(manifest.shots));
  if (failures) { console.log(failures + ' check(s) failed'); process.exit(1); }
  console.log('all checks passed');
}
main().catch((e) => { console.error(e); process.exit(1); });
