'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { tempDir, fsafe } = require('./helpers');

test('writeFileAtomic round-trips strings, Buffers and typed arrays', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'a');
  await fsafe.writeFileAtomic(f, 'old');
  await fsafe.writeFileAtomic(f, 'new text');
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'new text');
  await fsafe.writeFileAtomic(f, Buffer.from([1, 2, 3]));
  assert.deepStrictEqual([...fs.readFileSync(f)], [1, 2, 3]);
  await fsafe.writeFileAtomic(f, new Uint16Array([0x0201]).subarray(0, 1));
  assert.deepStrictEqual([...fs.readFileSync(f)], [1, 2]);
  await fsafe.writeFileAtomic(f, '');
  assert.strictEqual(fs.readFileSync(f).length, 0);
});

test('writeFileAtomicSync round-trips and leaves no stage', (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'b');
  fsafe.writeFileAtomicSync(f, 'one');
  fsafe.writeFileAtomicSync(f, 'two');
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'two');
  assert.deepStrictEqual(fs.readdirSync(dir), ['b']);
});

test('a callback gets null or the error, and the promise is returned', async (t) => {
  const dir = tempDir(t);
  const got = await new Promise((resolve) =>
    fsafe.writeFileAtomic(path.join(dir, 'c'), 'x', resolve));
  assert.strictEqual(got, null);
  const err = await new Promise((resolve) =>
    fsafe.writeFileAtomic(path.join(dir, 'no', 'c'), 'x', {}, resolve)
      .catch(() => {}));
  assert.strictEqual(err.code, 'ENOENT');
});

test('errors follow fs: code, negative errno, syscall (the step), path', async (t) => {
  const dir = tempDir(t);
  const missing = path.join(dir, 'no', 'such');
  for (const call of [
    () => fsafe.writeFileAtomic(missing, 'x'),
    async () => fsafe.writeFileAtomicSync(missing, 'x'),
  ]) {
    await assert.rejects(call, (e) => {
      assert.ok(e instanceof Error);
      assert.strictEqual(e.code, 'ENOENT');
      assert.strictEqual(e.errno, -2);
      assert.strictEqual(typeof e.syscall, 'string');
      assert.strictEqual(e.path, missing);
      assert.match(e.message, /^ENOENT: .*no such/i);
      assert.strictEqual(e.published, false);
      return true;
    });
  }
  await assert.rejects(fsafe.writeFileAtomic(dir, 'x'),
    { code: 'EISDIR', errno: -21, path: dir });
  assert.throws(() => fsafe.writeFileAtomicSync(dir, 'x'), { code: 'EISDIR' });
});

test('fsync: false and encoding are honoured', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'e');
  await fsafe.writeFileAtomic(f, '68656c6c6f', { encoding: 'hex', fsync: false });
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'hello');
  fsafe.writeFileAtomicSync(f, 'aGk=', 'base64');
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'hi');
});

test('mode sets a new file\'s mode; a different mode for an existing one is refused', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'm');
  await fsafe.writeFileAtomic(f, 'x', { mode: 0o600 });
  assert.strictEqual(fs.statSync(f).mode & 0o777, 0o600);
  await fsafe.writeFileAtomic(f, 'y', { mode: 0o600 });
  await assert.rejects(fsafe.writeFileAtomic(f, 'z', { mode: 0o644 }),
    { code: 'ERR_FSAFE_UNSUPPORTED' });
  assert.throws(() => fsafe.writeFileAtomicSync(f, 'z', { mode: 0o640 }),
    { code: 'ERR_FSAFE_UNSUPPORTED' });
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'y');
  // Without `mode` the existing mode is kept, as write-file-atomic does.
  fs.chmodSync(f, 0o640);
  fsafe.writeFileAtomicSync(f, 'w');
  assert.strictEqual(fs.statSync(f).mode & 0o777, 0o640);
});

test('chown is honoured where fsafe gives that owner, refused otherwise', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 'o');
  const me = { uid: process.geteuid(), gid: process.getegid() };
  await fsafe.writeFileAtomic(f, 'x', { chown: me });
  fsafe.writeFileAtomicSync(f, 'y', { chown: me });
  const other = { uid: me.uid + 1, gid: me.gid };
  await assert.rejects(fsafe.writeFileAtomic(f, 'z', { chown: other }),
    { code: 'ERR_FSAFE_UNSUPPORTED' });
  assert.strictEqual(fs.readFileSync(f, 'utf8'), 'y');
});

test('tmpfileCreated and bad arguments are refused, not ignored', async (t) => {
  const dir = tempDir(t);
  const f = path.join(dir, 't');
  await assert.rejects(fsafe.writeFileAtomic(f, 'x', { tmpfileCreated() {} }),
    { code: 'ERR_FSAFE_UNSUPPORTED' });
  await assert.rejects(fsafe.writeFileAtomic(f, 42), { code: 'ERR_INVALID_ARG_TYPE' });
  await assert.rejects(fsafe.writeFileAtomic('', 'x'), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => fsafe.writeFileAtomicSync(f, 'x', { mode: -1 }),
    { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => fsafe.writeFileAtomicSync(f, 'x', { mode: 0 }),
    { code: 'ERR_FSAFE_UNSUPPORTED' });
  assert.ok(!fs.existsSync(f));
});

test('fsync: false makes no sync call; the default syncs file and directory', async (t) => {
  const { spawnSync } = require('node:child_process');
  if (spawnSync('strace', ['-V']).error) {
    t.skip('SKIP: strace is not installed (apt-get install strace)');
    return;
  }
  const dir = tempDir(t);
  const syncs = (options) => {
    const log = path.join(dir, 'strace.log');
    const r = spawnSync('strace', ['-f', '-qq', '-o', log,
      '-e', 'trace=fsync,fdatasync,syncfs,sync_file_range,pwritev2', process.execPath, '-e', `
      const f = require(${JSON.stringify(require.resolve('../lib/index.js'))});
      f.writeFileAtomicSync(${JSON.stringify(path.join(dir, 's'))}, 'x', ${options});
      f.writeFileAtomic(${JSON.stringify(path.join(dir, 'a'))}, 'y', ${options});
    `], { stdio: 'inherit' });
    assert.strictEqual(r.status, 0);
    // A write that syncs itself (pwritev2 with RWF_DSYNC) counts as a sync.
    return fs.readFileSync(log, 'utf8').split('\n')
      .filter((l) => /sync/.test(l) || /RWF_D?SYNC/.test(l)).length;
  };
  assert.strictEqual(syncs('{ fsync: false }'), 0);
  // The sync write syncs its file and its directory; the async one at
  // least its directory (its data sync may go through io_uring).
  assert.ok(syncs('{}') >= 3, 'the default write does not sync');
});
