'use strict';
// Store: the keyed state store (fsafe/store.h). Keys and values are
// Buffers (a string key or value is UTF-8); every record carries a
// version that counts up by one per change.
const native = require('./native');
const { fsafeError } = require('./errors');
const { serial } = require('./serial');
const { toPath, toBytes, typeError } = require('./options');

const PUT = 1, GET = 2, DELETE = 3, LIST = 4;

const toKey = (k) => (typeof k === 'string' ? Buffer.from(k) : toBytes(k));

class Store {
  constructor(handle, path) {
    this._handle = handle;
    this.path = path;
    // The library takes one call per handle at a time: each waits for
    // the one before.
    this._last = Promise.resolve();
  }

  // Store.open(path, { create, mode, fsync, lockTimeoutMs, kernelLock }).
  static async open(path, { create = false, mode = 0, fsync = true,
    lockTimeoutMs = 0, kernelLock = false } = {}) {
    const dir = toPath(path);
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)
      throw typeError('mode must be an integer in 0..0o7777');
    const flags = (create ? native.flags.STORE_CREATE : 0) |
      (kernelLock ? native.flags.STORE_LOCK_KERNEL : 0);
    const wflags = fsync ? 0 : native.flags.NO_SYNC;
    try {
      return new Store(await native.storeOpen(dir, flags, wflags, mode,
        lockTimeoutMs), dir);
    } catch (r) {
      throw r instanceof Error ? r : fsafeError(r, dir);
    }
  }

  _call(op, key, value, expected) {
    return serial(this, 'store closed',
      (h) => native.storeOp(h, op, key, value, expected));
  }

  // put(key, value) -> the new version.
  put(key, value) {
    return this._call(PUT, toKey(key), toBytes(value), -1);
  }

  // putIf(key, value, expected) -> the new version, or ERR_FSAFE_CONFLICT
  // when the key is not at version `expected` (0: must not exist).
  putIf(key, value, expected) {
    if (!Number.isSafeInteger(expected) || expected < 0)
      return Promise.reject(typeError('expected must be a version >= 0'));
    return this._call(PUT, toKey(key), toBytes(value), expected);
  }

  // get(key) -> { value, version }, or undefined when the key is absent.
  async get(key) {
    try {
      return await this._call(GET, toKey(key));
    } catch (e) {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    }
  }

  // delete(key) -> true, or false when the key was absent.
  async delete(key) {
    try {
      await this._call(DELETE, toKey(key));
      return true;
    } catch (e) {
      if (e.code === 'ENOENT') return false;
      throw e;
    }
  }

  // entries() -> [{ key: Buffer, version, length }], sorted by key.
  entries() {
    return this._call(LIST);
  }

  // update(key, fn): fn(old Buffer | undefined) returns the new value, or
  // undefined to keep it; retried on a conflicting change, so no update
  // is lost. -> the resulting version.
  async update(key, fn) {
    for (;;) {
      const cur = await this.get(key);
      const next = await fn(cur ? cur.value : undefined);
      if (next === undefined) return cur ? cur.version : 0;
      try {
        return await this.putIf(key, next, cur ? cur.version : 0);
      } catch (e) {
        if (e.code !== 'ERR_FSAFE_CONFLICT') throw e;
      }
    }
  }

  // Close after the calls in progress; closing twice does nothing.
  async close() {
    const h = this._handle;
    if (!h) return;
    await this._last;
    this._handle = null;
    native.storeClose(h);
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.close();
  }
}

module.exports = { Store };
