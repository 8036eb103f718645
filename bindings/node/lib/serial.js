'use strict';
// One call at a time per handle, in order, as the library asks of its
// store, spool, inbox and checkpoint handles.
const { fsafeError } = require('./errors');

// The EBADF of a handle used after close(); `step` says which one.
const closedError = (path, step) => fsafeError({ code: -9, errno: -9,
  message: 'Bad file descriptor', step, published: false }, path);

// Runs fn(owner._handle) once the calls queued on `owner` (its _last)
// before it have settled, if the handle is still open; a native result
// it fails with becomes an Error with owner.path.
function serial(owner, step, fn) {
  const run = async () => {
    if (!owner._handle) throw closedError(owner.path, step);
    try {
      return await fn(owner._handle);
    } catch (r) {
      throw r instanceof Error ? r : fsafeError(r, owner.path);
    }
  };
  const p = owner._last.then(run);
  owner._last = p.catch(() => {});
  return p;
}

module.exports = { serial, closedError };
