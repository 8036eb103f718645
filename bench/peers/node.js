// Peer driver: npm write-file-atomic (defaults: fsync of the file on).
//
//   node node.js sync|async DIR K SIZE distinct|same
//
// sync: writeFileAtomic.sync() K times. async: K writeFileAtomic() calls
// started at once, then awaited together (Promise.all; the module itself
// queues writes to one target). K writes in one process; prints the
// elapsed seconds. The writes sit between the access() markers that
// bench/run cuts strace output at. NODE_PATH must lead to the module.
'use strict';
const fs = require('fs');
const path = require('path');
const writeFileAtomic = require('write-file-atomic');

const MAX_BUFS = 1000;

async function main() {
  const [how, dir, ks, sizes, mode] = process.argv.slice(2);
  const k = Number(ks);
  const size = Number(sizes);
  const nbuf = Math.min(k, MAX_BUFS);
  const bufs = [];
  for (let i = 0; i < nbuf; i++) {
    const b = Buffer.alloc(size);
    for (let j = 0; j < size; j++) b[j] = (j * 131 + i * 7 + 1) & 0xff;
    bufs.push(b);
  }
  const names = [];
  for (let i = 0; i < k; i++) {
    names.push(path.join(dir, mode === 'same' ? 'target' : 't' + i));
  }
  fs.accessSync('/', fs.constants.F_OK); // warm the binding up
  try { fs.accessSync('fsafe-bench:begin'); } catch (e) { /* marker */ }
  const t0 = process.hrtime.bigint();
  if (how === 'sync') {
    for (let i = 0; i < k; i++) writeFileAtomic.sync(names[i], bufs[i % nbuf]);
  } else {
    const all = [];
    for (let i = 0; i < k; i++) all.push(writeFileAtomic(names[i], bufs[i % nbuf]));
    await Promise.all(all);
  }
  const t = Number(process.hrtime.bigint() - t0) / 1e9;
  try { fs.accessSync('fsafe-bench:end'); } catch (e) { /* marker */ }
  console.log(t.toFixed(9));
}

main().catch((e) => { console.error('node:', e); process.exit(1); });
