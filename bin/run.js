#!/usr/bin/env node
// NODE_EXTRA_CA_CERTS as bin/gazctl hands it over: trusted from the first TLS context on
// (src/cli/deferred-ca.ts). Where this Node's trust cannot be copied that way, Node runs again
// with the variable in place, which costs a second start-up but trusts exactly what Node does.
const deferredCA = process.env.GAZCTL_DEFERRED_CA_CERTS;
let restarted = false;
if (deferredCA !== undefined) {
  delete process.env.GAZCTL_DEFERRED_CA_CERTS;
  process.env.NODE_EXTRA_CA_CERTS = deferredCA;
  const { canDefer, deferExtraCACerts } = await import('../dist/src/cli/deferred-ca.js');
  if (canDefer()) deferExtraCACerts(deferredCA);
  else {
    await runAgain();
    restarted = true;
  }
}

/** Runs this command in a new Node (with the environment as it now is) and exits as it does. */
async function runAgain() {
  const { spawn } = await import('node:child_process');
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

// Fast path: the bundle that `npm run build` makes (scripts/bundle.mjs) starts in about half the
// time Node needs to resolve and compile @oclif/core file by file. Same oclif, same manifest,
// same commands (compiled from the tsc output); only the loading differs. The unbundled CLI
// runs instead when there is no bundle, when the tsc output is newer than the bundle (a
// `tsc`-only rebuild in a checkout), or with GAZCTL_NO_BUNDLE=1.
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const bundleDir = new URL('../dist/bundle/', import.meta.url);

function bundleUsable() {
  if (process.env.GAZCTL_NO_BUNDLE === '1') return false;
  const built = statSync(new URL('commands.cjs', bundleDir), { throwIfNoEntry: false });
  if (!built) return false;
  const tsc = statSync(new URL('../dist/.tsbuildinfo', import.meta.url), { throwIfNoEntry: false });
  return !tsc || tsc.mtimeMs <= built.mtimeMs;
}

if (restarted) {
  // The command runs in the new Node.
} else if (bundleUsable()) {
  const { load } = createRequire(import.meta.url)(fileURLToPath(new URL('load.cjs', bundleDir)));
  const { execute, settings } = load(fileURLToPath(new URL('oclif-core.cjs', bundleDir)));
  const root = fileURLToPath(new URL('..', import.meta.url)).replace(/[\\/]$/, '');
  const pjson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  // Commands come from the bundle (loaded only to run one); the manifest still lists them.
  pjson.oclif = { ...pjson.oclif, commands: { strategy: 'explicit', target: './dist/bundle/commands.cjs', identifier: 'COMMANDS' } };
  // The bundle is compiled JavaScript: never look for TypeScript sources (NODE_ENV=development).
  settings.enableAutoTranspile = false;
  await execute({ loadOptions: { root, pjson } });
} else {
  const { execute } = await import('@oclif/core');
  await execute({ dir: import.meta.url });
}
