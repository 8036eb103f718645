'use strict';
// libfsafe's results as Node's fs reports failures: an Error with `code`
// ('ENOENT'), `errno` (negative), `syscall` (the step that failed) and
// `path`; fsafe's own two codes get ERR_FSAFE_* names.
const util = require('node:util');
const native = require('./native');

const FSAFE_CODES = new Map([
  [-native.flags.ENOTDURABLE, 'ERR_FSAFE_NOT_DURABLE'],
  [-native.flags.ECONFLICT, 'ERR_FSAFE_CONFLICT'],
]);

function codeName(n) {
  if (FSAFE_CODES.has(n)) return FSAFE_CODES.get(n);
  try {
    return util.getSystemErrorName(n);
  } catch {
    return `E${-n}`;
  }
}

// r: the native result { code, errno, message, step, published }.
function fsafeError(r, path) {
  const code = codeName(r.code);
  const where = r.step ? `, ${r.step}` : '';
  const what = path === undefined ? '' : ` '${path}'`;
  const err = new Error(`${code}: ${r.message}${where}${what}`);
  err.code = code;
  err.errno = FSAFE_CODES.has(r.code) ? r.code : r.errno;
  if (r.errno !== r.code) err.sysErrno = r.errno;
  if (r.step) err.syscall = r.step;
  if (path !== undefined) err.path = path;
  err.published = r.published;
  return err;
}

// An option write-file-atomic users pass that fsafe cannot honour here:
// refused, never silently ignored.
function unsupported(message) {
  const err = new Error(message);
  err.code = 'ERR_FSAFE_UNSUPPORTED';
  return err;
}

function abortError(signal, removed) {
  const err = new Error('The operation was aborted', { cause: signal.reason });
  err.name = 'AbortError';
  err.code = 'ABORT_ERR';
  if (removed) err.removed = removed;
  return err;
}

module.exports = { fsafeError, unsupported, abortError };
