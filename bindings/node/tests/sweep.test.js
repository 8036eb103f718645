'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { tempDir, STAGE, fsafe } = require('./helpers');

test('isAtomicStagingName is the library\'s predicate', () => {
  assert.strictEqual(fsafe.isAtomicStagingName(STAGE), true);
  for (const no of ['.fsafe-0123456789ABCDEF01234567.tmp',
    '.fsafe-0123456789abcdef0123456.tmp', 'x/' + STAGE, 'a.txt', '',
    '.lock-0123.tmp', 42, null])
    assert.strictEqual(fsafe.isAtomicStagingName(no), false, String(no));
});

test('sweepAtomicStaging removes old stages only and returns their names', async (t) => {
  const dir = tempDir(t);
  const old = new Date(Date.now() - 3600e3);
  const other = '.fsafe-aaaaaaaaaaaaaaaaaaaaaaaa.tmp';
  fs.writeFileSync(path.join(dir, STAGE), 'stage');
  fs.utimesSync(path.join(dir, STAGE), old, old);
  fs.writeFileSync(path.join(dir, other), 'fresh stage');
  fs.writeFileSync(path.join(dir, 'keep.txt'), 'data');
  fs.mkdirSync(path.join(dir, '.fsafe-bbbbbbbbbbbbbbbbbbbbbbbb.tmp'));
  const removed = await fsafe.sweepAtomicStaging({ directory: dir, olderThanMs: 60e3 });
  assert.deepStrictEqual(removed, [STAGE]);
  assert.deepStrictEqual(fs.readdirSync(dir).sort(),
    ['.fsafe-aaaaaaaaaaaaaaaaaaaaaaaa.tmp', '.fsafe-bbbbbbbbbbbbbbbbbbbbbbbb.tmp',
      'keep.txt']);
  assert.deepStrictEqual(
    await fsafe.sweepAtomicStaging({ directory: dir, olderThanMs: 0 }), [other]);
});

test('sweepAtomicStaging reports failures as fs does', async (t) => {
  const dir = path.join(tempDir(t), 'missing');
  await assert.rejects(fsafe.sweepAtomicStaging({ directory: dir, olderThanMs: 0 }),
    { code: 'ENOENT', errno: -2, path: dir, removed: [] });
  await assert.rejects(fsafe.sweepAtomicStaging({ directory: dir }),
    { code: 'ERR_INVALID_ARG_TYPE' });
});

test('an aborted signal stops the sweep with an AbortError', async (t) => {
  const dir = tempDir(t);
  const ac = new AbortController();
  ac.abort(new Error('stop'));
  await assert.rejects(
    fsafe.sweepAtomicStaging({ directory: dir, olderThanMs: 0, signal: ac.signal }),
    { name: 'AbortError', code: 'ABORT_ERR' });
  // An abort once the sweep has started reaches the pool thread: of many
  // stages it removes fewer than all, and says which.
  const n = 5000;
  for (let i = 0; i < n; i++)
    fs.writeFileSync(path.join(dir, `.fsafe-${i.toString(16).padStart(24, '0')}.tmp`), '');
  const ac2 = new AbortController();
  const p = fsafe.sweepAtomicStaging({ directory: dir, olderThanMs: 0, signal: ac2.signal });
  ac2.abort();
  const err = await p.then(() => null, (e) => e);
  assert.ok(err, 'the sweep finished despite the abort');
  assert.strictEqual(err.name, 'AbortError');
  assert.ok(Array.isArray(err.removed) && err.removed.length < n);
  assert.strictEqual(fs.readdirSync(dir).length, n - err.removed.length);
});
