'use strict';
// Lock: an exclusive lock between processes with an owner record, broken
// only on proof that its holder died (fsafe/lock.h).
const native = require('./native');
const { fsafeError } = require('./errors');
const { toPath, typeError } = require('./options');

class Lock {
  constructor(handle, path) {
    this._handle = handle;
    this.path = path;
  }

  // Lock.acquire(path, { timeoutMs, wait, kernel }) -> Promise<Lock>.
  // wait: false tries once (EWOULDBLOCK when held); timeoutMs bounds the
  // wait (ETIMEDOUT); no timeout waits without limit, on a pool thread.
  static async acquire(path, { timeoutMs, wait = true, kernel = false } = {}) {
    const file = toPath(path);
    if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0))
      throw typeError('timeoutMs must be a number > 0');
    let flags = 0;
    if (!wait) flags |= native.flags.LOCK_NO_WAIT;
    if (kernel) flags |= native.flags.LOCK_KERNEL;
    try {
      return new Lock(await native.lockAcquire(file, flags, timeoutMs || 0), file);
    } catch (r) {
      throw r instanceof Error ? r : fsafeError(r, file);
    }
  }

  // Dead owners' locks this acquisition broke.
  get broken() {
    return this._handle ? native.lockBroken(this._handle) : 0;
  }

  // Release (once; later calls resolve at once). ESTALE: the lock was
  // taken from us while held.
  async release() {
    const h = this._handle;
    if (!h) return;
    this._handle = null;
    try {
      await native.lockRelease(h);
    } catch (r) {
      throw r instanceof Error ? r : fsafeError(r, this.path);
    }
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.release();
  }
}

module.exports = { Lock };
