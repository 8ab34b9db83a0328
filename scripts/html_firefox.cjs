// The HTML report in Firefox, run by scripts/html_check.sh after the Chromium check: opens each
// report of the manifest from file:// in headless Firefox (driven by puppeteer-core over
// WebDriver BiDi) with every proxied request sent to a closed port, and checks from the page
// itself that the scopes decode, every view renders without an error, the timeline draws every
// thread, the summary has `tickscope table`'s rows and the diff view lists the names of both
// captures. Screenshots go to the manifest's folder as firefox-CASE-VIEW.png.
//
// node html_firefox.cjs MANIFEST.json
// MANIFEST: { firefox, puppeteer, shots, cases: [...] } (the cases of html_check.cjs)
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const puppeteer = require(manifest.puppeteer);

let failures = 0;
function check(ok, what) {
  if (ok) console.log('  ok   ' + what);
  else { failures++; console.log('  FAIL ' + what); }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The page's Content-Security-Policy forbids `eval`, so no waitForFunction: poll from Node.
async function until(page, fn, arg, what) {
  for (let i = 0; i < 600; i++) {
    const v = await page.evaluate(fn, arg);
    if (v) return v;
    await sleep(100);
  }
  throw new Error('timed out waiting for ' + what);
}

async function main() {
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: manifest.firefox,
    headless: true,
    // Firefox 140 refuses puppeteer's viewport override: the window has the size instead.
    defaultViewport: null,
    args: ['--width=1400', '--height=900'],
    userDataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'tickscope-firefox-')),
    extraPrefsFirefox: {
      // Every request goes through a proxy on a closed port: nothing leaves the machine.
      'network.proxy.type': 1, 'network.proxy.http': '127.0.0.1', 'network.proxy.http_port': 9,
      'network.proxy.ssl': '127.0.0.1', 'network.proxy.ssl_port': 9, 'network.proxy.no_proxies_on': '',
    },
  });
  for (const c of manifest.cases) {
    console.log('== firefox: ' + c.name);
    const page = await browser.newPage();
    const errors = [];
    const requests = [];
    const url = 'file://' + path.resolve(c.html);
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith('data:')) requests.push(r.url()); });
    await page.goto(url);
    const ready = await until(page, () => document.documentElement.getAttribute('data-ready'), null, 'the scopes to decode');
    check(ready === 'true', 'the scopes decode');
    const table = JSON.parse(fs.readFileSync(c.table_json, 'utf8'));
    const rows = await until(page, () => {
      const t = document.querySelector('#summary');
      return t && t.querySelectorAll('tbody tr').length;
    }, null, 'the summary');
    check(rows === table.rows.length, 'summary has ' + rows + ' rows, as `tickscope table` (' + table.rows.length + ')');
    const views = await page.evaluate(() => window.tickscope.views);
    for (const v of views) {
      await page.evaluate((x) => { location.hash = x; }, v);
      await until(page, (x) => window.tickscope.view === x, v, 'view ' + v);
      await sleep(200);
      await page.screenshot({ path: path.join(manifest.shots, 'firefox-' + c.name + '-' + v + '.png') });
    }
    check(views.length >= 5, 'every view renders (' + views.join(', ') + ')');
    await page.evaluate(() => { location.hash = 'timeline'; });
    await until(page, () => window.tickscope.view === 'timeline', null, 'the timeline');
    await sleep(300);
    const drawn = await page.evaluate(() => {
      const d = window.tickscope.timeline.drawn;
      return window.tickscope.meta.threads.map((t, i) => [t.spans, d[i] || 0]);
    });
    check(drawn.length > 0 && drawn.every(([n, d]) => n === 0 || d > 0), 'the timeline draws every thread (' + drawn.length + ')');
    if (c.base_table_json) {
      await page.evaluate(() => { location.hash = 'diff'; });
      await until(page, () => window.tickscope.view === 'diff', null, 'the diff view');
      const text = await page.evaluate(() => document.getElementById('view').innerText);
      const names = new Set(JSON.parse(fs.readFileSync(c.base_table_json, 'utf8')).rows.map((r) => r.name)
        .concat(table.rows.map((r) => r.name)));
      const missing = [...names].filter((n) => !text.includes(n));
      check(missing.length === 0, 'the diff view lists the names of both captures (' + names.size + ')');
    }
    const all = errors.concat(await page.evaluate(() => window.tickscope.errors));
    check(all.length === 0, 'no console error' + (all.length ? ': ' + all.slice(0, 3).join(' | ') : ''));
    check(requests.length === 0, 'no request left the page' + (requests.length ? ': ' + requests.slice(0, 3).join(' ') : ''));
    await page.close();
  }
  await browser.close();
  if (failures) {
    console.log(failures + ' firefox check(s) failed');
    process.exit(1);
  }
  console.log('all firefox checks passed');
}
main().catch((e) => { console.error(e); process.exit(1); });
