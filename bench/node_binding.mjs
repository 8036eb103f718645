// 4 KiB durable writes per second from Node: fsafe's binding against npm's
// write-file-atomic@7, sync, async one at a time, and 1,000 concurrent
// writes to distinct files. One run, every variant once per round in an
// order that rotates each round; the table gives each variant's median.
//
//   FSAFE_NODE_ADDON=out/gcc/bindings/node/fsafe.node \
//     node bench/node_binding.mjs [DIR]
//
// DIR (default: a fresh directory under build-bench/) must be on the disk
// to measure (not tmpfs). write-file-atomic is loaded from
// build-bench/node/node_modules (WFA_DIR overrides), where `bench/run`
// installs it, or:
//   mkdir -p build-bench/node && npm install --prefix build-bench/node write-file-atomic@7
// ROUNDS (7), N_SEQ (200) and N_MANY (1000) are the knobs.
//
// Durability differs: fsafe syncs the file and then its directory, so a
// returned write survives a power cut; write-file-atomic syncs the file
// only (no directory sync), so its rename itself may be lost.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const require = createRequire(import.meta.url);
const fsafe = require(path.join(root, 'bindings', 'node', 'lib', 'index.js'));
const wfaDir = process.env.WFA_DIR || path.join(root, 'build-bench', 'node');
const wfa = createRequire(path.join(wfaDir, 'package.json'))('write-file-atomic');
const wfaVersion = JSON.parse(fs.readFileSync(
  path.join(wfaDir, 'node_modules', 'write-file-atomic', 'package.json'))).version;

const ROUNDS = Number(process.env.ROUNDS || 7);
const N_SEQ = Number(process.env.N_SEQ || 200);
const N_MANY = Number(process.env.N_MANY || 1000);
const base = process.argv[2] ||
  fs.mkdtempSync(path.join(root, 'build-bench', 'node-binding-'));
fs.mkdirSync(base, { recursive: true });
const data = Buffer.alloc(4096, 'x');

// Each variant writes `n` files into its own directory (replacing the
// files of its previous round) and returns the writes done.
const variants = {
  'fsafe writeFileAtomicSync': { n: N_SEQ, run: (d, n) => {
    for (let i = 0; i < n; i++) fsafe.writeFileAtomicSync(path.join(d, `f${i % 10}`), data);
  } },
  'write-file-atomic sync': { n: N_SEQ, run: (d, n) => {
    for (let i = 0; i < n; i++) wfa.sync(path.join(d, `f${i % 10}`), data);
  } },
  'fsafe writeFileAtomic, one at a time': { n: N_SEQ, run: async (d, n) => {
    for (let i = 0; i < n; i++) await fsafe.writeFileAtomic(path.join(d, `f${i % 10}`), data);
  } },
  'write-file-atomic async, one at a time': { n: N_SEQ, run: async (d, n) => {
    for (let i = 0; i < n; i++) await wfa(path.join(d, `f${i % 10}`), data);
  } },
  [`fsafe writeFileAtomic, ${N_MANY} concurrent`]: { n: N_MANY, run: (d, n) =>
    Promise.all(Array.from({ length: n }, (_, i) =>
      fsafe.writeFileAtomic(path.join(d, `f${i}`), data))) },
  [`write-file-atomic async, ${N_MANY} concurrent`]: { n: N_MANY, run: (d, n) =>
    Promise.all(Array.from({ length: n }, (_, i) => wfa(path.join(d, `f${i}`), data))) },
};

const names = Object.keys(variants);
const rates = Object.fromEntries(names.map((k) => [k, []]));
names.forEach((k, i) => fs.mkdirSync(path.join(base, `v${i}`), { recursive: true }));
for (let r = 0; r < ROUNDS; r++) {
  for (let j = 0; j < names.length; j++) {
    const i = (j + r) % names.length;   // rotate the order each round
    const v = variants[names[i]];
    const t0 = process.hrtime.bigint();
    await v.run(path.join(base, `v${i}`), v.n);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    rates[names[i]].push(v.n / s);
  }
  process.stderr.write(`round ${r + 1}/${ROUNDS}\n`);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
console.log(`Node ${process.version}, write-file-atomic ${wfaVersion}; 4 KiB ` +
  `writes into ${base}; ${ROUNDS} interleaved rounds, medians\n`);
console.log('| variant | durability | writes/s (median) | min..max |');
console.log('|---|---|---:|---:|');
for (const k of names) {
  const dur = k.startsWith('fsafe') ? 'file + directory' : 'file only';
  const xs = rates[k];
  console.log(`| ${k} | ${dur} | ${median(xs).toFixed(0)} | ` +
    `${Math.min(...xs).toFixed(0)}..${Math.max(...xs).toFixed(0)} |`);
}
if (!process.argv[2]) fs.rmSync(base, { recursive: true, force: true });
