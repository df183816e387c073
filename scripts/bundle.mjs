// Bundles the CLI for a fast cold start (`npm run build` runs this after tsc and `oclif manifest`).
//
// dist/bundle/ gets:
//   oclif-core.cjs        @oclif/core and its dependencies in one file (instead of ~160 files
//                         that Node resolves and compiles one by one), its ejs fronted by
//                         scripts/ejs-lite.cjs;
//   commands-impl.cjs     every command (from the tsc output dist/src/commands), with the code
//                         it needs; its `@oclif/core` is ./oclif-core.cjs, so there is one copy
//                         of oclif in the process;
//   commands.cjs          the target of oclif's "explicit" command discovery (COMMANDS), which
//                         bin/run.cjs sets at run time; oclif loads it only to run a command, so
//                         `--help` never loads gRPC, protobuf, YAML or prompt code;
//   s3-sdk-impl.cjs       the AWS SDK of the s3:// store (src/lib/stores/s3-sdk.cts), and
//   prom-client-impl.cjs  prom-client, for `journals append --metrics-addr` (src/lib/client/append-metrics.ts),
//   prompts-impl.cjs      the prompt library (@inquirer/prompts): each loaded only when first
//                         needed (an s3:// store is opened; a prompt is shown), through the
//                         stubs s3-sdk.cjs and prompts.cjs. Bundled with the commands, they made
//                         every command compile and hold some 2.3 MB more code than it runs;
//   load.cjs              loads those files with the V8 code cache (scripts/bundle-loader.cjs);
//   deferred-ca.cjs       src/cli/deferred-ca.ts as CommonJS, for bin/run.cjs;
//   *.v8cache             the code caches, written by running a few commands (and, for the
//                         lazily loaded files, a short script that loads and exercises them).
//
// The tsc output, oclif.manifest.json (which help and command lookup read) and the package.json
// oclif config are unchanged; bin/run.cjs falls back to them when there is no bundle.
//
// Usage: node scripts/bundle.mjs   (after tsc)
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const distSrc = join(root, 'dist', 'src');
const commandsDir = join(distSrc, 'commands');
const outdir = join(root, 'dist', 'bundle');

function fail(message) {
  console.error(`bundle: ${message}`);
  process.exit(1);
}

if (!existsSync(commandsDir)) fail(`${relative(root, commandsDir)} not found (run tsc first)`);

// Command files and ids, as oclif's "pattern" discovery finds them for `oclif.commands`
// (./dist/src/commands): .js files except tests; the id is the path with ":" separators, an
// index file naming its directory.
function walk(dir, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.(js|mjs|cjs)$/.test(name) && !/\.(test|spec)\.(js|mjs|cjs)$/.test(name)) out.push(p);
  }
  return out;
}
const commands = walk(commandsDir).map((file) => {
  const parts = relative(commandsDir, file).replace(/\.(js|mjs|cjs)$/, '').split(sep);
  if (parts[parts.length - 1] === 'index') parts.pop();
  return { id: parts.join(':'), file };
});
if (commands.length === 0) fail('no commands found');

// COMMANDS maps each id to its class, picked from the module the way oclif picks it (the
// default export, else the first export with a static run()).
const commandsEntry = [
  ...commands.map((c, i) => `import * as m${i} from ${JSON.stringify('./' + relative(distSrc, c.file).split(sep).join('/'))};`),
  `const pick = (m) => (typeof m.default?.run === 'function' ? m.default : Object.values(m).find((v) => typeof v?.run === 'function'));`,
  `export const COMMANDS = {`,
  ...commands.map((c, i) => `  ${JSON.stringify(c.id)}: pick(m${i}),`),
  `};`,
].join('\n');

const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  // The ESM sources (ours, chalk, inquirer...) are strict mode code; keep them so. (An ESM
  // bundle would make everything strict just the same.)
  banner: { js: "'use strict';" },
  // Class and function names stay as written: error names come from class names. No
  // minifying: it saves nothing measurable once the code cache is in place, and readable
  // stack traces do (--log.level debug).
  keepNames: true,
  legalComments: 'none',
  logLevel: 'warning',
  metafile: true,
};

// Node modules that the bundled code requires at the top of a module but a run seldom uses: each
// becomes a stand-in that requires the real module at its first use (any property read, write
// or listing), so that a command that never uses one never loads it: node:crypto (our token
// signing and S3 code), node:https and node:http (our https fallback, grpc-js' proxy support),
// node:dns (grpc-js' resolver), node:readline (oclif's parser), node:perf_hooks (oclif's timing,
// used with --debug), node:child_process and node:dgram (oclif's os helpers, our editor). Some load
// anyway (Node's http2 loads crypto and http, grpc-js reads dns as it loads, oclif copies
// child_process's exports); a direct read of a plaintext broker still skips https, readline and
// perf_hooks, some 2-3 ms on a slow host. Every use goes through a property of the stand-in, so
// this only suits modules whose importers read properties of them (`m.fn(...)`, never `m(...)`):
// node:assert, a function, stays as it is, and so does a module patched in place (node:tls, whose
// createSecureContext src/cli/deferred-ca.ts replaces).
const LAZY_BUILTINS = ['child_process', 'crypto', 'dgram', 'dns', 'http', 'https', 'perf_hooks', 'readline'];
const LAZY_BUILTIN_HELPER = `function __gazctlLazyBuiltin(name) {
  let mod;
  const load = () => mod || (mod = require('node:' + name));
  return new Proxy({}, {
    get: (_, k) => load()[k],
    set: (_, k, v) => { load()[k] = v; return true; },
    has: (_, k) => k in load(),
    deleteProperty: (_, k) => delete load()[k],
    ownKeys: () => Reflect.ownKeys(load()),
    getOwnPropertyDescriptor: (_, k) => { const d = Reflect.getOwnPropertyDescriptor(load(), k); return d && { ...d, configurable: true }; },
    defineProperty: (_, k, d) => Reflect.defineProperty(load(), k, d),
    getPrototypeOf: () => Reflect.getPrototypeOf(load()),
  });
}`;
// esbuild keeps a require() of an external module as it is (an ESM importer's named imports
// become property reads of it), so each of these is made external under a marker name, which
// finishBundle() then replaces in the output with the stand-in.
const LAZY_MARK = '__gazctl_lazy_builtin:';
const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(b) {
    const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join('|')})$`);
    b.onResolve({ filter }, (args) => ({ path: LAZY_MARK + args.path.replace(/^node:/, ''), external: true }));
  },
};
// A single character outside ASCII anywhere in a bundle file makes V8 hold its whole source as a
// two-byte string (twice the memory, and a UTF-8 decode at every start). esbuild escapes them in
// strings but leaves some in regular expression literals (ansis, in oclif, has a raw U+009B in
// one): each is written as a backslash-u escape, which means the same in a string, a template, a
// regular expression or an identifier.
function asciiOnly(text) {
  return text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
/** The last touches to a bundle file esbuild wrote: ASCII only, and the lazy Node modules. */
function finishBundle(file) {
  const text = asciiOnly(readFileSync(file, 'utf8'));
  const marked = new RegExp(`require\\("${LAZY_MARK}([a-z_]+)"\\)`, 'g');
  const out = text.replace(marked, (_, name) => `__gazctlLazyBuiltin(${JSON.stringify(name)})`);
  if (out.includes(LAZY_MARK)) fail(`${relative(root, file)}: a lazily loaded Node module is used other than through require()`);
  writeFileSync(file, out);
}

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

// The comparator of the oclif-id-order plugin below (scripts/oclif-id-order.cjs).
const ID_ORDER = `const __gazctlIdOrder = (${createRequire(import.meta.url)('./oclif-id-order.cjs').idOrder.toString()})(process.env);`;

const core = await build({
  ...common,
  stdin: { contents: "module.exports = require('@oclif/core');", resolveDir: root, sourcefile: 'oclif-core-entry.cjs', loader: 'js' },
  outfile: join(outdir, 'oclif-core.cjs'),
  banner: { js: `${common.banner.js}\n${LAZY_BUILTIN_HELPER}` },
  // oclif reads tsconfig.json with TypeScript only when it looks for TypeScript sources, which
  // bin/run.cjs turns off for the bundle; keep the compiler out.
  external: ['typescript'],
  plugins: [
    lazyBuiltins,
    {
      // oclif sorts its commands by id with localeCompare as it loads them, for every command
      // run; that first localeCompare of the process sets up an ICU collator, 5-15 ms. The
      // bundle sorts them in the same order with scripts/oclif-id-order.cjs, which compares
      // plain ids under a plain locale directly and leaves anything else to localeCompare.
      name: 'oclif-id-order',
      setup(b) {
        b.onLoad({ filter: /[\\/]@oclif[\\/]core[\\/]lib[\\/]config[\\/]plugin\.js$/ }, (args) => {
          const text = readFileSync(args.path, 'utf8');
          const sort = '.sort((a, b) => a.id.localeCompare(b.id))';
          if (text.split(sort).length !== 2) {
            console.warn(`bundle: warning: ${relative(root, args.path)}: the command sort to replace is not there (start-up keeps its localeCompare)`);
            return undefined;
          }
          return { contents: `${ID_ORDER}\n${text.replace(sort, '.sort((a, b) => __gazctlIdOrder(a.id, b.id))')}`, loader: 'js' };
        });
      },
    },
    {
      // oclif's `ejs` is scripts/ejs-lite.cjs, which renders the plain `<%= a.b %>` templates
      // of help texts without compiling them and hands anything else to the real ejs (still in
      // the bundle, evaluated only when first needed).
      name: 'ejs-lite',
      setup(b) {
        const lite = join(root, 'scripts', 'ejs-lite.cjs');
        b.onResolve({ filter: /^ejs$/ }, (args) => (args.importer === lite ? undefined : { path: lite }));
      },
    },
  ],
});

finishBundle(join(outdir, 'oclif-core.cjs'));

// Parts of commands-impl loaded only when needed, each a bundle file of its own behind a stub
// that loads it through load.cjs (so with its code cache), as commands.cjs does for the commands:
//
// * s3-sdk: src/lib/stores/s3.ts requires `./s3-sdk.cjs` relative to `import.meta.url` when it
//   makes its first S3Store (synchronously, so opening a store stays synchronous). Unbundled that
//   is the tsc output next to it; in commands-impl, `import.meta.url` is defined as the URL of the
//   bundle file itself (see BUNDLE_URL), so the same require finds the stub dist/bundle/s3-sdk.cjs.
// * prompts: src/cli/confirm.ts imports @inquirer/prompts with import() when it shows a prompt.
//   In commands-impl that import names the external stub ./prompts.cjs, and esbuild is told that
//   the target has no import() so that it emits a require() for it: an import() of a file outside
//   the bundle would run inside the code-cached vm script, where Node 20 gives it no module loader
//   ("A dynamic import callback was not specified").
const LAZY = [
  { name: 's3-sdk', entry: { entryPoints: [join(distSrc, 'lib', 'stores', 's3-sdk.cjs')] }, packages: /^node_modules\/(@aws-sdk|@smithy|@aws-crypto)\// },
  {
    name: 'prompts',
    entry: { stdin: { contents: "module.exports = require('@inquirer/prompts');", resolveDir: root, sourcefile: 'prompts-entry.cjs', loader: 'js' } },
    packages: /^node_modules\/@inquirer\//,
  },
  // * prom-client: only `journals append --metrics-addr` needs it (it imports append-metrics.js
  //   with import(), and that module imports prom-client); in commands-impl prom-client is the
  //   external stub ./prom-client.cjs, required when append-metrics.js first runs. That keeps
  //   ~190 KiB that no other command runs out of commands-impl, as for the parts above.
  {
    name: 'prom-client',
    entry: { stdin: { contents: "module.exports = require('prom-client');", resolveDir: root, sourcefile: 'prom-client-entry.cjs', loader: 'js' } },
    packages: /^node_modules\/(prom-client|tdigest|bintrees)\//,
  },
];
const BUNDLE_URL = '__gazctl_bundle_url';

// bin/run.cjs's copy of src/cli/deferred-ca.ts: a CommonJS main file cannot require the tsc
// output (an ES module), and importing it would start Node's ES module loader.
await build({
  ...common,
  entryPoints: [join(distSrc, 'cli', 'deferred-ca.js')],
  outfile: join(outdir, 'deferred-ca.cjs'),
  banner: { js: `${common.banner.js}\nconst ${BUNDLE_URL} = require('node:url').pathToFileURL(__filename).href;` },
  define: { 'import.meta.url': BUNDLE_URL },
});

const impl = await build({
  ...common,
  stdin: { contents: commandsEntry, resolveDir: distSrc, sourcefile: 'commands-entry.js', loader: 'js' },
  outfile: join(outdir, 'commands-impl.cjs'),
  banner: { js: `${common.banner.js}\nconst ${BUNDLE_URL} = require('node:url').pathToFileURL(__filename).href;\n${LAZY_BUILTIN_HELPER}` },
  define: { 'import.meta.url': BUNDLE_URL },
  supported: { 'dynamic-import': false },
  plugins: [
    lazyBuiltins,
    {
      name: 'shared-oclif-core',
      setup(b) {
        b.onResolve({ filter: /^@oclif\/core(\/.*)?$/ }, (args) =>
          args.path === '@oclif/core'
            ? { path: './oclif-core.cjs', external: true }
            : { errors: [{ text: `${args.path}: import @oclif/core itself, so that the bundle shares one copy of oclif` }] },
        );
      },
    },
    {
      name: 'lazy-prom-client',
      setup(b) {
        b.onResolve({ filter: /^prom-client$/ }, () => ({ path: './prom-client.cjs', external: true }));
      },
    },
    {
      name: 'lazy-prompts',
      setup(b) {
        b.onResolve({ filter: /^@inquirer\/prompts$/ }, (args) =>
          args.kind === 'dynamic-import'
            ? { path: './prompts.cjs', external: true }
            : { errors: [{ text: `${args.path}: import it with import() where a prompt is shown, so that it stays out of the start-up path` }] },
        );
      },
    },
  ],
});

finishBundle(join(outdir, 'commands-impl.cjs'));

// The lazily loaded parts must not have been bundled with the commands after all (a static
// import of the SDK or of a prompt package somewhere would do that, silently).
const implInputs = Object.keys(impl.metafile.inputs);
for (const part of LAZY) {
  const leaked = implInputs.filter((p) => part.packages.test(p));
  if (leaked.length) fail(`commands-impl.cjs includes ${part.name} code, which must load lazily: ${leaked.slice(0, 5).join(', ')}${leaked.length > 5 ? ', …' : ''}`);
}

const lazyBuilds = [];
for (const part of LAZY) {
  lazyBuilds.push(await build({ ...common, ...part.entry, outfile: join(outdir, `${part.name}-impl.cjs`) }));
  finishBundle(join(outdir, `${part.name}-impl.cjs`));
  writeFileSync(
    join(outdir, `${part.name}.cjs`),
    `'use strict';\n// Loads ${part.name}-impl.cjs with the code cache (only when it is needed).\n` +
      `module.exports = require('./load.cjs').load(require('node:path').join(__dirname, '${part.name}-impl.cjs'));\n`,
  );
}

writeFileSync(
  join(outdir, 'commands.cjs'),
  "'use strict';\n// oclif's explicit command discovery target: COMMANDS, loaded with the code cache.\n" +
    "module.exports = require('./load.cjs').load(require('node:path').join(__dirname, 'commands-impl.cjs'));\n",
);
copyFileSync(join(root, 'scripts', 'bundle-loader.cjs'), join(outdir, 'load.cjs'));

// One copy of each library: nothing but our code and its own dependencies in commands-impl.
const coreInputs = new Set(Object.keys(core.metafile.inputs));
const shared = implInputs.filter((p) => coreInputs.has(p));
if (shared.length) console.warn(`bundle: note: also bundled with oclif: ${shared.join(', ')}`);
// ... and none of ours, or of the libraries the commands use, in a lazily loaded part (where it
// would be a second copy, with classes of its own).
for (const [i, part] of LAZY.entries()) {
  const dup = Object.keys(lazyBuilds[i].metafile.inputs).filter((p) => implInputs.includes(p) && !/^node_modules\/tslib\//.test(p));
  if (dup.length) console.warn(`bundle: note: ${part.name}-impl.cjs also bundles: ${dup.join(', ')}`);
}

// Code caches: run help, a command start (an unreachable broker, so it fails fast) and a direct
// read the way an operator would, in a clean environment, and let load.cjs write the caches at
// exit (each run starts from the caches the one before wrote, and adds what it compiled).
const sandbox = mkdtempSync(join(tmpdir(), 'gazctl-bundle-'));
const env = { PATH: process.env.PATH ?? '', HOME: sandbox, GAZCTL_WRITE_CODE_CACHE: '1' };
const runs = [
  ['journals', 'list', '--help'],
  ['journals', 'list', '--broker.address', 'http://127.0.0.1:1', '--timeout', '1s'],
];
for (const args of runs) {
  const r = spawnSync(process.execPath, [join(root, 'bin', 'run.cjs'), ...args], { cwd: sandbox, env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 });
  if (r.error || r.signal) console.warn(`bundle: warning: gazctl ${args.join(' ')}: ${r.error?.message ?? r.signal}`);
}
// Then a direct read of a journal on a stub broker (scripts/warm-read.mjs), for the read path.
{
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'warm-read.mjs'), JSON.stringify(env)], { cwd: sandbox, stdio: ['ignore', 'inherit', 'inherit'], timeout: 60_000 });
  if (r.error || r.signal) console.warn(`bundle: warning: scripts/warm-read.mjs: ${r.error?.message ?? r.signal}`);
}
// The lazily loaded parts: load them through their stubs and use them a little, as a command
// does (an S3 request to a closed port, which fails at once).
const warmLazy = `
const { join } = require('node:path');
const dir = process.argv[1];
require(join(dir, 'prompts.cjs'));
{
  const prom = require(join(dir, 'prom-client.cjs'));
  const registry = new prom.Registry();
  new prom.Gauge({ name: 'warm', help: 'warm', registers: [registry], collect() { this.set(1); } });
  new prom.Counter({ name: 'warm_total', help: 'warm', registers: [registry] }).inc();
  registry.metrics().catch(() => undefined);
}
const sdk = require(join(dir, 's3-sdk.cjs'));
const client = new sdk.S3Client({ region: 'us-east-1', endpoint: 'http://127.0.0.1:1', forcePathStyle: true, maxAttempts: 1,
  credentials: { accessKeyId: 'warm', secretAccessKey: 'warm' }, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
client.send(new sdk.HeadObjectCommand({ Bucket: 'warm', Key: 'warm' })).catch(() => undefined).finally(() => client.destroy());
`;
{
  const r = spawnSync(process.execPath, ['-e', warmLazy, outdir], { cwd: sandbox, env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 });
  if (r.error || r.signal || r.status !== 0) console.warn(`bundle: warning: loading the lazy parts: ${r.error?.message ?? r.signal ?? r.stderr.toString().trim()}`);
}
rmSync(sandbox, { recursive: true, force: true });
const caches = readdirSync(outdir).filter((n) => n.endsWith('.v8cache'));
if (caches.length !== 2 + LAZY.length) console.warn(`bundle: warning: code caches written: ${caches.join(', ') || 'none'} (start-up will be slower)`);

const size = (n) => `${n} ${(statSync(join(outdir, n)).size / 1024).toFixed(0)} KiB`;
console.log(`bundle: ${commands.length} commands (${commands.map((c) => c.id).join(', ')}) -> dist/bundle: ${readdirSync(outdir).sort().map(size).join(', ')}`);
