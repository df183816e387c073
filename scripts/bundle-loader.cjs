// Copied to dist/bundle/load.cjs by scripts/bundle.mjs. Loads a bundle file as a CommonJS module
// (the same wrapper, `require`, `module`, `__filename` and `__dirname` Node gives a .cjs file),
// compiling it with the V8 code cache stored next to it in `<file>.v8cache` when that cache was
// made from exactly this file (see identify) by this Node/V8 version. Any mismatch just means V8
// compiles from source as usual. scripts/bundle.mjs writes the caches by running a few commands
// with GAZCTL_WRITE_CODE_CACHE=1, which writes every loaded file's cache at exit.
'use strict';
const { closeSync, fstatSync, openSync, readSync, realpathSync, renameSync, writeFileSync } = require('node:fs');
const { isAscii } = require('node:buffer');
const Module = require('node:module');
const { dirname } = require('node:path');
const vm = require('node:vm');

// import() inside the compiled code must work as in a module (Node >= 20.12); without that,
// load the file with a plain require() and no cache.
const IMPORT_DEFAULT = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;

/**
 * What identifies the bytes a cache was made from: a tag, the length and the CRC-32 of the file
 * (zlib.crc32, Node >= 20.15, some 1 ms for the 2 MiB bundle), else its SHA-1. Loading node:crypto
 * for the SHA-1 alone took some 6 ms of every start on a slow host, and a direct read needs no
 * crypto otherwise. This guards against a cache left from another build of the file (V8 itself
 * checks only that the source length matches); it is not a defence against someone who can write
 * both files.
 */
function identify(bytes) {
  const zlib = require('node:zlib');
  if (typeof zlib.crc32 === 'function') {
    const id = Buffer.alloc(12);
    id.write('crc:', 0, 'latin1');
    id.writeUInt32BE(bytes.length >>> 0, 4);
    id.writeUInt32BE(zlib.crc32(bytes), 8);
    return id;
  }
  return Buffer.concat([Buffer.from('sha1', 'latin1'), require('node:crypto').createHash('sha1').update(bytes).digest()]);
}
const writeCache = process.env.GAZCTL_WRITE_CODE_CACHE === '1';
// GAZCTL_DEBUG_CODE_CACHE=1: one line on stderr per file loaded, saying whether its cache was used
// (a start-up that compiles the bundle from source is some 40 ms slower).
const debugCache = process.env.GAZCTL_DEBUG_CODE_CACHE === '1';
const loaded = [];

/**
 * The bytes of `file`, read into a buffer whose content starts on a page (where malloc gives a big
 * buffer memory 16 bytes past a page, as glibc does). readFileSync's buffer starts 16 bytes past
 * one, and on some CPUs the kernel's copy out of the page cache runs several times slower into
 * memory just past the source's offset within a page (see src/lib/client/direct/piece-pool.ts): the four
 * files of a start (some 4 MiB) took 4.5-7 ms that way on an AMD EPYC host, 3.4-3.7 ms this way.
 */
function readAligned(file) {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.from(Buffer.allocUnsafeSlow(size + 4080).buffer, 4080, size);
    let at = 0;
    while (at < size) {
      const n = readSync(fd, buf, at, size - at, at);
      if (n === 0) break;
      at += n;
    }
    return at < size ? buf.subarray(0, at) : buf;
  } finally {
    closeSync(fd);
  }
}

function load(file) {
  const filename = realpathSync(file);
  const known = require.cache[filename];
  if (known) return known.exports;
  if (IMPORT_DEFAULT === undefined) return require(filename);

  const bytes = readAligned(filename);
  const hash = identify(bytes);
  const cacheFile = `${filename}.v8cache`;
  let cachedData;
  try {
    const c = readAligned(cacheFile);
    if (c.length > hash.length && hash.equals(c.subarray(0, hash.length))) cachedData = c.subarray(hash.length);
  } catch {
    // no cache: compile from source
  }
  // The bundle is ASCII (scripts/bundle.mjs sees to it): decoded as latin1, a plain copy into a
  // one-byte string, the same text a UTF-8 decode gives.
  const source = isAscii !== undefined && isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8');
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) { ${source}\n})`, {
    filename,
    cachedData,
    importModuleDynamically: IMPORT_DEFAULT,
  });
  if (debugCache) {
    const how = cachedData === undefined ? 'no cache for this file' : script.cachedDataRejected ? 'cache rejected by V8' : 'cache used';
    process.stderr.write(`gazctl: code cache: ${filename}: ${how}\n`);
  }
  const mod = new Module(filename, module);
  mod.filename = filename;
  require.cache[filename] = mod;
  try {
    script.runInThisContext().call(mod.exports, mod.exports, Module.createRequire(filename), mod, filename, dirname(filename));
  } catch (err) {
    delete require.cache[filename];
    throw err;
  }
  mod.loaded = true;
  if (writeCache) loaded.push({ cacheFile, hash, script });
  return mod.exports;
}

if (writeCache) {
  process.once('exit', () => {
    for (const { cacheFile, hash, script } of loaded) {
      const tmp = `${cacheFile}.${process.pid}.tmp`;
      try {
        writeFileSync(tmp, Buffer.concat([hash, script.createCachedData()]));
        renameSync(tmp, cacheFile);
      } catch (err) {
        process.stderr.write(`gazctl: cannot write ${cacheFile}: ${err.message}\n`);
      }
    }
  });
}

module.exports = { load };
