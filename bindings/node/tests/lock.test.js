'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { tempDir, fsafe } = require('./helpers');

test('a Lock excludes a second holder until released', async (t) => {
  const dir = tempDir(t);
  const name = path.join(dir, 'app.lock');
  const a = await fsafe.Lock.acquire(name);
  assert.ok(fs.existsSync(name));
  // A second holder in another process (a lock belongs to a process).
  const child = (args) => new Promise((resolve) => {
    const p = spawn(process.execPath, ['-e', `
      const { Lock } = require(${JSON.stringify(require.resolve('../lib/index.js'))});
      Lock.acquire(process.argv[1], ${args}).then(
        (l) => l.release().then(() => console.log('acquired')),
        (e) => console.log(e.code));
    `, name], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.on('exit', () => resolve(out.trim()));
  });
  assert.strictEqual(await child('{ wait: false }'), 'EAGAIN'); // EWOULDBLOCK is EAGAIN on Linux
  assert.strictEqual(await child('{ timeoutMs: 100 }'), 'ETIMEDOUT');
  await a.release();
  await a.release(); // a second release does nothing
  assert.ok(!fs.existsSync(name));
  assert.strictEqual(await child('{ wait: false }'), 'acquired');
});

test('a dead holder\'s lock is broken and counted', async (t) => {
  const dir = tempDir(t);
  const name = path.join(dir, 'app.lock');
  const p = spawn(process.execPath, ['-e', `
    const { Lock } = require(${JSON.stringify(require.resolve('../lib/index.js'))});
    Lock.acquire(process.argv[1]).then(() => { console.log('held'); setInterval(() => {}, 1000); });
  `, name], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => p.stdout.once('data', r));
  p.kill('SIGKILL');
  await new Promise((r) => p.once('exit', r));
  const l = await fsafe.Lock.acquire(name, { timeoutMs: 5000 });
  assert.strictEqual(l.broken, 1);
  await l.release();
});

test('Lock errors follow fs', async (t) => {
  const dir = tempDir(t);
  const name = path.join(dir, 'no', 'app.lock');
  await assert.rejects(fsafe.Lock.acquire(name, { wait: false }),
    { code: 'ENOENT', errno: -2, path: name });
  fs.mkdirSync(path.join(dir, 'd'));
  await assert.rejects(fsafe.Lock.acquire(path.join(dir, 'd'), { wait: false }),
    { code: 'EISDIR' });
});
