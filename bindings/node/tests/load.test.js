'use strict';
// 1,000 concurrent writeFileAtomic calls all land, and the event loop keeps
// running meanwhile: a 10 ms timer never fires more than 50 ms late.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { tempDir, fsafe } = require('./helpers');

test('1,000 concurrent writes land while the loop stays responsive', async (t) => {
  const dir = tempDir(t);
  const n = 1000, period = 10;
  let worst = 0, ticks = 0, last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - period);
    last = now;
    ticks++;
  }, period);
  const started = performance.now();
  try {
    // Several rounds, so the timer runs through the whole burst.
    for (let round = 0; round < 3; round++) {
      await Promise.all(Array.from({ length: n }, (_, i) =>
        fsafe.writeFileAtomic(path.join(dir, `f${i}`), `round ${round} file ${i}`)));
      for (let i = 0; i < n; i++)
        assert.strictEqual(fs.readFileSync(path.join(dir, `f${i}`), 'utf8'),
          `round ${round} file ${i}`);
    }
  } finally {
    clearInterval(timer);
  }
  const elapsed = performance.now() - started;
  t.diagnostic(`3 x ${n} writes in ${elapsed.toFixed(0)} ms, ${ticks} ticks, ` +
    `worst lateness ${worst.toFixed(1)} ms`);
  assert.ok(worst <= 50, `the timer fired ${worst.toFixed(1)} ms late`);
  assert.strictEqual(fs.readdirSync(dir).length, n);
});
