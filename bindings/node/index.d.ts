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
