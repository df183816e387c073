// Builds gazctl's optional native inflate (src/native/gzip-inflate.c) into
// dist/native/gzip-inflate.node: a Node-API module, linked with libdeflate, that direct reads use
// to inflate whole GZIP fragments (src/lib/client/direct/native-inflate.ts).
//
// It is optional: without a C compiler, Node's headers or libdeflate's, this says so in one line
// and exits 0, and direct reads inflate with zlib as before. `scripts/setup.sh` installs Debian's
// libdeflate-dev, so the test machines always build it (and the tests require it there).
// libdeflate is linked statically where its archive is there, so the module needs no shared
// library at run time.
//
// Usage: node scripts/build-native.mjs   (`npm run build` runs it after tsc, before the bundle, whose code caches then cover it)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'src', 'native', 'gzip-inflate.c');
const outDir = join(root, 'dist', 'native');
const out = join(outDir, 'gzip-inflate.node');

function skip(why) {
  rmSync(out, { force: true }); // never leave a module built from an older source
  console.log(`build-native: not built (${why}); direct reads inflate GZIP fragments with zlib`);
  process.exit(0);
}

if (process.env.GAZCTL_BUILD_NATIVE === '0') skip('GAZCTL_BUILD_NATIVE=0');
if (process.platform !== 'linux' && process.platform !== 'darwin') skip(`no build recipe for ${process.platform}`);

// Node's headers: next to the node binary (official tarballs, nvm), or the system's.
const prefix = dirname(dirname(process.execPath));
const includes = [join(prefix, 'include', 'node'), '/usr/include/node', '/usr/local/include/node'];
const include = includes.find((d) => existsSync(join(d, 'node_api.h')));
if (!include) skip(`Node's headers (node_api.h) not found in ${includes.join(', ')}`);

const cc = process.env.CC || 'cc';
const archives = ['/usr/lib/x86_64-linux-gnu/libdeflate.a', '/usr/lib/aarch64-linux-gnu/libdeflate.a', '/usr/local/lib/libdeflate.a', '/usr/lib/libdeflate.a'];
const archive = archives.find((a) => existsSync(a));
const link = archive ? [archive] : ['-ldeflate'];
const undefinedOk = process.platform === 'darwin' ? ['-undefined', 'dynamic_lookup'] : [];

mkdirSync(outDir, { recursive: true });
const tmp = `${out}.${process.pid}.tmp`;
const args = ['-O2', '-Wall', '-Werror', '-shared', '-fPIC', '-fvisibility=hidden', `-I${include}`, ...undefinedOk, source, '-o', tmp, ...link];
const r = spawnSync(cc, args, { encoding: 'utf8' });
if (r.error) skip(`${cc}: ${r.error.message}`);
if (r.status !== 0) {
  rmSync(tmp, { force: true });
  const first = `${r.stderr}`.split('\n').find((l) => /error|cannot find|No such file/.test(l)) ?? `${cc} exited ${r.status}`;
  skip(first.trim());
}
renameSync(tmp, out);

// Load it once here, so that a module that builds but does not load is found now.
const check = spawnSync(process.execPath, ['-e', `const m = require(${JSON.stringify(out)}); if (typeof m.inflate !== 'function') process.exit(3); console.log(m.libdeflate);`], { encoding: 'utf8' });
if (check.status !== 0) skip(`built, but it does not load: ${`${check.stderr}`.trim().split('\n')[0]}`);
console.log(`build-native: dist/native/gzip-inflate.node (libdeflate ${check.stdout.trim()})`);
