#!/usr/bin/env node
// gazctl's entry point (bin/gazctl runs it; bin/run.js is the same for `node bin/run.js`).
// CommonJS: a CommonJS main file starts without Node's ES module loader, some 5-10 ms less of
// every run than an ES module would take.
'use strict';
const { existsSync, readFileSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

const root = join(__dirname, '..');
const bundleDir = join(root, 'dist', 'bundle');

/**
 * Whether the bundle that `npm run build` makes (scripts/bundle.mjs) can run: it starts in about
 * half the time Node needs to resolve and compile @oclif/core file by file. Same oclif, same
 * manifest, same commands (compiled from the tsc output); only the loading differs. The unbundled
 * CLI runs instead when there is no bundle, when the tsc output is newer than the bundle (a
 * `tsc`-only rebuild in a checkout), or with GAZCTL_NO_BUNDLE=1.
 */
function bundleUsable() {
  if (process.env.GAZCTL_NO_BUNDLE === '1') return false;
  const built = statSync(join(bundleDir, 'commands.cjs'), { throwIfNoEntry: false });
  if (!built) return false;
  const tsc = statSync(join(root, 'dist', '.tsbuildinfo'), { throwIfNoEntry: false });
  return !tsc || tsc.mtimeMs <= built.mtimeMs;
}

/** Runs this command in a new Node (with the environment as it now is) and exits as it does. */
function runAgain() {
  const { spawn } = require('node:child_process');
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  // A terminal's Ctrl-C reaches the child itself; other signals are passed on.
  process.on('SIGINT', () => {});
  for (const s of ['SIGTERM', 'SIGHUP']) process.on(s, () => child.kill(s));
  child.on('error', (err) => {
    process.stderr.write(`gazctl: starting ${process.execPath}: ${err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
}

async function main() {
  const useBundle = bundleUsable();
  // NODE_EXTRA_CA_CERTS as bin/gazctl hands it over: trusted from the first TLS context on
  // (src/cli/deferred-ca.ts). Where this Node's trust cannot be copied that way, Node runs again
  // with the variable in place, which costs a second start-up but trusts exactly what Node does.
  const deferredCA = process.env.GAZCTL_DEFERRED_CA_CERTS;
  if (deferredCA !== undefined) {
    delete process.env.GAZCTL_DEFERRED_CA_CERTS;
    process.env.NODE_EXTRA_CA_CERTS = deferredCA;
    // The bundle has a CommonJS copy of the module; the tsc output is an ES module.
    const bundled = join(bundleDir, 'deferred-ca.cjs');
    const { canDefer, deferExtraCACerts } =
      useBundle && existsSync(bundled) ? require(bundled) : await import(pathToFileURL(join(root, 'dist', 'src', 'cli', 'deferred-ca.js')).href);
    if (!canDefer()) return runAgain();
    deferExtraCACerts(deferredCA);
  }
  if (useBundle) {
    const { load } = require(join(bundleDir, 'load.cjs'));
    // oclif checks the running Node against the engines of a package.json beside its own files,
    // which the bundle does not have: the check only loads semver and fails. (Ours, >=20, is
    // npm's to check.)
    const engineCheck = process.env.OCLIF_DISABLE_ENGINE_WARNING;
    process.env.OCLIF_DISABLE_ENGINE_WARNING = '1';
    const { execute, settings } = load(join(bundleDir, 'oclif-core.cjs'));
    if (engineCheck === undefined) delete process.env.OCLIF_DISABLE_ENGINE_WARNING;
    else process.env.OCLIF_DISABLE_ENGINE_WARNING = engineCheck;
    const pjson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    // Commands come from the bundle (loaded only to run one); the manifest still lists them.
    pjson.oclif = { ...pjson.oclif, commands: { strategy: 'explicit', target: './dist/bundle/commands.cjs', identifier: 'COMMANDS' } };
    // The bundle is compiled JavaScript: never look for TypeScript sources (NODE_ENV=development).
    settings.enableAutoTranspile = false;
    await execute({ loadOptions: { root, pjson } });
  } else {
    const { execute } = require('@oclif/core');
    await execute({ dir: __filename });
  }
  exitOnceDone();
}

/**
 * The command is over (its output written, its clients closed), yet Node may stay up: grpc-js
 * cannot abort a TCP connect in progress, and a connect to a host that drops packets (a network
 * partition) keeps the event loop alive until the kernel gives up on its SYN, about 2 minutes
 * later. Whatever is left after a short grace is such a remnant: exit with the command's code.
 * (An unreferenced timer: when nothing is left, Node exits at once, as before.)
 */
function exitOnceDone() {
  // Only once what was written has been handed over (pipes are asynchronous on some systems).
  process.stdout.write('', () => process.stderr.write('', () => setTimeout(() => process.exit(), 500).unref()));
}

main();
