'use strict';
// Inbox: a directory inbox; each delivery durable, each message taken by
// one consumer, the claims of a dead consumer returned by recover()
// (fsafe/inbox.h).
const native = require('./native');
const { fsafeError } = require('./errors');
const { serial, closedError } = require('./serial');
const { toPath, toBytes, typeError } = require('./options');

const DELIVER = 1, CONSUMER = 2, TAKE = 3, WAIT = 4, ACK = 5, RELEASE = 6,
  RELEASE_ALL = 7, CONSUMER_CLOSE = 8, RECOVER = 9;

class Inbox {
  constructor(handle, path) {
    this._handle = handle;
    this.path = path;
    this._last = Promise.resolve(); // one call at a time, consumers' too
    this._consumers = new Set();
  }

  // Inbox.open(path, { create, keepDone }) -> Promise<Inbox>.
  static async open(path, { create = false, keepDone = false } = {}) {
    const dir = toPath(path);
    const flags = (create ? native.flags.INBOX_CREATE : 0) |
      (keepDone ? native.flags.INBOX_KEEP_DONE : 0);
    try {
      return new Inbox(await native.inboxOpen(dir, flags), dir);
    } catch (r) {
      throw r instanceof Error ? r : fsafeError(r, dir);
    }
  }

  // Runs fn after the inbox's calls before it; `handle` must be open.
  _serial(fn) {
    return serial(this, 'closed', fn);
  }

  // deliver(data) -> the message's id, once durable.
  deliver(data) {
    const buf = toBytes(data);
    return this._serial(() => native.inboxOp(this._handle, DELIVER, buf));
  }

  // consumer(name) -> Promise<Consumer>: without a name, a process
  // consumer (its claims return to the inbox when it closes or dies);
  // with one, a named consumer that keeps its claims across processes.
  async consumer(name) {
    if (name !== undefined && typeof name !== 'string')
      throw typeError('name must be a string');
    const h = await this._serial(() =>
      native.inboxOp(this._handle, CONSUMER, name === undefined ? null : name));
    const c = new Consumer(this, h);
    this._consumers.add(c);
    return c;
  }

  // recover({ stageAgeMs }) -> { returned, consumers, swept, unjudged }.
  recover({ stageAgeMs = 3600e3 } = {}) {
    return this._serial(() => native.inboxOp(this._handle, RECOVER, stageAgeMs));
  }

  // Close its consumers, then the inbox; closing twice does nothing.
  async close() {
    if (!this._handle) return;
    for (const c of [...this._consumers]) await c.close();
    await this._last;
    const h = this._handle;
    this._handle = null;
    if (h) native.inboxClose(h);
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.close();
  }
}

class Consumer {
  constructor(inbox, handle) {
    this._inbox = inbox;
    this._handle = handle;
    this._waiting = Promise.resolve();
  }

  _op(op, arg) {
    return this._inbox._serial(() => {
      if (!this._handle) throw closedError(this._inbox.path, 'closed');
      return native.consumerOp(this._handle, op, arg);
    });
  }

  // take() -> { id, seq, data } of the oldest message this consumer won,
  // or undefined when there is none.
  async take() {
    try {
      return await this._op(TAKE);
    } catch (e) {
      if (e.code === 'EAGAIN') return undefined;
      throw e;
    }
  }

  // wait(timeoutMs) -> true when there may be something to take, false
  // after timeoutMs. It waits on a pool thread, outside the inbox's
  // order, so deliveries go on meanwhile.
  async wait(timeoutMs) {
    if (!(Number.isFinite(timeoutMs) && timeoutMs >= 0))
      throw typeError('timeoutMs must be a finite number >= 0');
    if (!this._handle) throw closedError(this._inbox.path, 'closed');
    const p = native.consumerOp(this._handle, WAIT, timeoutMs);
    this._waiting = p.catch(() => {});
    try {
      await p;
      return true;
    } catch (r) {
      if (r.code === -110 /* ETIMEDOUT */) return false;
      throw r instanceof Error ? r : fsafeError(r, this._inbox.path);
    }
  }

  ack(message) {
    return this._op(ACK, typeof message === 'string' ? message : message.id);
  }

  release(message) {
    return this._op(RELEASE, typeof message === 'string' ? message : message.id);
  }

  // releaseAll() -> the number of claims returned to the inbox.
  releaseAll() {
    return this._op(RELEASE_ALL);
  }

  // Close after a wait in progress: a process consumer's claims return.
  async close() {
    if (!this._handle) return;
    await this._waiting;
    const h = this._handle;
    if (!h) return;
    try {
      await this._op(CONSUMER_CLOSE);
    } finally {
      this._handle = null;
      this._inbox._consumers.delete(this);
    }
  }

  async [Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose')]() {
    await this.close();
  }
}

module.exports = { Inbox, Consumer };
