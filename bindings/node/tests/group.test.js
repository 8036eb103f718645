'use strict';
// Concurrent writeFileAtomic calls are group-committed: 500 writes into one
// directory, each durable alone with a data sync and a directory sync
// (1,000 syncs at least), take a few syncfs and directory fsyncs in all.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { tempDir } = require('./helpers');

test('500 concurrent writes share their syncs', (t) => {
  if (spawnSync('strace', ['-V']).error) {
    t.skip('SKIP: strace is not installed (apt-get install strace)');
    return;
  }
  const dir = tempDir(t);
  const log = path.join(dir, 'strace.log');
  const r = spawnSync('strace', ['-f', '-qq', '-o', log,
    '-e', 'trace=fsync,fdatasync,syncfs', process.execPath, '-e', `
    const f = require(${JSON.stringify(require.resolve('../lib/index.js'))});
    const fs = require('node:fs');
    Promise.all(Array.from({ length: 500 }, (_, i) =>
      f.writeFileAtomic(${JSON.stringify(dir)} + '/g' + i, 'v' + i)))
      .then(() => { for (let i = 0; i < 500; i++)
        if (fs.readFileSync(${JSON.stringify(dir)} + '/g' + i, 'utf8') !== 'v' + i) process.exit(3); });
  `], { stdio: 'inherit' });
  assert.strictEqual(r.status, 0);
  const syncs = fs.readFileSync(log, 'utf8').split('\n').filter((l) => /sync/.test(l)).length;
  t.diagnostic(`${syncs} sync calls for 500 writes`);
  assert.ok(syncs >= 1, 'nothing was synced');
  assert.ok(syncs < 100, `${syncs} sync calls: the writes were not grouped`);
});
