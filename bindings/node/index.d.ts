// Type declarations of the fsafe Node binding.
import { Writable } from 'node:stream';

/** Options write-file-atomic users pass; see the README for each one. */
export interface WriteFileAtomicOptions {
  /** How a string `data` becomes bytes (default 'utf8'). */
  encoding?: BufferEncoding;
  /** A new file's mode (less the umask); an existing file keeps its own,
   *  and a different mode for one fails with ERR_FSAFE_UNSUPPORTED. */
  mode?: number;
  /** Accepted only where it names the owner fsafe gives the file (the
   *  existing owner, or the caller's for a new file). */
  chown?: { uid: number; gid: number } | false;
  /** false: atomic but not durable (no sync). Default true. */
  fsync?: boolean;
}

export type Data = string | NodeJS.ArrayBufferView | ArrayBuffer;

/** The Error every failed call rejects or throws with. */
export interface FsafeError extends Error {
  /** 'ENOENT', ..., 'ERR_FSAFE_NOT_DURABLE', 'ERR_FSAFE_CONFLICT'. */
  code: string;
  /** Negative, as Node's fs reports it. */
  errno: number;
  /** The step that failed: 'open', 'fsync', 'rename', ... */
  syscall?: string;
  path?: string;
  /** The new content is visible at the target (ERR_FSAFE_NOT_DURABLE). */
  published: boolean;
  /** sweepAtomicStaging: the names removed before the failure or abort. */
  removed?: string[];
}

export function writeFileAtomic(filename: string | URL, data: Data,
  options?: WriteFileAtomicOptions | BufferEncoding,
  callback?: (err: FsafeError | null) => void): Promise<void>;
export function writeFileAtomic(filename: string | URL, data: Data,
  callback: (err: FsafeError | null) => void): Promise<void>;

export function writeFileAtomicSync(filename: string | URL, data: Data,
  options?: WriteFileAtomicOptions | BufferEncoding): void;

/** True exactly for a bare name of the form .fsafe-<24 hex>.tmp. */
export function isAtomicStagingName(name: string): boolean;

export interface SweepOptions {
  directory: string | URL;
  /** Only stages whose mtime is at least this old are removed. */
  olderThanMs: number;
  /** Aborting rejects with an AbortError carrying `removed`. */
  signal?: AbortSignal;
}

/** Removes abandoned stages directly in `directory`; the names removed. */
export function sweepAtomicStaging(options: SweepOptions): Promise<string[]>;

export interface AtomicWriteStreamOptions {
  encoding?: BufferEncoding;
  mode?: number;
  chown?: { uid: number; gid: number } | false;
  fsync?: boolean;
}

/** 'finish' means committed; an error or destroy() before it aborts. */
export class AtomicWriteStream extends Writable {
  constructor(filename: string | URL,
    options?: AtomicWriteStreamOptions | BufferEncoding);
  readonly path: string;
}

export function createAtomicWriteStream(filename: string | URL,
  options?: AtomicWriteStreamOptions | BufferEncoding): AtomicWriteStream;

export interface LockOptions {
  /** Give up with ETIMEDOUT after this long; without it, wait on. */
  timeoutMs?: number;
  /** false: try once, EAGAIN when held. Default true. */
  wait?: boolean;
  /** Kernel (OFD) mode: local filesystems; freed the instant the holder dies. */
  kernel?: boolean;
}

export class Lock {
  static acquire(path: string | URL, options?: LockOptions): Promise<Lock>;
  readonly path: string;
  /** Dead owners' locks this acquisition broke. */
  readonly broken: number;
  /** ESTALE when the lock was taken from this holder meanwhile. */
  release(): Promise<void>;
}

export interface StoreOptions {
  create?: boolean;
  /** Of new records and a created directory; 0: 0666 / 0777. */
  mode?: number;
  /** false: records survive process crashes, not power cuts. */
  fsync?: boolean;
  /** Wait for the store's lock; 0: 30 s. */
  lockTimeoutMs?: number;
  /** No effect: the store's lock is always a kernel lock (keep stores
   *  on a local filesystem). */
  kernelLock?: boolean;
}

export type Key = string | NodeJS.ArrayBufferView | ArrayBuffer;

export class Store {
  static open(path: string | URL, options?: StoreOptions): Promise<Store>;
  readonly path: string;
  put(key: Key, value: Data): Promise<number>;
  /** ERR_FSAFE_CONFLICT unless the key is at `expected` (0: absent). */
  putIf(key: Key, value: Data, expected: number): Promise<number>;
  get(key: Key): Promise<{ value: Buffer; version: number } | undefined>;
  delete(key: Key): Promise<boolean>;
  entries(): Promise<Array<{ key: Buffer; version: number; length: number }>>;
  /** Compare-and-swap loop; `fn` returning undefined keeps the value. */
  update(key: Key, fn: (old: Buffer | undefined) =>
    Data | undefined | Promise<Data | undefined>): Promise<number>;
  close(): Promise<void>;
}

export interface SpoolStat {
  cursor: number; firstSeq: number; nextSeq: number; segments: number;
  bytes: number; quarantined: number; truncated: number; dropped: number;
  quarantinedBytes: number; salvaged: number; lost: number;
  cursorAhead: number; quarantineEntries: number;
}

export class Spool {
  static open(path: string | URL,
    options?: { create?: boolean; readOnly?: boolean }): Promise<Spool>;
  readonly path: string;
  /** The first record's number, once durable. */
  append(...records: Data[]): Promise<number>;
  /** From `from`, or the cursor when omitted. */
  read(from?: number): AsyncGenerator<[number, Buffer]>;
  ack(seq: number): Promise<void>;
  stat(): Promise<SpoolStat>;
  close(): Promise<void>;
}

export interface InboxMessage { id: string; seq: number; data: Buffer }

export class Consumer {
  take(): Promise<InboxMessage | undefined>;
  wait(timeoutMs: number): Promise<boolean>;
  ack(message: InboxMessage | string): Promise<void>;
  release(message: InboxMessage | string): Promise<void>;
  releaseAll(): Promise<number>;
  close(): Promise<void>;
}

export class Inbox {
  static open(path: string | URL,
    options?: { create?: boolean; keepDone?: boolean }): Promise<Inbox>;
  readonly path: string;
  deliver(data: Data): Promise<string>;
  consumer(name?: string): Promise<Consumer>;
  recover(options?: { stageAgeMs?: number }): Promise<{
    returned: number; consumers: number; swept: number; unjudged: number }>;
  close(): Promise<void>;
}

export interface Snapshot {
  generation: number;
  revision: string;
  time: Date;
  files: Map<string, Buffer>;
  otherRevision: boolean;
  fellBack: boolean;
}

export class Checkpoint {
  static open(path: string | URL, options?: { create?: boolean;
    revision?: string; keep?: number; wait?: boolean; readOnly?: boolean;
  }): Promise<Checkpoint>;
  readonly path: string;
  readonly wasUnclean: boolean;
  save(files: Record<string, Data> | Map<string, Data>): Promise<number>;
  load(options?: { generation?: number; fallback?: boolean }):
    Promise<Snapshot | undefined>;
  generations(): Promise<number[]>;
  close(): Promise<void>;
}
