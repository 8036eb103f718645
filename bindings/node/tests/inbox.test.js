'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { tempDir, fsafe } = require('./helpers');

test('Inbox delivers, consumers take once, ack and release', async (t) => {
  const dir = path.join(tempDir(t), 'jobs');
  await assert.rejects(fsafe.Inbox.open(dir), { code: 'ENOENT', path: dir });
  const ib = await fsafe.Inbox.open(dir, { create: true });
  const id1 = await ib.deliver('first');
  const id2 = await ib.deliver(Buffer.from('second'));
  assert.strictEqual(id1.length, 60); // FSAFE_INBOX_ID_LEN
  const a = await ib.consumer();
  const b = await ib.consumer('worker-1');
  // Each message goes to one consumer, whole.
  const m1 = await a.take();
  const m2 = await b.take();
  const sent = new Map([[id1, 'first'], [id2, 'second']]);
  assert.strictEqual(sent.get(m1.id), m1.data.toString());
  assert.strictEqual(sent.get(m2.id), m2.data.toString());
  assert.notStrictEqual(m1.id, m2.id);
  assert.strictEqual(await a.take(), undefined);
  await a.ack(m1);
  await assert.rejects(a.ack(m1), { code: 'ENOENT' });
  await b.release(m2);
  assert.strictEqual((await a.take()).id, m2.id);
  // A process consumer's claim returns to the inbox when it closes.
  await a.close();
  assert.strictEqual((await b.take()).id, m2.id);
  assert.strictEqual(await b.releaseAll(), 1);
  await ib.close();
  await ib.close();
  await assert.rejects(ib.deliver('x'), { code: 'EBADF' });
});

test('wait() times out, and wakes for a delivery meanwhile', async (t) => {
  const ib = await fsafe.Inbox.open(tempDir(t), { create: true });
  const c = await ib.consumer();
  assert.strictEqual(await c.wait(50), false);
  const waiting = c.wait(10e3);
  await ib.deliver('ping');
  assert.strictEqual(await waiting, true);
  assert.strictEqual((await c.take()).data.toString(), 'ping');
  await ib.close();
});

test('recover returns a SIGKILLed consumer\'s claim', async (t) => {
  const dir = tempDir(t);
  const ib = await fsafe.Inbox.open(dir, { create: true });
  const id = await ib.deliver('job');
  const child = spawn(process.execPath, ['-e', `
    const { Inbox } = require(${JSON.stringify(require.resolve('../lib/index.js'))});
    (async () => {
      const ib = await Inbox.open(process.argv[1]);
      const c = await ib.consumer();
      const m = await c.take();
      console.log(m.id);
      setInterval(() => {}, 1000);
    })();
  `, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const taken = await new Promise((r) => child.stdout.once('data', (d) => r(String(d).trim())));
  assert.strictEqual(taken, id);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const c = await ib.consumer();
  assert.strictEqual(await c.take(), undefined);
  const rec = await ib.recover();
  assert.strictEqual(rec.returned, 1);
  assert.strictEqual((await c.take()).id, id);
  await ib.close();
  assert.ok(fs.existsSync(dir));
});
