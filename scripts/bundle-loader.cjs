// Copied to dist/bundle/load.cjs by scripts/bundle.mjs. Loads a bundle file as a CommonJS module
// (the same wrapper, `require`, `module`, `__filename` and `__dirname` Node gives a .cjs file),
// compiling it with the V8 code cache stored next to it in `<file>.v8cache` when that cache was
// made from exactly this file (SHA-1 of its bytes) by this Node/V8 version. Any mismatch just
// means V8 compiles from source as usual. scripts/bundle.mjs writes the caches by running a
// few commands with GAZCTL_WRITE_CODE_CACHE=1, which writes every loaded file's cache at exit.
'use strict';
const { createHash } = require('node:crypto');
const { readFileSync, realpathSync, renameSync, writeFileSync } = require('node:fs');
const Module = require('node:module');
const { dirname } = require('node:path');
const vm = require('node:vm');

// import() inside the compiled code must work as in a module (Node >= 20.12); without that,
// load the file with a plain require() and no cache.
const IMPORT_DEFAULT = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
const HASH_BYTES = 20;
const writeCache = process.env.GAZCTL_WRITE_CODE_CACHE === '1';
const loaded = [];

function load(file) {
  const filename = realpathSync(file);
  const known = require.cache[filename];
  if (known) return known.exports;
  if (IMPORT_DEFAULT === undefined) return require(filename);

  const bytes = readFileSync(filename);
  const hash = createHash('sha1').update(bytes).digest();
  const cacheFile = `${filename}.v8cache`;
  let cachedData;
  try {
    const c = readFileSync(cacheFile);
    if (c.length > HASH_BYTES && hash.equals(c.subarray(0, HASH_BYTES))) cachedData = c.subarray(HASH_BYTES);
  } catch {
    // no cache: compile from source
  }
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) { ${bytes.toString('utf8')}\n})`, {
    filename,
    cachedData,
    importModuleDynamically: IMPORT_DEFAULT,
  });
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
