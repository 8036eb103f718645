'use strict';
// 1,000 concurrent writeFileAtomic calls all land, and the event loop keeps
// running meanwhile: a 10 ms timer fires within 50 ms of schedule while
// the writes are in flight.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { tempDir, fsafe } = require('./helpers');

test('1,000 concurrent writes land while the loop stays responsive', async (t) => {
  const dir = tempDir(t);
  const n = 1000, period = 10, rounds = 3;
  let worst = 0, ticks = 0, last = 0, timing = false;
  const timer = setInterval(() => {
    const now = performance.now();
    if (timing) {
      worst = Math.max(worst, now - last - period);
      ticks++;
    }
    last = now;
  }, period);
  // A first, untimed burst: the first calls run before V8 has compiled
  // them, which is the test's start-up, not the binding's load.
  await Promise.all(Array.from({ length: 100 }, (_, i) =>
    fsafe.writeFileAtomic(path.join(dir, `f${i}`), 'warm-up')));
  const worstOf = [];
  let elapsed = 0;
  try {
    for (let round = 0; round < rounds; round++) {
      const started = performance.now();
      last = started;
      worst = 0;
      ticks = 0;
      timing = true;
      await Promise.all(Array.from({ length: n }, (_, i) =>
        fsafe.writeFileAtomic(path.join(dir, `f${i}`), `round ${round} file ${i}`)));
      timing = false;
      elapsed += performance.now() - started;
      assert.ok(ticks >= 1, 'the timer never fired during the writes');
      worstOf.push(worst);
      // Read back untimed: 1,000 synchronous reads are the test's load.
      for (let i = 0; i < n; i++)
        assert.strictEqual(fs.readFileSync(path.join(dir, `f${i}`), 'utf8'),
          `round ${round} file ${i}`);
    }
  } finally {
    clearInterval(timer);
  }
  t.diagnostic(`${rounds} x ${n} writes in ${elapsed.toFixed(0)} ms; worst ` +
    `timer lateness per round: ${worstOf.map((w) => w.toFixed(1)).join(', ')} ms`);
  // On a machine shared with other work the scheduler alone can delay a
  // tick; a loop blocked by the writes is late in every round, by far
  // more (seconds for 1,000 synced writes), so the best round decides.
  assert.ok(Math.min(...worstOf) <= 50,
    `the timer fired late in every round: ${worstOf.map((w) => w.toFixed(1))} ms`);
  assert.strictEqual(fs.readdirSync(dir).length, n);
});
