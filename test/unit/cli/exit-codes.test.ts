// Exit codes scripts can trust (src/cli/exit.ts): every bad input below ends with exactly one
// line `gazctl: …` on stderr, nothing on stdout, and its exact exit code: 2 for usage errors (a
// bad flag, flag value or flag combination, whether the value came from the command line,
// gazctl.ini or the environment), 1 for failures of the command itself. Commands run in-process
// against a stub broker.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { EXIT, OutputClosedError, UsageError, exitCodeFor } from '../../../src/cli/exit.js';
import { GazctlError } from '../../../src/lib/protocol/errors.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';
import { startStubBroker, type StubBroker } from '../../helpers/stub-broker.js';

interface Case {
  name: string;
  /** `{dir}` is the case's own directory (also its cwd). */
  args: string[];
  code: 1 | 2;
  says: RegExp;
  ini?: string;
  env?: Record<string, string>;
  input?: string;
  /** Dial the stub broker (default) or an address of the case's own. */
  broker?: string;
}

const FRAG = 'fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m}';

const CASES: Case[] = [
  // ---- usage: the command line ----
  { name: 'bad --format choice', args: ['journals', 'list', '-o', 'xml'], code: 2, says: /--format=xml.*table, yaml, json/ },
  { name: 'unknown flag', args: ['journals', 'list', '--bogus'], code: 2, says: /--bogus/ },
  { name: 'flag without its value', args: ['journals', 'list', '-L'], code: 2, says: /--label-columns.*value/ },
  { name: 'negative --max-txn-size', args: ['journals', 'apply', '--max-txn-size', '-1'], input: 'name: a/b\n', code: 2, says: /^gazctl: --max-txn-size: expected an integer >= 0, got -1$/ },
  { name: 'non-integer --max-txn-size', args: ['journals', 'apply', '--max-txn-size', 'abc'], code: 2, says: /--max-txn-size: expected an integer, got "abc"/ },
  { name: 'missing -l on read', args: ['journals', 'read'], code: 2, says: /missing required flag -l\/--selector/ },
  { name: 'missing -l on append', args: ['journals', 'append'], input: 'x', code: 2, says: /missing required flag -l\/--selector/ },
  { name: 'missing -l on edit', args: ['journals', 'edit'], code: 2, says: /missing required flag -l\/--selector/ },
  { name: 'missing argument of store-health', args: ['journals', 'store-health'], code: 2, says: /^gazctl: Missing 1 required arg: STORE_URL: Fragment store URL, e\.g\. s3:\/\/bucket\/prefix\/ or file:\/\/\/dir\/\.$/ },
  { name: '--from abc', args: ['journals', 'read', '-l', 'name=a/b', '--from', 'abc'], code: 2, says: /--from: expected unix seconds, an RFC 3339 time or a duration ago such as 24h, got "abc"/ },
  { name: 'negative --from', args: ['journals', 'read', '-l', 'name=a/b', '--from', '-5'], code: 2, says: /--from: expected unix seconds >= 0, got -5/ },
  { name: 'negative --to', args: ['journals', 'fragments', '--to', '-1'], code: 2, says: /--to: expected unix seconds >= 0/ },
  { name: 'bad --to time', args: ['journals', 'read', '-l', 'name=a/b', '--to', 'tomorrow'], code: 2, says: /^gazctl: --to: expected unix seconds, an RFC 3339 time or a duration ago such as 24h, got "tomorrow"$/ },
  { name: 'RFC 3339 --from without a zone', args: ['journals', 'fragments', '--from', '2024-05-01T00:00:00'], code: 2, says: /^gazctl: --from: .*got "2024-05-01T00:00:00"$/ },
  { name: 'negative duration --from', args: ['journals', 'fragments', '--from', '-24h'], code: 2, says: /^gazctl: --from: a duration ago must not be negative, got "-24h"$/ },
  { name: 'read --to with --block', args: ['journals', 'read', '-l', 'name=a/b', '--to', '24h', '--block'], code: 2, says: /^gazctl: --to reads a closed time window: it cannot be combined with --block$/ },
  { name: 'read --to with --tail', args: ['journals', 'read', '-l', 'name=a/b', '--to', '1700000000', '--tail'], code: 2, says: /^gazctl: --to reads a closed time window: it cannot be combined with --tail$/ },
  { name: 'read --from after --to', args: ['journals', 'read', '-l', 'name=a/b', '--from', '2024-05-02T00:00:00Z', '--to', '2024-05-01T00:00:00Z'], code: 2, says: /^gazctl: --from \(1714608000\) is after --to \(1714521600\)$/ },
  { name: 'fragments --from after --to', args: ['journals', 'fragments', '--from', '1h', '--to', '2h'], code: 2, says: /^gazctl: --from \(\d+\) is after --to \(\d+\)$/ },
  { name: 'fragments --totals with a value', args: ['journals', 'fragments', '--totals=yes'], code: 2, says: /^gazctl: / },
  { name: 'bad --timeout', args: ['journals', 'list', '--timeout', 'banana'], code: 2, says: /--timeout: invalid duration "banana"/ },
  { name: 'bad --url-ttl', args: ['journals', 'fragments', '--url-ttl', 'forever'], code: 2, says: /--url-ttl: invalid duration "forever"/ },
  { name: 'bad selector', args: ['journals', 'list', '-l', 'app in (b'], code: 2, says: /-l\/--selector: invalid selector "app in \(b"/ },
  { name: 'selector with a one-letter label', args: ['journals', 'read', '-l', 'x=y'], code: 2, says: /invalid selector "x=y"/ },
  { name: 'bad --broker.address URL', args: ['journals', 'list', '--broker.address', 'not a url'], code: 2, says: /--broker\.address: endpoint "not a url": not an absolute URL/ },
  { name: 'unsupported --broker.address scheme', args: ['journals', 'list', '--broker.address', 'ftp://127.0.0.1:1'], code: 2, says: /unsupported scheme "ftp"/ },
  { name: 'bad --broker.cache.size', args: ['journals', 'list', '--broker.cache.size', 'many'], code: 2, says: /--broker\.cache\.size: expected an integer, got "many"/ },
  { name: '--framing none with --mapping modulo', args: ['journals', 'append', '-l', 'name=a/b', '--mapping', 'modulo'], input: 'k\nv\n', code: 2, says: /--framing none.*--mapping random/ },
  { name: '--base64 with random mapping', args: ['journals', 'append', '-l', 'name=a/b', '--framing', 'lines', '--base64'], input: 'x\n', code: 2, says: /--base64 requires/ },

  // ---- usage: gazctl.ini and the environment ----
  { name: 'gazctl.ini: negative MaxTxnSize', args: ['journals', 'apply'], ini: '[journals.apply]\nMaxTxnSize = -1\n', input: 'name: a/b\n', code: 2, says: /--max-txn-size: expected an integer >= 0, got -1 \(from .*gazctl\.ini\)$/ },
  { name: 'gazctl.ini: FromUnix = abc', args: ['journals', 'read', '-l', 'name=a/b'], ini: '[journals.read]\nFromUnix = abc\n', code: 2, says: /--from: expected unix seconds, an RFC 3339 time or a duration ago such as 24h, got "abc" \(from .*gazctl\.ini\)/ },
  { name: 'gazctl.ini: bad log level', args: ['journals', 'list'], ini: '[journals.Logging]\nLevel = loud\n', code: 2, says: /--log\.level: expected one of .*got "loud" \(from .*gazctl\.ini\)/ },
  { name: 'gazctl.ini: bad Format', args: ['journals', 'list'], ini: '[journals.list]\nFormat = xml\n', code: 2, says: /--format: expected one of table, yaml, json, got "xml"/ },
  { name: 'gazctl.ini: bad boolean', args: ['journals', 'list'], ini: '[journals.list]\nPrimary = yes\n', code: 2, says: /--primary: expected true or false, got "yes"/ },
  { name: 'gazctl.ini: bad broker address', args: ['journals', 'list'], ini: '[journals.Broker]\nAddress = nowhere\n', code: 2, says: /--broker\.address: endpoint "nowhere".*gazctl\.ini/ },
  { name: 'gazctl.ini: edit selector is not read from the file', args: ['journals', 'edit'], ini: '[journals.edit]\nSelector = name=a/b\n', code: 2, says: /missing required flag -l\/--selector/ },
  { name: 'environment: bad BROKER_CACHE_SIZE', args: ['journals', 'list'], env: { BROKER_CACHE_SIZE: 'lots' }, code: 2, says: /--broker\.cache\.size: expected an integer, got "lots" \(from \$BROKER_CACHE_SIZE\)/ },
  { name: 'environment: bad GAZCTL_TIMEOUT', args: ['journals', 'list'], env: { GAZCTL_TIMEOUT: 'soon' }, code: 2, says: /--timeout: invalid duration "soon" .*\(from \$GAZCTL_TIMEOUT\)$/ },

  // ---- failures ----
  { name: 'missing --specs file', args: ['journals', 'apply', '--specs', '{dir}/nope.yaml'], code: 1, says: /cannot read .*nope\.yaml: no such file/ },
  { name: 'append -i of a missing file', args: ['journals', 'append', '-l', 'name=a/b', '-i', '/missing'], code: 1, says: /^gazctl: cannot read \/missing: no such file$/ },
  { name: 'append -i of a missing file, lines framing', args: ['journals', 'append', '-l', 'name=a/b', '--framing', 'lines', '-i', '/missing'], code: 1, says: /^gazctl: cannot read \/missing: no such file$/ },
  { name: 'read --offsets-out that cannot be written', args: ['journals', 'read', '-l', 'name=a/b', '--tail', '--offsets-out', '{dir}/no/such/dir/o.json'], code: 1, says: /cannot write --offsets-out .*o\.json/ },
  { name: 'missing --offsets file', args: ['journals', 'read', '-l', 'name=a/b', '--offsets', '{dir}/nope.json'], code: 1, says: /--offsets .*nope\.json: no such file/ },
  { name: 'malformed gazctl.ini', args: ['journals', 'list'], ini: '[journals.Broker\n', code: 1, says: /gazctl\.ini:1: malformed section header/ },
  { name: 'YAML that does not validate', args: ['journals', 'apply'], input: `name: acme/x\nreplication: 9\n${FRAG}\n`, code: 1, says: /"acme\/x".*replication/ },
  { name: 'edit of a selector matching nothing', args: ['journals', 'edit', '-l', 'app=nothing'], env: { GAZ_EDITOR: 'false' }, code: 1, says: /no journals match selector "app=nothing"/, broker: 'empty' },
  { name: 'append lines: input ends inside a record', args: ['journals', 'append', '-l', 'name=a/b', '--framing', 'lines'], input: 'no newline', code: 1, says: /ends inside a record/ },
  { name: 'unreachable broker', args: ['journals', 'list', '--timeout', '1s'], code: 1, says: /broker http:\/\/127\.0\.0\.1:1 is unreachable/, broker: 'http://127.0.0.1:1' },
];

let broker: StubBroker | undefined;
let empty: StubBroker | undefined;
let work = '';

describe('exit codes: exactly one line on stderr and the exact code', () => {
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'gazctl-exit-codes-'));
    broker = await startStubBroker([{ name: 'a/b', labels: { app: 'x' }, content: 'hello\n' }]);
    empty = await startStubBroker([]);
  });
  after(async () => {
    await broker?.stop();
    await empty?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test('the table has at least 25 cases with distinct names, both codes', () => {
    assert.ok(CASES.length >= 25, `${CASES.length} cases`);
    assert.equal(new Set(CASES.map((c) => c.name)).size, CASES.length);
    assert.ok(CASES.some((c) => c.code === 1) && CASES.some((c) => c.code === 2));
  });

  let n = 0;
  for (const c of CASES) {
    const id = ++n;
    test(c.name, async () => {
      const dir = join(work, `case-${id}`);
      mkdirSync(dir, { recursive: true });
      if (c.ini !== undefined) writeFileSync(join(dir, 'gazctl.ini'), c.ini);
      const args = c.args.map((a) => a.replaceAll('{dir}', dir));
      const address = c.broker === 'empty' ? empty!.address : c.broker ?? broker!.address;
      const r = await runInProcess(args, { cwd: dir, input: c.input, env: { BROKER_ADDRESS: address, ...c.env } });
      const what = describeInProcess(args, r);
      assert.equal(r.code, c.code, what);
      assert.equal(r.stdout, '', `nothing on stdout\n${what}`);
      assert.match(r.stderr, /^gazctl: [^\n]+\n$/, `exactly one line "gazctl: …" on stderr\n${what}`);
      assert.match(r.stderr.trimEnd(), c.says, what);
    });
  }

  test('nothing was appended by the failed appends', () => {
    assert.equal(broker!.appended.size, 0);
  });
});

test('stdout closed by its reader maps to 141 (128 + SIGPIPE), also when wrapped', () => {
  const closed = new OutputClosedError('stdout was closed by its reader');
  assert.equal(EXIT.PIPE, 141);
  assert.equal(exitCodeFor(closed), 141);
  assert.equal(exitCodeFor(new GazctlError('error reading a/b', { cause: closed })), 141);
  assert.equal(exitCodeFor(new GazctlError('cannot write output: ENOSPC')), 1);
  assert.equal(exitCodeFor(new UsageError('--x: bad')), 2);
});
