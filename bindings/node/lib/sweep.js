'use strict';
// The staging-name contract from Node: recognise and remove the stages
// crashed writers left behind.
const nodePath = require('node:path');
const native = require('./native');
const { fsafeError, abortError } = require('./errors');
const { toPath, typeError } = require('./options');

function isAtomicStagingName(name) {
  return typeof name === 'string' && native.isStagingName(name);
}

// sweepAtomicStaging({ directory, olderThanMs, signal }) -> Promise<string[]>
// of the names removed. An abort rejects with an AbortError whose
// `removed` lists what was removed before it took effect.
async function sweepAtomicStaging({ directory, olderThanMs, signal } = {}) {
  const dir = toPath(directory);
  if (typeof olderThanMs !== 'number' || !(olderThanMs >= 0) ||
      !Number.isFinite(olderThanMs))
    throw typeError('olderThanMs must be a finite number >= 0');
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw typeError('signal must be an AbortSignal');
  if (signal && signal.aborted) throw abortError(signal, []);
  const token = native.cancelToken();
  const onAbort = () => native.cancel(token);
  signal?.addEventListener('abort', onAbort, { once: true });
  let r;
  try {
    r = await native.sweep(dir, Math.floor(olderThanMs), token);
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (!r.error) return r.names;
  if (signal && signal.aborted) throw abortError(signal, r.names);
  const err = fsafeError(r.error, nodePath.resolve(dir));
  err.removed = r.names;
  throw err;
}

module.exports = { isAtomicStagingName, sweepAtomicStaging };
