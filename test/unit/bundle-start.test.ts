// What the CLI bundle does at every start (scripts/bundle.mjs, scripts/bundle-loader.cjs): its
// files are ASCII (so V8 holds each source as a one-byte string), their code caches are used, and
// the Node modules it requires only when they are used (node:crypto, node:https, node:readline
// and others, behind stand-ins) are not loaded by a run that does not use them, while a run that
// does gets the real module (an auth token signed with node:crypto).

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { REPO_ROOT, describeResult, runGazctl } from '../helpers/cli.js';
import { startStubBroker, type StubBroker } from '../helpers/stub-broker.js';

const BUNDLE = join(REPO_ROOT, 'dist', 'bundle');
const KEY = Buffer.from('bundle-start-test-key');

let broker: StubBroker;
let work: string;
let preload: string;

before(async () => {
  broker = await startStubBroker([{ name: 'start/one' }]);
  work = mkdtempSync(join(tmpdir(), 'gazctl-start-'));
  preload = join(work, 'builtins.cjs');
  // At exit: the Node modules the process loaded (public ones, as Node lists them).
  writeFileSync(
    preload,
    "process.once('exit', () => require('node:fs').writeFileSync(process.env.START_TEST_OUT, JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13)))));\n",
  );
});

after(async () => {
  await broker?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

let runs = 0;
async function listRun(extraArgs: string[] = [], extraEnv: Record<string, string> = {}) {
  const out = join(work, `modules-${++runs}.json`);
  const args = ['journals', 'list', ...extraArgs];
  const r = await runGazctl(args, {
    env: { BROKER_ADDRESS: broker.address, NODE_OPTIONS: `--require ${preload}`, START_TEST_OUT: out, ...extraEnv },
  });
  assert.equal(r.code, 0, describeResult(args, r));
  assert.match(r.stdout.toString('utf8'), /start\/one/);
  return { r, modules: JSON.parse(readFileSync(out, 'utf8')) as string[] };
}

describe('start-up of the CLI bundle', () => {
  test('every bundle file is ASCII', () => {
    const files = readdirSync(BUNDLE).filter((f) => f.endsWith('.cjs'));
    assert.ok(files.includes('commands-impl.cjs') && files.includes('oclif-core.cjs'), `dist/bundle: ${files.join(', ')}: run npm run build`);
    for (const f of files) {
      const bytes = readFileSync(join(BUNDLE, f));
      const at = bytes.findIndex((b) => b > 0x7f);
      assert.equal(at, -1, `dist/bundle/${f}: a byte outside ASCII at ${at}`);
    }
  });

  test('the code caches of oclif and of the commands are used', async () => {
    const { r } = await listRun([], { GAZCTL_DEBUG_CODE_CACHE: '1' });
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('gazctl: code cache: '));
    for (const f of ['oclif-core.cjs', 'commands-impl.cjs']) {
      assert.ok(
        lines.includes(`gazctl: code cache: ${join(BUNDLE, f)}: cache used`),
        `${f}:\n${lines.join('\n') || r.stderr}`,
      );
    }
  });

  test('a listing loads none of the Node modules it does not use', async () => {
    const { modules } = await listRun();
    // Loaded by grpc-js and Node's http2 in any case: not a sign that the stand-ins are bypassed.
    assert.ok(modules.includes('http2'), modules.join(' '));
    for (const m of ['https', 'perf_hooks', 'readline']) assert.ok(!modules.includes(m), `${m} was loaded: ${modules.join(' ')}`);
  });

  test('a command that uses a lazily loaded module gets the real one: the token is signed with node:crypto', async () => {
    const before = broker.calls.length;
    await listRun(['--broker.auth-keys', KEY.toString('base64')]);
    const authorizations = broker.calls.slice(before).map((c) => c.authorization ?? '');
    assert.equal(authorizations.length, 1, authorizations.join('\n'));
    const m = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorizations[0]!);
    assert.ok(m, authorizations[0]);
    const signature = createHmac('sha256', KEY).update(`${m[1]}.${m[2]}`).digest('base64url');
    assert.equal(m[3], signature, 'an HS256 signature of header and claims under the key');
  });
});
