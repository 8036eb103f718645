'use strict';
// Shared by the suites: a fresh directory per test, removed afterwards.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsafe-node-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const STAGE = '.fsafe-0123456789abcdef01234567.tmp';

module.exports = { tempDir, STAGE, fsafe: require('../lib/index.js') };
