// gazctl.ini: the parser and lookups of src/lib/config/ini.ts, and — through the real CLI — the
// precedence rule upstream's gazctl follows: command line > gazctl.ini > environment > default.
//
// The commands run in-process (test/helpers/inproc.ts) against stub brokers: which broker
// address was used shows in which stub answered.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { findIniFile, iniLookup, loadIni, parseIni } from '../../../src/lib/config/ini.js';
import { ValidationError } from '../../../src/lib/protocol/errors.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';
import { startStubBroker, type StubBroker } from '../../helpers/stub-broker.js';

describe('parseIni', () => {
  it('reads sections, trimmed key = value pairs and comments', () => {
    const ini = parseIni(
      [
        '; a comment',
        '# another',
        'Zone = top-level',
        '',
        '[journals.Broker]',
        '  Address =   http://b:8080  ',
        'TTL=5m',
        '[Journals.List]',
        'Selector = app=foo,tier in (a,b)',
        'Format = "yaml"',
        'Quoted = "a\\nb"',
        'Empty =',
      ].join('\n'),
    );
    assert.equal(ini.sections.get('')!.get('Zone'), 'top-level');
    assert.equal(ini.sections.get('journals.broker')!.get('Address'), 'http://b:8080');
    assert.equal(ini.sections.get('journals.broker')!.get('TTL'), '5m');
    // Section names are case-insensitive; values keep everything after the first "=".
    assert.equal(ini.sections.get('journals.list')!.get('Selector'), 'app=foo,tier in (a,b)');
    assert.equal(ini.sections.get('journals.list')!.get('Format'), 'yaml');
    assert.equal(ini.sections.get('journals.list')!.get('Quoted'), 'a\nb');
    assert.equal(ini.sections.get('journals.list')!.get('Empty'), '');
  });

  it('merges repeated sections and accepts CRLF line endings', () => {
    const ini = parseIni('[journals]\r\nZone = a\r\n[shards]\r\nZone = b\r\n[JOURNALS]\r\nbroker.address = http://x\r\n');
    assert.equal(ini.sections.get('journals')!.get('Zone'), 'a');
    assert.equal(ini.sections.get('journals')!.get('broker.address'), 'http://x');
    assert.equal(ini.sections.get('shards')!.get('Zone'), 'b');
  });

  for (const [text, line, what] of [
    ['[journals.Broker\nAddress = x\n', 1, /malformed section header/],
    ['[journals]\nZone = a\nAddress http://x\n', 3, /expected "key = value"/],
    ['[journals]\n= value\n', 2, /expected "key = value"/],
    ['[]\n', 1, /malformed section header/],
  ] as const) {
    it(`rejects ${JSON.stringify(text.split('\n')[line - 1])} naming line ${line}`, () => {
      assert.throws(
        () => parseIni(text, 'my.ini'),
        (err: unknown) => {
          assert.ok(err instanceof ValidationError, String(err));
          assert.match(err.message, what);
          assert.match(err.message, new RegExp(`my\\.ini:${line}\\b`));
          return true;
        },
      );
    });
  }
});

describe('iniLookup', () => {
  const ini = parseIni(
    ['[journals.Broker]', 'Address = from-field', '[journals]', 'broker.address = from-long-name', 'address = lower-case', '[journals.list]', 'l = from-short'].join('\n'),
  );

  it('searches the sections in order, then the keys in order', () => {
    assert.equal(iniLookup(ini, ['journals.Broker', 'journals'], ['Address', 'broker.address']), 'from-field');
    assert.equal(iniLookup(ini, ['journals'], ['Address', 'broker.address']), 'from-long-name');
    assert.equal(iniLookup(ini, ['journals.list'], ['Selector', 'selector', 'l']), 'from-short');
  });

  it('prefers an exact key over a case-insensitive one', () => {
    assert.equal(iniLookup(ini, ['journals'], ['broker.address']), 'from-long-name');
    assert.equal(iniLookup(ini, ['journals'], ['ADDRESS']), 'lower-case');
  });

  it('finds nothing in missing sections or without a file', () => {
    assert.equal(iniLookup(ini, ['shards.Broker'], ['Address']), undefined);
    assert.equal(iniLookup(undefined, ['journals'], ['Zone']), undefined);
  });
});

describe('findIniFile / loadIni', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gazctl-ini-unit-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('uses ./gazctl.ini first, then $HOME/.config/gazette/gazctl.ini, then $UserProfile', () => {
    const cwd = join(dir, 'cwd');
    const home = join(dir, 'home');
    const profile = join(dir, 'profile');
    for (const d of [cwd, join(home, '.config/gazette'), join(profile, '.config/gazette')]) mkdirSync(d, { recursive: true });
    const env = { HOME: home, UserProfile: profile };
    assert.equal(findIniFile(cwd, env), undefined);
    writeFileSync(join(profile, '.config/gazette/gazctl.ini'), '');
    assert.equal(findIniFile(cwd, env), join(profile, '.config/gazette/gazctl.ini'));
    writeFileSync(join(home, '.config/gazette/gazctl.ini'), '');
    assert.equal(findIniFile(cwd, env), join(home, '.config/gazette/gazctl.ini'));
    writeFileSync(join(cwd, 'gazctl.ini'), '');
    assert.equal(findIniFile(cwd, env), join(cwd, 'gazctl.ini'));
  });

  it('loads nothing without a path, and reports an unreadable file', () => {
    assert.equal(loadIni(undefined), undefined);
    assert.throws(() => loadIni(dir), /cannot read configuration file/);
    const p = join(dir, 'ok.ini');
    writeFileSync(p, '[journals]\nZone = z\n');
    assert.equal(loadIni(p)!.sections.get('journals')!.get('Zone'), 'z');
  });
});

// ---- precedence, through the commands run in-process -----------------------------------------

describe('precedence: command line > gazctl.ini > environment > default', () => {
  let cwd = '';
  // Three stub brokers: which one was asked shows where the address came from.
  let ini_: StubBroker, env_: StubBroker, flag_: StubBroker;

  before(async () => {
    cwd = mkdtempSync(join(tmpdir(), 'gazctl-ini-cli-'));
    [ini_, env_, flag_] = await Promise.all(['ini/from', 'env/from', 'flag/from'].map((n) => startStubBroker([{ name: n }])));
  });
  after(async () => {
    rmSync(cwd, { recursive: true, force: true });
    await Promise.all([ini_, env_, flag_].map((b) => b.stop()));
  });

  function ini(text: string | undefined): void {
    const p = join(cwd, 'gazctl.ini');
    if (text === undefined) rmSync(p, { force: true });
    else writeFileSync(p, text);
  }

  /** Runs `journals list` in `cwd`; returns the one journal listed, naming the stub asked. */
  async function listed(args: string[], env: Record<string, string>): Promise<string> {
    const all = ['journals', 'list', ...args];
    const r = await runInProcess(all, { cwd, env });
    assert.equal(r.code, 0, describeInProcess(all, r));
    const m = /\b(ini|env|flag)\/from\b/.exec(r.stdout);
    assert.ok(m, describeInProcess(all, r));
    return m[1]!;
  }

  it('broker address: default, then environment, then gazctl.ini, then the flag', async () => {
    ini(undefined);
    // Without any setting the default address is dialled: the Kubernetes Service name, which does
    // not resolve on a test machine.
    const r = await runInProcess(['journals', 'list', '--timeout', '1s'], { cwd, env: {} });
    assert.equal(r.code, 1, describeInProcess(['journals', 'list'], r));
    assert.match(r.stderr, /http:\/\/gazette:8080/, describeInProcess(['journals', 'list'], r));
    assert.equal(await listed([], { BROKER_ADDRESS: env_.address }), 'env');
    ini(`[journals.Broker]\nAddress = ${ini_.address}\n`);
    assert.equal(await listed([], {}), 'ini');
    assert.equal(await listed([], { BROKER_ADDRESS: env_.address }), 'ini', 'gazctl.ini beats the environment');
    assert.equal(await listed(['--broker.address', flag_.address], { BROKER_ADDRESS: env_.address }), 'flag', 'the command line beats gazctl.ini');
  });

  it('the namespaced long name works in the group section', async () => {
    ini(`[journals]\nbroker.address = ${ini_.address}\n`);
    assert.equal(await listed([], { BROKER_ADDRESS: env_.address }), 'ini');
  });

  it('a gazctl.ini timeout beats GAZCTL_TIMEOUT (the environment value is not even parsed)', async () => {
    ini(`[journals]\nbroker.address = ${ini_.address}\nTimeout = 5s\n`);
    assert.equal(await listed([], { GAZCTL_TIMEOUT: 'not-a-duration' }), 'ini');
    ini(`[journals]\nbroker.address = ${ini_.address}\n`);
    const r = await runInProcess(['journals', 'list'], { cwd, env: { GAZCTL_TIMEOUT: 'not-a-duration' } });
    assert.equal(r.code, 2, describeInProcess(['journals', 'list'], r));
    assert.match(r.stderr, /^gazctl: --timeout: invalid duration "not-a-duration".*\(from \$GAZCTL_TIMEOUT\)\n$/);
  });

  it('sub-command options: gazctl.ini fills what the command line leaves out', async () => {
    // Specs that fail validation (replication 9) are refused before anything is dialled, with an
    // error naming the file that was read: SpecsPath from [journals.apply], or --specs.
    const spec = (name: string) => `name: ${name}\nreplication: 9\nfragment:\n  length: 1024\n  compression_codec: NONE\n  refresh_interval: 1m\n`;
    writeFileSync(join(cwd, 'from-ini.yaml'), spec('ini/journal'));
    writeFileSync(join(cwd, 'from-flag.yaml'), spec('flag/journal'));
    ini(`[journals]\nbroker.address = ${ini_.address}\n[journals.apply]\nSpecsPath = from-ini.yaml\n`);
    let r = await runInProcess(['journals', 'apply'], { cwd });
    assert.equal(r.code, 1, describeInProcess(['journals', 'apply'], r));
    assert.match(r.stderr, /^gazctl: from-ini\.yaml: .*"ini\/journal".*replication/m);
    // --specs on the command line wins over SpecsPath.
    r = await runInProcess(['journals', 'apply', '--specs', 'from-flag.yaml'], { cwd });
    assert.equal(r.code, 1, describeInProcess(['journals', 'apply'], r));
    assert.match(r.stderr, /^gazctl: from-flag\.yaml: .*"flag\/journal".*replication/m);
    assert.doesNotMatch(r.stderr, /ini\/journal/);
  });

  it('sub-command switches and lists from gazctl.ini; -L on the command line replaces Labels', async () => {
    ini(`[journals]\nbroker.address = ${ini_.address}\n[journals.list]\nRF = true\nLabels = app\n`);
    const r = await runInProcess(['journals', 'list'], { cwd });
    assert.equal(r.code, 0, describeInProcess(['journals', 'list'], r));
    assert.match(r.stdout, /\bNAME\b.*\bRF\b.*\bAPP\b/);
    const r2 = await runInProcess(['journals', 'list', '-L', 'team'], { cwd });
    assert.match(r2.stdout, /\bNAME\b.*\bRF\b.*\bTEAM\b/);
    assert.doesNotMatch(r2.stdout, /\bAPP\b/, 'a -L on the command line replaces Labels from gazctl.ini');
  });

  it('a switch with an empty value in gazctl.ini is set, as upstream', async () => {
    ini(`[journals]\nbroker.address = ${ini_.address}\n[journals.list]\nRF =\n`);
    const r = await runInProcess(['journals', 'list'], { cwd });
    assert.equal(r.code, 0, describeInProcess(['journals', 'list'], r));
    assert.match(r.stdout, /\bNAME\b.*\bRF\b/);
  });

  it("edit's selector is read from the command line only (upstream: no-ini)", async () => {
    ini(`[journals]\nbroker.address = ${ini_.address}\n[journals.edit]\nSelector = name=ini/from\n[journals.list]\nSelector = name=nothing/here\n`);
    const r = await runInProcess(['journals', 'edit'], { cwd });
    assert.equal(r.code, 2, describeInProcess(['journals', 'edit'], r));
    assert.match(r.stderr, /missing required flag -l\/--selector/);
    // …whereas list reads its Selector from the file: the List request shows what was sent.
    const before = ini_.requests.length;
    await runInProcess(['journals', 'list'], { cwd });
    const req = ini_.requests.slice(before).find((q) => q.method === 'list')!.request as { selector: { include: { labels: { name: string; value: string }[] } } };
    assert.deepEqual(req.selector.include.labels.map((l) => `${l.name}=${l.value}`), ['name=nothing/here']);
  });

  it('a bad value in gazctl.ini is refused naming the option and the file', async () => {
    ini('[journals.Broker]\nSize = lots\n');
    const r = await runInProcess(['journals', 'list'], { cwd });
    assert.equal(r.code, 2, describeInProcess(['journals', 'list'], r));
    assert.match(r.stderr, /^gazctl: --broker\.cache\.size: expected an integer, got "lots" \(from .*gazctl\.ini\)\n$/);
  });

  it('a malformed gazctl.ini fails every command with one line naming the file and line', async () => {
    ini('[journals]\nZone = a\n[journals.Broker\n');
    const r = await runInProcess(['journals', 'list'], { cwd });
    assert.equal(r.code, 1, describeInProcess(['journals', 'list'], r));
    assert.equal(r.stdout.length, 0);
    assert.match(r.stderr, /^gazctl: .*gazctl\.ini:3: malformed section header.*\n$/);
  });
});
