// `gazctl attach-uuids` in-process: templates, inputs (stdin and files), --skip-header,
// --max-length, gazctl.ini, and the exit codes of bad input.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { CLOCK_TICK, MessageFlags, getClock, getFlags, getProducerID, parseUUID } from '../../../src/lib/message/uuid.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';

const dir = mkdtempSync(join(tmpdir(), 'gazctl-attach-uuids-'));
const file = (name: string, text: string | Buffer): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

async function run(args: string[], opts: { input?: string; cwd?: string } = {}) {
  const r = await runInProcess(['attach-uuids', ...args], opts);
  return { ...r, what: describeInProcess(['attach-uuids', ...args], r) };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Splits `<uuid><sep><rest>` lines; checks the UUIDs are of one producer, in clock order, OUTSIDE_TXN. */
function splitLines(out: string, sep = ','): { uuids: string[]; rest: string[] } {
  const lines = out.split('\n');
  assert.equal(lines.pop(), '', 'output ends with a newline');
  const uuids = lines.map((l) => l.slice(0, 36));
  const rest = lines.map((l) => {
    assert.equal(l.slice(36, 36 + sep.length), sep, l);
    return l.slice(36 + sep.length);
  });
  for (const u of uuids) assert.match(u, UUID_RE);
  const ids = uuids.map(parseUUID);
  for (let i = 1; i < ids.length; i++) {
    assert.deepEqual(getProducerID(ids[i]!), getProducerID(ids[0]!), 'one producer per run');
    assert.ok(getClock(ids[i]!) - getClock(ids[i - 1]!) >= CLOCK_TICK, 'the clock ticks per line');
  }
  for (const id of ids) assert.equal(getFlags(id), MessageFlags.OUTSIDE_TXN);
  return { uuids, rest };
}

describe('attach-uuids', () => {
  it('prefixes each line of stdin with a UUID by default (CRLF and a last line without newline included)', async () => {
    const r = await run([], { input: 'a,b\r\n\nc,d' });
    assert.equal(r.code, 0, r.what);
    assert.equal(r.stderr, '', r.what);
    assert.deepEqual(splitLines(r.stdout).rest, ['a,b', '', 'c,d']);
  });

  it('reads every PATH in order, with one producer and clock across them, dropping each header with --skip-header', async () => {
    const a = file('a.csv', 'id,name\n1,one\n2,two\n');
    const b = file('b.csv', 'id,name\n3,three');
    const r = await run(['--skip-header', a, b], { input: 'not read\n' });
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(splitLines(r.stdout).rest, ['1,one', '2,two', '3,three']);
    const all = await run([a, b]);
    assert.deepEqual(splitLines(all.stdout).rest, ['id,name', '1,one', '2,two', 'id,name', '3,three']);
  });

  it('renders --template with .Line and .UUID', async () => {
    const r = await run(['--template', '{"uuid":"{{.UUID}}","record":{{ .Line }}}\n'], { input: '{"a":1}\n{"b":2}\n' });
    assert.equal(r.code, 0, r.what);
    const docs = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { uuid: string; record: unknown });
    assert.deepEqual(docs.map((d) => d.record), [{ a: 1 }, { b: 2 }]);
    for (const d of docs) assert.match(d.uuid, UUID_RE);
    const post = await run(['--template', '{{.Line}}|{{.UUID}}\n'], { input: 'x\ny\n' });
    assert.deepEqual(post.stdout.trimEnd().split('\n').map((l) => l.split('|')[0]), ['x', 'y']);
  });

  it('reads its options from the [attach-uuids] section of gazctl.ini; the command line wins', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'gazctl-attach-ini-'));
    writeFileSync(join(cwd, 'gazctl.ini'), '[attach-uuids]\nTemplate = "{{.Line}};{{.UUID}}\\n"\nSkipHeader = true\n');
    const r = await run([], { input: 'header\nrow\n', cwd });
    assert.equal(r.code, 0, r.what);
    assert.match(r.stdout, /^row;[0-9a-f-]{36}\n$/);
    const flag = await run(['--template', '{{.Line}}\n'], { input: 'header\nrow\n', cwd });
    assert.equal(flag.stdout, 'row\n');
  });

  it('refuses a template action it does not support with one line and exit 2, before reading input', async () => {
    const r = await run(['--template', '{{printf "%s" .Line}}\n'], { input: 'x\n' });
    assert.equal(r.code, 2, r.what);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'gazctl: --template: unsupported template action {{printf "%s" .Line}} at line 1, column 1: only the fields {{.UUID}} and {{.Line}}, comments and trim markers are supported\n');
    const bad = await run(['--template', '{{.Line'], { input: 'x\n' });
    assert.equal(bad.code, 2, bad.what);
    assert.match(bad.stderr, /^gazctl: --template: unclosed action at line 1, column 1\n$/);
  });

  it('opens every PATH before writing: a missing file or a directory fails with exit 1 and no output', async () => {
    const a = file('ok.csv', '1\n2\n');
    const missing = await run([a, join(dir, 'nope.csv')]);
    assert.equal(missing.code, 1, missing.what);
    assert.equal(missing.stdout, '');
    assert.equal(missing.stderr, `gazctl: cannot read ${join(dir, 'nope.csv')}: no such file\n`);
    const sub = join(dir, 'sub');
    mkdirSync(sub, { recursive: true });
    const d = await run([a, sub]);
    assert.equal(d.code, 1, d.what);
    assert.equal(d.stdout, '');
    assert.equal(d.stderr, `gazctl: cannot read ${sub}: is a directory\n`);
  });

  it('fails a line that does not fit --max-length with its newline, after writing the lines before it', async () => {
    const p = file('long.txt', 'abc\nabcd\nlater\n');
    const r = await run(['--max-length', '4', '--template', '{{.Line}}\n', p]);
    assert.equal(r.code, 1, r.what);
    assert.equal(r.stdout, 'abc\n');
    assert.equal(r.stderr, `gazctl: line 2 of ${p} is too long (a line, counting its newline, may be at most 4 bytes); raise --max-length\n`);
    const ok = await run(['--max-length', '6', '--template', '{{.Line}}\n', p]);
    assert.equal(ok.code, 0, ok.what);
    assert.equal(ok.stdout, 'abc\nabcd\nlater\n');
  });

  it('refuses a --max-length below 1 as a usage error', async () => {
    const r = await run(['--max-length', '0'], { input: '' });
    assert.equal(r.code, 2, r.what);
    assert.match(r.stderr, /^gazctl: --max-length: expected an integer >= 1, got 0\n$/);
  });

  it('handles many lines and lines longer than its read and write chunks', async () => {
    const long = 'x'.repeat(3 << 20); // 3 MiB: over the 1 MiB reads and the 256 KiB output chunks
    const rows = Array.from({ length: 20_000 }, (_, i) => `row ${i}`);
    const p = file('many.txt', [...rows.slice(0, 10_000), long, ...rows.slice(10_000)].join('\n') + '\n');
    const r = await run([p]);
    assert.equal(r.code, 0, r.what.slice(0, 2000));
    const { rest } = splitLines(r.stdout);
    assert.equal(rest.length, 20_001);
    assert.equal(rest[10_000], long);
    assert.deepEqual([...rest.slice(0, 10_000), ...rest.slice(10_001)], rows);
  });
});
