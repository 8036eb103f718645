'use strict';
// The managed writer as a Writable stream: bytes go to a locked stage
// beside the target; 'finish' means committed (synced, published, the
// directory synced); an error or destroy() before that aborts, leaving
// the target untouched and no stage behind.
const { Writable } = require('node:stream');
const native = require('./native');
const { fsafeError } = require('./errors');
const o = require('./options');

class AtomicWriteStream extends Writable {
  constructor(filename, options) {
    const opts = o.normalise(options);
    super({ defaultEncoding: opts.encoding || 'utf8', decodeStrings: true });
    this.path = o.toPath(filename);
    this._opts = opts;
    this._handle = null;
    this._busy = Promise.resolve(); // the pool's current operation
  }

  // Every native operation goes through here, so destroy() can wait for
  // the one in flight before aborting the writer it uses.
  _run(fn, cb) {
    const p = fn().then(() => cb(), (r) =>
      cb(r instanceof Error ? r : fsafeError(r, this.path)));
    this._busy = p.catch(() => {});
  }

  _construct(cb) {
    this._run(async () => {
      if (o.needsStat(this._opts))
        o.checkStat(this._opts, await o.statOrNullAsync(this.path), this.path);
      this._handle = await native.writerOpen(this.path,
        o.flagsOf(this._opts), this._opts.mode || 0);
    }, cb);
  }

  _write(chunk, _enc, cb) {
    this._run(() => native.writerWrite(this._handle, chunk), cb);
  }

  _final(cb) {
    this._run(async () => {
      const h = this._handle;
      this._handle = null;
      await native.writerCommit(h);
    }, cb);
  }

  _destroy(err, cb) {
    this._busy.then(() => {
      if (this._handle) native.writerAbort(this._handle);
      this._handle = null;
      cb(err);
    });
  }
}

function createAtomicWriteStream(filename, options) {
  return new AtomicWriteStream(filename, options);
}

module.exports = { AtomicWriteStream, createAtomicWriteStream };
