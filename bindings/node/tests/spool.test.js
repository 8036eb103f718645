'use strict';
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { tempDir, fsafe } = require('./helpers');

const readAll = async (sp, from) => {
  const out = [];
  for await (const [seq, data] of sp.read(from)) out.push([seq, data.toString()]);
  return out;
};

test('Spool appends, reads in order, acks and reopens', async (t) => {
  const dir = path.join(tempDir(t), 'events');
  await assert.rejects(fsafe.Spool.open(dir), { code: 'ENOENT', path: dir });
  const sp = await fsafe.Spool.open(dir, { create: true });
  assert.strictEqual(await sp.append('one', 'two'), 1);
  assert.strictEqual(await sp.append(Buffer.from('three'), ''), 3);
  assert.deepStrictEqual(await readAll(sp),
    [[1, 'one'], [2, 'two'], [3, 'three'], [4, '']]);
  assert.deepStrictEqual(await readAll(sp, 3), [[3, 'three'], [4, '']]);
  await sp.ack(2);
  const st = await sp.stat();
  assert.strictEqual(st.cursor, 3);
  assert.strictEqual(st.nextSeq, 5);
  // A second open shares the spool: its append is read through the first.
  const other = await fsafe.Spool.open(dir);
  assert.strictEqual(await other.append('five'), 5);
  await other.close();
  assert.deepStrictEqual(await readAll(sp), [[3, 'three'], [4, ''], [5, 'five']]);
  await sp.close();
  await sp.close();
  await assert.rejects(sp.append('x'), { code: 'EBADF' });
  const again = await fsafe.Spool.open(dir);
  assert.deepStrictEqual(await readAll(again), [[3, 'three'], [4, ''], [5, 'five']]);
  await again.close();
});

test('Spool reads more records than one batch, and concurrent appends all land', async (t) => {
  const sp = await fsafe.Spool.open(tempDir(t));
  const n = 300;
  const firsts = await Promise.all(Array.from({ length: n }, (_, i) => sp.append(`r${i}`)));
  assert.deepStrictEqual(firsts, Array.from({ length: n }, (_, i) => i + 1));
  const got = await readAll(sp);
  assert.strictEqual(got.length, n);
  got.forEach(([seq, s], i) => assert.deepStrictEqual([seq, s], [i + 1, `r${i}`]));
  await sp.close();
});
