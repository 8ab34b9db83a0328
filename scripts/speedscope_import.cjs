// Runs speedscope's own importer on profile files under node, headless, and prints what it
// imported as JSON, one line per file: per profile its weight unit, total weight, and per frame
// name the self and total weight; and the warnings the importer gave (`warnings`: it warns when
// it has to repair a stack, "Tried to end X when Y was on the top of the stack"). The bundle is
// loaded once for all files. scripts/interop.sh checks a pprof profile of ours with it, and that
// speedscope reads every Chrome trace of the examples without one warning.
//
//   node scripts/speedscope_import.cjs DIR FILE...    (DIR: where `npm install speedscope` ran)
//
// The npm package ships speedscope as one browser bundle; its importer
// (importProfilesFromArrayBuffer, the function the web app calls on a dropped file) is made
// reachable by inserting one assignment before its definition, and the bundle runs in a
// context whose browser globals are inert stand-ins: the user interface's start-up may fail
// without a DOM, but the importer needs none.
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const [dir, ...files] = process.argv.slice(2);
const release = path.join(dir, "node_modules/speedscope/dist/release");
const bundle = fs.readdirSync(release).find((f) => /^speedscope-.*\.js$/.test(f));
let src = fs.readFileSync(path.join(release, bundle), "utf8");
const hook = /async function (\w+)\(\w,\w\)\{return\(await \w+\)\.importProfilesFromArrayBuffer\(/;
const m = hook.exec(src);
if (!m) throw new Error("speedscope bundle: importProfilesFromArrayBuffer not found");
src = src.slice(0, m.index) + `globalThis.__import=${m[1]};` + src.slice(m.index);
const stub = () =>
  new Proxy(function () {}, {
    get: (t, k) => (k === Symbol.toPrimitive ? () => "" : k === "then" ? undefined : stub()),
    apply: () => stub(),
    construct: () => stub(),
  });
// What the importer warns, per file.
let warnings = [];
const sandbox = {
  console: { log() {}, warn: (...a) => warnings.push(a.join(" ")), error() {}, info() {} },
  setTimeout, clearTimeout, Promise, TextDecoder, TextEncoder, Uint8Array, ArrayBuffer, DataView,
  URL, URLSearchParams, performance, queueMicrotask,
  document: stub(), navigator: { userAgent: "node" }, location: { hash: "", search: "", href: "" },
  localStorage: stub(), addEventListener() {}, removeEventListener() {}, requestAnimationFrame() {},
  matchMedia: () => ({ matches: false, addEventListener() {}, addListener() {} }),
};
sandbox.window = sandbox;
sandbox.self = sandbox;
sandbox.globalThis = sandbox;
vm.createContext(sandbox);
try {
  vm.runInContext(src, sandbox);
} catch (e) {
  // The UI's start-up may fail without a DOM; the importer is hooked before it runs.
  if (!sandbox.__import) throw e;
}
// The UI's start-up warnings are not the importer's.
warnings = [];
(async () => {
  for (const file of files) {
  warnings = [];
  const bytes = fs.readFileSync(file);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const group = await sandbox.__import(path.basename(file), buffer);
  if (!group) throw new Error("speedscope imported nothing");
  const profiles = group.profiles.map((p) => {
    const frames = {};
    p.forEachFrame((f) => {
      const e = frames[f.name] || (frames[f.name] = { self: 0, total: 0 });
      e.self += f.getSelfWeight();
      e.total += f.getTotalWeight();
    });
    return { name: p.getName(), unit: p.getWeightUnit(), total: p.getTotalWeight(), frames };
  });
  process.stdout.write(JSON.stringify({ file, name: group.name, profiles, warnings }) + "\n");
  }
})().catch((e) => {
  console.error(String(e && e.stack || e));
  process.exit(1);
});
