'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');
const { pipeline } = require('node:stream/promises');
const { Readable } = require('node:stream');
const { tempDir, fsafe } = require('./helpers');

test('the stream commits on finish, not before', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'w');
  fs.writeFileSync(f, 'old');
  const s = fsafe.createAtomicWriteStream(f);
  s.write('new ');
  s.write(Buffer.from('content'));
  await new Promise((r) => s.write('', r));
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'old');
  s.end();
  await once(s, 'finish');
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'new content');
  assert.deepStrictEqual(fs.readdirSync(dir), ['w']);
});

test('pipeline into the stream publishes the whole content', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'p');
  const chunks = Array.from({ length: 100 }, (_, i) => `line ${i}\n`);
  await pipeline(Readable.from(chunks), fsafe.createAtomicWriteStream(f, { mode: 0o600 }));
  assert.strictEqual(fs.readFileSync(f, 'utf8'), chunks.join(''));
  assert.strictEqual(fs.statSync(f).mode & 0o777, 0o600);
});

test('destroy or an error aborts: target untouched, no stage left', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'd');
  fs.writeFileSync(f, 'old');
  const s = fsafe.createAtomicWriteStream(f);
  s.write('partial');
  s.on('error', () => {});
  const closed = new Promise((resolve) => s.on('close', resolve));
  s.destroy(new Error('boom'));
  await closed;
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'old');
  assert.deepStrictEqual(fs.readdirSync(dir), ['d']);
  await assert.rejects(pipeline(Readable.from((async function* () {
    yield 'a';
    throw new Error('source failed');
  })()), fsafe.createAtomicWriteStream(f)), /source failed/);
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'old');
  assert.deepStrictEqual(fs.readdirSync(dir), ['d']);
});

test('a stream that cannot open errors as fs does', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'no', 'x');
  const s = fsafe.createAtomicWriteStream(f);
  const [err] = await once(s, 'error');
  assert.strictEqual(err.code, 'ENOENT');
  assert.strictEqual(err.path, f);
});
