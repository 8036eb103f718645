'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { tempDir, fsafe } = require('./helpers');

test('Store round-trips values with versions', async (t) => {
  const dir = path.join(tempDir(t), 'db');
  await assert.rejects(fsafe.Store.open(dir), { code: 'ENOENT', path: dir });
  const s = await fsafe.Store.open(dir, { create: true });
  assert.strictEqual(await s.put('config', '{"n":1}'), 1);
  assert.strictEqual(await s.put(Buffer.from([0, 1]), Buffer.from([9])), 1);
  assert.strictEqual(await s.put('config', '{"n":2}'), 2);
  const got = await s.get('config');
  assert.strictEqual(got.value.toString(), '{"n":2}');
  assert.strictEqual(got.version, 2);
  assert.deepStrictEqual((await s.get(Buffer.from([0, 1]))).value, Buffer.from([9]));
  assert.strictEqual(await s.get('missing'), undefined);
  const keys = (await s.entries()).map((e) => [e.key.toString('hex'), e.version, e.length]);
  assert.deepStrictEqual(keys, [['0001', 1, 1], ['636f6e666967', 2, 7]]);
  assert.strictEqual(await s.delete('config'), true);
  assert.strictEqual(await s.delete('config'), false);
  await s.close();
  await s.close();
  await assert.rejects(s.get('x'), { code: 'EBADF' });
  // Reopened, the data is there.
  const again = await fsafe.Store.open(dir);
  assert.deepStrictEqual((await again.get(Buffer.from([0, 1]))).value, Buffer.from([9]));
  await again.close();
});

test('putIf conflicts map to ERR_FSAFE_CONFLICT; update loses nothing', async (t) => {
  const dir = tempDir(t);
  const s = await fsafe.Store.open(dir);
  assert.strictEqual(await s.putIf('k', 'a', 0), 1);
  await assert.rejects(s.putIf('k', 'b', 0), { code: 'ERR_FSAFE_CONFLICT' });
  assert.strictEqual(await s.putIf('k', 'b', 1), 2);
  // Two handles updating one counter concurrently: every increment lands.
  const other = await fsafe.Store.open(dir);
  const bump = (h) => h.update('n', (old) => String(Number(old || 0) + 1));
  await Promise.all(Array.from({ length: 20 }, (_, i) => bump(i % 2 ? s : other)));
  assert.strictEqual((await s.get('n')).value.toString(), '20');
  assert.strictEqual((await s.get('n')).version, 20);
  await s.close();
  await other.close();
  assert.ok(!fs.readdirSync(dir).some(fsafe.isAtomicStagingName));
});

test('bad keys are refused with the library\'s errors', async (t) => {
  const s = await fsafe.Store.open(tempDir(t));
  await assert.rejects(s.put('', 'x'), { code: 'EINVAL' });
  await assert.rejects(s.put('k'.repeat(127), 'x'), { code: 'ENAMETOOLONG' });
  await s.close();
});
