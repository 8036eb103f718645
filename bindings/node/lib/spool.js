'use strict';
// Spool: an append-only, checksummed record queue that repairs a torn
// tail by itself (fsafe/spool.h). Records are numbered from 1; an append
// is durable when its promise resolves.
const native = require('./native');
const { fsafeError } = require('./errors');
const { serial } = require('./serial');
const { toPath, toBytes, typeError } = require('./options');

const APPEND = 1, READER = 2, ACK = 4, STAT = 5;

const wrap = (path) => (r) => {
  throw r instanceof Error ? r : fsafeError(r, path);
};

class Spool {
  constructor(handle, path) {
    this._handle = handle;
    this.path = path;
    this._last = Promise.resolve(); // one call at a time, in order
    this._readers = new Set();
  }

  // Spool.open(path, { create, readOnly }) -> Promise<Spool>. Any number
  // of handles and processes append at once beside one reader that acks.
  static async open(path, { create = false, readOnly = false } = {}) {
    const dir = toPath(path);
    const flags = (create ? native.flags.SPOOL_CREATE : 0) |
      (readOnly ? native.flags.SPOOL_RDONLY : 0);
    return new Spool(await native.spoolOpen(dir, flags).catch(wrap(dir)), dir);
  }

  _call(fn) {
    return serial(this, 'spool closed', fn);
  }

  // append(...records) -> the first record's number.
  append(...records) {
    if (records.length === 0)
      return Promise.reject(typeError('append needs at least one record'));
    const bufs = records.map((r) => toBytes(r));
    return this._call((h) => native.spoolOp(h, APPEND, bufs));
  }

  // ack(seq): records up to seq are consumed, durably.
  ack(seq) {
    if (!Number.isSafeInteger(seq) || seq < 0)
      return Promise.reject(typeError('seq must be an integer >= 0'));
    return this._call((h) => native.spoolOp(h, ACK, seq));
  }

  // stat() -> { cursor, firstSeq, nextSeq, segments, bytes, lost, ... }.
  stat() {
    return this._call((h) => native.spoolOp(h, STAT));
  }

  // for await (const [seq, data] of spool.read(from)): from the cursor
  // when `from` is omitted, up to the last durable record.
  async *read(from) {
    if (from !== undefined && !(Number.isSafeInteger(from) && from >= 0))
      throw typeError('from must be an integer >= 0');
    const reader = await this._call((h) =>
      native.spoolOp(h, READER, from === undefined ? -1 : from));
    this._readers.add(reader);
    try {
      for (;;) {
        const batch = await this._call((h) => native.spoolNext(h, reader));
        if (batch.length === 0) return;
        yield* batch;
      }
    } finally {
      this._readers.delete(reader);
      native.spoolReaderClose(reader);
    }
  }

  // Close after the calls in progress, its open readers first.
  async close() {
    const h = this._handle;
    if (!h) return;
    await this._last;
    this._handle = null;
    for (const r of this._readers) native.spoolReaderClose(r);
    this._readers.clear();
    native.spoolClose(h);
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.close();
  }
}

module.exports = { Spool };
