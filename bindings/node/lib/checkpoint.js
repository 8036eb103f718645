'use strict';
// Checkpoint: a set of files saved and loaded as one unit; after a crash
// at any point a load finds the old set or the new one, every byte
// checked (fsafe/checkpoint.h).
const native = require('./native');
const { fsafeError } = require('./errors');
const { serial } = require('./serial');
const { toPath, toBytes, typeError } = require('./options');

const SAVE = 1, LOAD = 2, GENERATIONS = 3, CLOSE = 4;

class Checkpoint {
  constructor(handle, path, unclean) {
    this._handle = handle;
    this.path = path;
    // The previous writer did not close cleanly (it crashed).
    this.wasUnclean = unclean;
    this._last = Promise.resolve(); // one call at a time, in order
  }

  // Checkpoint.open(path, { create, revision, keep, wait, readOnly }):
  // one writer process at a time; wait: false fails with EAGAIN.
  static async open(path, { create = false, revision = '', keep = 0,
    wait = true, readOnly = false } = {}) {
    const dir = toPath(path);
    if (typeof revision !== 'string') throw typeError('revision must be a string');
    if (!Number.isInteger(keep) || keep < 0) throw typeError('keep must be an integer >= 0');
    const f = native.flags;
    const flags = (create ? f.CHECKPOINT_CREATE : 0) |
      (wait ? 0 : f.CHECKPOINT_NO_WAIT) | (readOnly ? f.CHECKPOINT_READ_ONLY : 0);
    try {
      const r = await native.checkpointOpen(dir, flags, keep, revision);
      return new Checkpoint(r.handle, dir, r.unclean);
    } catch (r) {
      throw r instanceof Error ? r : fsafeError(r, dir);
    }
  }

  _call(op, arg, flags) {
    return serial(this, 'checkpoint closed',
      (h) => native.checkpointOp(h, op, arg, flags));
  }

  // save({ name: data, ... } or a Map) -> the new generation's number.
  save(files) {
    const entries = files instanceof Map ? [...files] : Object.entries(files);
    return this._call(SAVE, entries.map(([n, d]) => [String(n), toBytes(d)]));
  }

  // load({ generation, fallback }) -> { generation, revision, time,
  // files: Map name -> Buffer, otherRevision, fellBack }; undefined when
  // nothing was saved yet.
  async load({ generation = 0, fallback = false } = {}) {
    try {
      const s = await this._call(LOAD, generation,
        fallback ? native.flags.CHECKPOINT_FALLBACK : 0);
      return { generation: s.generation, revision: s.revision,
        time: new Date(s.timeMs), files: new Map(s.files),
        otherRevision: s.otherRevision, fellBack: s.fellBack };
    } catch (e) {
      if (e.code === 'ENOENT' && generation === 0) return undefined;
      throw e;
    }
  }

  // generations() -> the loadable generations, oldest first.
  generations() {
    return this._call(GENERATIONS);
  }

  // Clean close (the lock is released); closing twice does nothing.
  async close() {
    if (!this._handle) return;
    await this._call(CLOSE).finally(() => { this._handle = null; });
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.close();
  }
}

module.exports = { Checkpoint };
