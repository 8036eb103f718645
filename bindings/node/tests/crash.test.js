'use strict';
// A writer SIGKILLed mid-write: the target holds the old or the new
// content, and the stage it left is one sweepAtomicStaging removes.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { tempDir, fsafe } = require('./helpers');

const SIZE = 8 << 20;
const CHILD = `
  const fsafe = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'index.js'))});
  const big = Buffer.alloc(${SIZE}, 'N');
  process.stdout.write('ready\\n');
  for (;;) fsafe.writeFileAtomicSync(process.argv[1], big);
`;

// Resolves once a stage shows in `dir`, or after `ms` without one.
function stageSeen(dir, ms) {
  const until = Date.now() + ms;
  return new Promise((resolve) => {
    const look = () => {
      if (fs.readdirSync(dir).some(fsafe.isAtomicStagingName)) return resolve(true);
      if (Date.now() > until) return resolve(false);
      setImmediate(look);
    };
    look();
  });
}

test('SIGKILL mid-write leaves old or new and a sweepable stage', async (t) => {
  const dir = tempDir(t);
  const target = path.join(dir, 'state');
  const OLD = Buffer.alloc(4096, 'O');
  let caught = 0;
  for (let attempt = 0; attempt < 5 && caught < 2; attempt++) {
    fs.writeFileSync(target, OLD);
    const child = spawn(process.execPath, ['-e', CHILD, target],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((r) => child.stdout.once('data', r));
    const seen = await stageSeen(dir, 10e3);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    assert.ok(seen, 'the child never staged a write');
    const got = fs.readFileSync(target);
    const isOld = got.equals(OLD);
    const isNew = got.length === SIZE && got.every((b) => b === 0x4e);
    assert.ok(isOld || isNew, `torn target: ${got.length} bytes`);
    const left = fs.readdirSync(dir).filter(fsafe.isAtomicStagingName);
    if (left.length === 0) continue; // killed between stage and rename
    caught++;
    const removed = await fsafe.sweepAtomicStaging({ directory: dir, olderThanMs: 0 });
    assert.deepStrictEqual(removed.sort(), left.sort());
    assert.deepStrictEqual(fs.readdirSync(dir), ['state']);
  }
  assert.ok(caught > 0, 'no kill landed while a stage existed');
});
