'use strict';
// write-file-atomic's options, checked against what fsafe does:
//   fsync: false        -> FSAFE_NO_SYNC (atomic, not durable)
//   encoding            -> how a string is turned into bytes
//   mode                -> a new file's mode; an existing target keeps its
//                          own, so a different `mode` for one is refused
//   chown {uid, gid}    -> fsafe keeps an existing owner and gives a new
//                          file the caller's: any other owner is refused
//   tmpfileCreated      -> fsafe names no stage to report: refused
const fs = require('node:fs');
const nodePath = require('node:path');
const { fileURLToPath } = require('node:url');
const native = require('./native');
const { unsupported } = require('./errors');

function typeError(message) {
  const err = new TypeError(message);
  err.code = 'ERR_INVALID_ARG_TYPE';
  return err;
}

function toPath(p) {
  if (p instanceof URL) return fileURLToPath(p);
  if (typeof p !== 'string' || p === '')
    throw typeError('The "path" argument must be a non-empty string or URL');
  return nodePath.resolve(p);
}

function normalise(options) {
  if (options == null) return {};
  if (typeof options === 'string') return { encoding: options };
  if (typeof options !== 'object')
    throw typeError('The "options" argument must be an object or string');
  if (options.tmpfileCreated !== undefined)
    throw unsupported('tmpfileCreated is not supported: fsafe stages ' +
      'under a random name it does not report');
  if (options.mode !== undefined &&
      !(Number.isInteger(options.mode) && options.mode >= 0 &&
        options.mode <= 0o7777))
    throw typeError('options.mode must be an integer in 0..0o7777');
  // The library reads a mode of 0 as "the default, 0666".
  if (options.mode === 0)
    throw unsupported('mode 0 is not supported: fsafe takes 0 for 0o666');
  if (options.chown !== undefined && options.chown !== false &&
      !(options.chown && Number.isInteger(options.chown.uid) &&
        Number.isInteger(options.chown.gid)))
    throw typeError('options.chown must be { uid, gid }');
  return options;
}

function toBytes(data, encoding) {
  if (typeof data === 'string') return Buffer.from(data, encoding || 'utf8');
  if (Buffer.isBuffer(data)) return data;
  if (ArrayBuffer.isView(data))
    return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  throw typeError('The "data" argument must be a string, Buffer, ' +
    'TypedArray, DataView or ArrayBuffer');
}

function flagsOf(o) {
  let flags = 0;
  if (o.fsync === false) flags |= native.flags.NO_SYNC;
  return flags;
}

// What the file will have after fsafe's write, given the target's stat
// (null: none yet), against what the options ask for.
function checkStat(o, st, file) {
  if (o.mode !== undefined) {
    // A new file gets `mode` less the umask, as open(2) gives it; read
    // without changing it (process.umask() with no argument).
    const want = st ? o.mode : o.mode & ~process.umask();
    const have = st ? st.mode & 0o7777 : want;
    if (have !== want)
      throw unsupported(`mode ${want.toString(8)} is not supported for ` +
        `'${file}': an existing file keeps its mode ` +
        `(${have.toString(8)}) under fsafe`);
  }
  if (o.chown) {
    const uid = st ? st.uid : process.geteuid();
    const gid = st ? st.gid : process.getegid();
    if (o.chown.uid !== uid || o.chown.gid !== gid)
      throw unsupported(`chown ${o.chown.uid}:${o.chown.gid} is not ` +
        `supported for '${file}': fsafe keeps the owner ${uid}:${gid}`);
  }
}

const needsStat = (o) => o.mode !== undefined || Boolean(o.chown);

function statOrNull(file) {
  try {
    return fs.statSync(file);
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
}

async function statOrNullAsync(file) {
  try {
    return await fs.promises.stat(file);
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
}

module.exports = {
  toPath, normalise, toBytes, flagsOf, checkStat, needsStat,
  statOrNull, statOrNullAsync, typeError,
};
