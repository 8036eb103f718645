'use strict';
// writeFileAtomic / writeFileAtomicSync: write-file-atomic's calls, with
// libfsafe's guarantees (the directory is synced too).
const native = require('./native');
const { fsafeError } = require('./errors');
const o = require('./options');

async function writeAsync(filename, data, options) {
  const opts = o.normalise(options);
  const file = o.toPath(filename);
  const bytes = o.toBytes(data, opts.encoding);
  if (o.needsStat(opts)) o.checkStat(opts, await o.statOrNullAsync(file), file);
  try {
    await native.submit(file, bytes, o.flagsOf(opts), opts.mode || 0);
  } catch (r) {
    throw r instanceof Error ? r : fsafeError(r, file);
  }
}

// writeFileAtomic(filename, data[, options][, callback]) -> Promise<void>;
// with a callback, the callback gets the error (or null) and the promise
// is still returned.
function writeFileAtomic(filename, data, options, callback) {
  if (typeof options === 'function') {
    callback = options;
    options = undefined;
  }
  const p = writeAsync(filename, data, options);
  if (typeof callback === 'function')
    p.then(() => callback(null), (e) => callback(e));
  return p;
}

function writeFileAtomicSync(filename, data, options) {
  const opts = o.normalise(options);
  const file = o.toPath(filename);
  const bytes = o.toBytes(data, opts.encoding);
  if (o.needsStat(opts)) o.checkStat(opts, o.statOrNull(file), file);
  const r = native.writeSync(file, bytes, o.flagsOf(opts), opts.mode || 0);
  if (r) throw fsafeError(r, file);
}

module.exports = { writeFileAtomic, writeFileAtomicSync };
