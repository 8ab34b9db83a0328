// Browser timings of HTML reports, for scripts/html_bench.sh:
// node html_bench.cjs CHROMIUM PLAYWRIGHT_CORE PAGE.html...
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const [chromiumPath, playwright, ...pages] = process.argv.slice(2);
const { chromium } = require(playwright);

async function main() {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tickscope-bench-'));
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--host-resolver-rules=MAP * ~NOTFOUND'],
    viewport: { width: 1400, height: 900 },
  });
  for (const file of pages) {
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto('file://' + path.resolve(file), { waitUntil: 'load', timeout: 120000 });
    await page.waitForFunction(() => document.documentElement.getAttribute('data-ready'), null, { timeout: 120000, polling: 20 });
    const r = await page.evaluate(() => ({
      ready: window.tickscope.readyAt, decode: window.tickscope.decodeMs,
      summaryRows: document.querySelectorAll('#summary tbody tr').length,
      scopes: window.tickscope.meta.session.scopes,
    }));
    const t0 = Date.now();
    await page.evaluate(() => { location.hash = 'timeline'; });
    await page.waitForFunction(() => window.tickscope.timeline.lastFrameMs !== undefined, null, { timeout: 120000, polling: 20 });
    const timelineMs = Date.now() - t0;
    // Zoom in and out and pan, one view change per animation frame, for 4 s.
    const fps = await page.evaluate(() => new Promise((done) => {
      const tl = window.tickscope.timeline;
      const wall = tl.wall;
      const frames = [];
      const start = performance.now();
      let k = 0;
      function frame(now) {
        const phase = (k++ % 240) / 240;
        const zoom = Math.pow(1000, Math.sin(phase * Math.PI)); // 1x .. 1000x and back
        const span = wall / zoom;
        const center = wall * (0.2 + 0.6 * phase);
        const t = performance.now();
        tl.view(center - span / 2, center + span / 2);
        frames.push([now, performance.now() - t]);
        if (now - start < 4000) requestAnimationFrame(frame); else {
          const secs = (frames[frames.length - 1][0] - frames[0][0]) / 1000;
          const draws = frames.map((f) => f[1]).sort((a, b) => a - b);
          done({ fps: (frames.length - 1) / secs, frames: frames.length, drawP50: draws[Math.floor(draws.length / 2)], drawMax: draws[draws.length - 1] });
        }
      }
      requestAnimationFrame(frame);
    }));
    console.log(path.basename(file) + ': ' + fs.statSync(file).size + ' bytes, ' + r.scopes + ' scopes; interactive (scopes decoded, summary of ' + r.summaryRows +
      ' rows drawn) at ' + r.ready.toFixed(0) + ' ms after navigation (decoding ' + r.decode.toFixed(0) + ' ms); timeline first frame ' + timelineMs +
      ' ms after the click; zoom/pan ' + fps.fps.toFixed(1) + ' fps over ' + fps.frames + ' frames (draw p50 ' + fps.drawP50.toFixed(1) + ' ms, max ' + fps.drawMax.toFixed(1) + ' ms)' +
      (errors.length ? '; ERRORS: ' + errors.join(' | ') : ''));
    await page.close();
  }
  await context.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
main().catch((e) => { console.error(e); process.exit(1); });
