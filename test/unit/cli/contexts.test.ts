// Contexts (src/cli/contexts.ts, `gazctl context ...`): the file (where, mode 0600, atomic
// rewrite, refusal of bad content), the commands (create, set, use, list, show, delete; secrets
// masked; bad settings refused with one line, exit 2), and, through `journals list` in-process
// against stub brokers (which stub answered shows where the address came from), the precedence
// command line > context > gazctl.ini > environment > default, and the choice of the context:
// --context > $GAZCTL_CONTEXT > current.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { contextsPath, loadContexts, maskValue, saveContexts } from '../../../src/cli/contexts.js';
import { describeInProcess, runInProcess, type InProcessResult } from '../../helpers/inproc.js';
import { startStubBroker, type StubBroker } from '../../helpers/stub-broker.js';

describe('contexts file', () => {
  it('lives under $XDG_CONFIG_HOME/gazctl, else ~/.config/gazctl; GAZCTL_CONTEXTS_FILE overrides', () => {
    assert.equal(contextsPath({ XDG_CONFIG_HOME: '/x/cfg', HOME: '/h' }), '/x/cfg/gazctl/contexts.yaml');
    assert.equal(contextsPath({ HOME: '/h' }), '/h/.config/gazctl/contexts.yaml');
    assert.equal(contextsPath({ XDG_CONFIG_HOME: 'relative', HOME: '/h' }), '/h/.config/gazctl/contexts.yaml', 'a relative XDG_CONFIG_HOME is ignored, as the spec says');
    assert.equal(contextsPath({ GAZCTL_CONTEXTS_FILE: '/f.yaml', HOME: '/h' }), '/f.yaml');
  });

  it('is written with mode 0600 in a 0700 directory, by rename (no temporary file left), and read back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-ctx-'));
    const path = join(dir, 'gazctl', 'contexts.yaml');
    await saveContexts({ path, current: 'a', contexts: new Map([['a', new Map([['broker.address', 'http://b:8080']])]]) });
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'gazctl')).mode & 0o777, 0o700);
    const before = statSync(path).ino;
    await saveContexts({ path, current: undefined, contexts: new Map([['a', new Map()], ['b', new Map([['zone', 'z']])]]) });
    assert.notEqual(statSync(path).ino, before, 'a new file renamed over the old one');
    assert.deepEqual(readdirSync(join(dir, 'gazctl')), ['contexts.yaml']);
    const f = await loadContexts(path);
    assert.equal(f.current, undefined);
    assert.deepEqual([...f.contexts.keys()], ['a', 'b']);
    assert.equal(f.contexts.get('b')!.get('zone'), 'z');
    rmSync(dir, { recursive: true });
  });

  it('refuses malformed content with one line naming the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-ctx-'));
    const p = join(dir, 'c.yaml');
    writeFileSync(p, 'contexts: [a, b]\n');
    await assert.rejects(() => loadContexts(p), new RegExp(`contexts file ${p}: "contexts" must be a mapping`));
    writeFileSync(p, 'contexts:\n  a:\n    broker.address: [1]\n');
    await assert.rejects(() => loadContexts(p), /context "a": broker.address must be a scalar/);
    writeFileSync(p, 'contexts: {a: [\n');
    await assert.rejects(() => loadContexts(p), /not valid YAML/);
    assert.deepEqual([...(await loadContexts(join(dir, 'absent.yaml'))).contexts], [], 'an absent file is empty');
    rmSync(dir, { recursive: true });
  });

  it('masks secrets and URL passwords', () => {
    assert.equal(maskValue('broker.auth-token', 'abc'), '<masked>');
    assert.equal(maskValue('consumer.auth-keys', 'k1,k2'), '<masked>');
    assert.equal(maskValue('broker.auth-token', ''), '');
    assert.equal(maskValue('socks-server', 'socks5://me:pw@proxy:1080'), 'socks5://me:<masked>@proxy:1080');
    assert.equal(maskValue('broker.address', 'http://gazette:8080'), 'http://gazette:8080');
    assert.equal(maskValue('broker.cert-key-file', '/k.pem'), '/k.pem', 'a key file path is not a secret');
  });
});

describe('gazctl context, and contexts in effect', () => {
  let dir = '';
  let file = '';
  // Four stub brokers: which one lists its journal shows where the address came from.
  let ctxA: StubBroker, ctxB: StubBroker, ini_: StubBroker, env_: StubBroker, flag_: StubBroker;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gazctl-ctx-cli-'));
    file = join(dir, 'cfg', 'gazctl', 'contexts.yaml');
    [ctxA, ctxB, ini_, env_, flag_] = await Promise.all(['ctxa/from', 'ctxb/from', 'ini/from', 'env/from', 'flag/from'].map((n) => startStubBroker([{ name: n }])));
  });
  after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await Promise.all([ctxA, ctxB, ini_, env_, flag_].map((b) => b.stop()));
  });

  /** gazctl with the contexts file of this suite (XDG_CONFIG_HOME), in `dir`. */
  const gz = (args: string[], env: Record<string, string> = {}): Promise<InProcessResult> => runInProcess(args, { cwd: dir, env: { XDG_CONFIG_HOME: join(dir, 'cfg'), ...env } });
  const ok = async (args: string[], env: Record<string, string> = {}) => {
    const r = await gz(args, env);
    assert.equal(r.code, 0, describeInProcess(args, r));
    return r;
  };
  /** Which stub listed (the prefix of its one journal). */
  const listed = async (args: string[], env: Record<string, string> = {}) => {
    const r = await ok(['journals', 'list', ...args], env);
    return /\b(ctxa|ctxb|ini|env|flag)\/from\b/.exec(r.stdout)?.[1];
  };

  it('create, list, show: settings checked, stored 0600, secrets masked', async () => {
    await ok(['context', 'create', 'a', `broker.address=${ctxA.address}`, 'broker.auth-token=sekret-token', 'timeout=20s', '--use']);
    await ok(['context', 'create', 'b', `broker.address=${ctxB.address}`]);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(readFileSync(file, 'utf8'), /current: a/);
    const list = await ok(['context', 'list', '-o', 'json']);
    const doc = JSON.parse(list.stdout) as { current: string; contexts: { name: string; current: boolean; settings: Record<string, string> }[] };
    assert.equal(doc.current, 'a');
    assert.deepEqual(doc.contexts.map((c) => [c.name, c.current]), [['a', true], ['b', false]]);
    assert.equal(doc.contexts[0]!.settings['broker.auth-token'], '<masked>');
    const table = await ok(['context', 'list']);
    assert.match(table.stdout, /│ \* +│ a +│ http:\/\/127\.0\.0\.1:\d+/);
    const show = await ok(['context', 'show']);
    assert.match(show.stdout, /^# context a \(current\)/);
    assert.match(show.stdout, /^broker\.auth-token = <masked>$/m);
    for (const out of [list.stdout, table.stdout, show.stdout, (await ok(['context', 'show', 'a', '-o', 'json'])).stdout, (await ok(['print-config'])).stdout]) {
      assert.ok(!out.includes('sekret-token'), out);
    }
  });

  it('bad names, settings and choices: one line, exit 2, the file unchanged', async () => {
    const before = readFileSync(file, 'utf8');
    for (const [args, re] of [
      [['context', 'create', 'c', 'broker.address=not a url'], /^gazctl: setting broker\.address: /],
      [['context', 'create', 'c', 'no-such-option=1'], /^gazctl: setting "no-such-option": not an option a context can hold/],
      [['context', 'create', 'c', 'timeout=soon'], /^gazctl: setting timeout: invalid duration "soon"/],
      [['context', 'create', '-bad'], /./],
      [['context', 'create', 'a b'], /^gazctl: context name "a b": use letters/],
      [['context', 'set', 'a'], /^gazctl: nothing to change/],
      [['context', 'use'], /^gazctl: give a context NAME, or --none/],
      [['journals', 'list', '--context', 'nope'], /^gazctl: no context "nope" \(named by --context\) in .*; there are: a, b$/m],
    ] as const) {
      const r = await gz([...args]);
      assert.equal(r.code, 2, describeInProcess([...args], r));
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, describeInProcess([...args], r));
      assert.match(r.stderr, re, describeInProcess([...args], r));
    }
    const exists = await gz(['context', 'create', 'a']);
    assert.equal(exists.code, 1);
    assert.match(exists.stderr, /^gazctl: context "a" exists already/);
    assert.equal(readFileSync(file, 'utf8'), before);
  });

  it('precedence: command line > context > gazctl.ini > environment > default', async () => {
    writeFileSync(join(dir, 'gazctl.ini'), `[journals.Broker]\nAddress = ${ini_.address}\n`);
    const env = { BROKER_ADDRESS: env_.address };
    assert.equal(await listed([], env), 'ctxa', 'the current context beats gazctl.ini and the environment');
    assert.equal(await listed(['--broker.address', flag_.address], env), 'flag', 'the command line beats the context');
    await ok(['context', 'use', '--none']);
    assert.equal(await listed([], env), 'ini', 'without a context, upstream\'s order');
    rmSync(join(dir, 'gazctl.ini'));
    assert.equal(await listed([], env), 'env');
  });

  it('choice of the context: --context > $GAZCTL_CONTEXT > current; a shadowed variable is named on stderr', async () => {
    await ok(['context', 'use', 'a']);
    assert.equal(await listed([]), 'ctxa');
    assert.equal(await listed([], { GAZCTL_CONTEXT: 'b' }), 'ctxb');
    assert.equal(await listed(['--context', 'a'], { GAZCTL_CONTEXT: 'b' }), 'ctxa');
    const r = await ok(['journals', 'list'], { BROKER_ADDRESS: env_.address });
    assert.match(r.stderr, /^gazctl: warning: \$BROKER_ADDRESS is ignored: context a sets broker\.address/);
    const pc = await ok(['print-config', '--context', 'b']);
    assert.ok(pc.stdout.includes(`; (from context b (${file}))\nAddress = ${ctxB.address}\n`), pc.stdout);
  });

  it('set and delete: values change, --unset removes, delete asks (or takes --yes) and clears current', async () => {
    await ok(['context', 'set', 'b', `broker.address=${flag_.address}`, 'zone=z2']);
    assert.equal(await listed(['--context', 'b']), 'flag');
    await ok(['context', 'set', 'b', '--unset', 'zone']);
    assert.equal((await loadContexts(file)).contexts.get('b')!.has('zone'), false);
    const refused = await gz(['context', 'delete', 'a']);
    assert.equal(refused.code, 2, 'no terminal, no --yes');
    assert.ok((await loadContexts(file)).contexts.has('a'));
    await ok(['context', 'delete', 'a', '--dry-run']);
    assert.ok((await loadContexts(file)).contexts.has('a'));
    await ok(['context', 'delete', 'a', '--yes']);
    const f = await loadContexts(file);
    assert.deepEqual([...f.contexts.keys()], ['b']);
    assert.equal(f.current, undefined);
  });
});
