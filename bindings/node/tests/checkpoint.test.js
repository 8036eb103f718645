'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { tempDir, fsafe } = require('./helpers');

const text = (snap) => Object.fromEntries([...snap.files].map(([k, v]) => [k, v.toString()]));

test('Checkpoint saves and loads sets of files as one unit', async (t) => {
  const dir = path.join(tempDir(t), 'state');
  await assert.rejects(fsafe.Checkpoint.open(dir), { code: 'ENOENT', path: dir });
  const cp = await fsafe.Checkpoint.open(dir, { create: true, revision: '2.1' });
  assert.strictEqual(cp.wasUnclean, false);
  assert.strictEqual(await cp.load(), undefined);
  const g1 = await cp.save({ 'manifest.json': '{"v":1}', 'model.bin': Buffer.from([1, 2]) });
  const g2 = await cp.save(new Map([['manifest.json', '{"v":2}']]));
  assert.ok(g2 > g1);
  const snap = await cp.load();
  assert.strictEqual(snap.generation, g2);
  assert.strictEqual(snap.revision, '2.1');
  assert.ok(snap.time instanceof Date);
  assert.deepStrictEqual(text(snap), { 'manifest.json': '{"v":2}' });
  assert.deepStrictEqual(text(await cp.load({ generation: g1 })),
    { 'manifest.json': '{"v":1}', 'model.bin': '\u0001\u0002' });
  assert.deepStrictEqual(await cp.generations(), [g1, g2]);
  await assert.rejects(cp.save({ 'a/b': 'x' }), { code: 'EINVAL' });
  // One writer process at a time.
  const other = spawn(process.execPath, ['-e', `
    const { Checkpoint } = require(${JSON.stringify(require.resolve('../lib/index.js'))});
    Checkpoint.open(process.argv[1], { wait: false }).then(() => console.log('opened'), (e) => console.log(e.code));
  `, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const out = await new Promise((r) => { let s = ''; other.stdout.on('data', (d) => { s += d; }); other.on('exit', () => r(s.trim())); });
  assert.strictEqual(out, 'EAGAIN');
  await cp.close();
  await cp.close();
  await assert.rejects(cp.load(), { code: 'EBADF' });
});

test('a SIGKILLed saver leaves the old set or the new, and an unclean mark', async (t) => {
  const dir = tempDir(t);
  const cp = await fsafe.Checkpoint.open(dir, { create: true });
  await cp.save({ a: 'old-a', b: 'old-b' });
  await cp.close();
  const child = spawn(process.execPath, ['-e', `
    const { Checkpoint } = require(${JSON.stringify(require.resolve('../lib/index.js'))});
    (async () => {
      const cp = await Checkpoint.open(process.argv[1]);
      const big = Buffer.alloc(4 << 20, 'n');
      console.log('open');
      for (;;) await cp.save({ a: big, b: big });
    })();
  `, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => child.stdout.once('data', r));
  // Kill once the child has begun writing a generation of its own (a
  // second gen-* directory, before or after its CURRENT is replaced).
  const gens = () => fs.readdirSync(dir).filter((n) => n.startsWith('gen-')).length;
  const until = Date.now() + 10e3;
  while (Date.now() < until && gens() < 2)
    await new Promise((r) => setImmediate(r));
  assert.ok(gens() >= 2, 'the child never began a save');
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const again = await fsafe.Checkpoint.open(dir);
  assert.strictEqual(again.wasUnclean, true);
  const files = text(await again.load());
  const isOld = files.a === 'old-a' && files.b === 'old-b';
  const isNew = files.a.length === 4 << 20 && files.b === files.a;
  assert.ok(isOld || isNew, 'a torn set was loaded');
  await again.close();
});
