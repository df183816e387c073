// attach-uuids side by side with the reference Go gazctl (v0.103.0): the same input and flags
// must give the same output once the UUIDs are taken out, the UUIDs of both tools must have the
// same make-up (version 1, RFC 4122 variant, one multicast producer id per run, clocks ticking
// per line from about now, OUTSIDE_TXN), and a too-long line must fail both after the same output.
// No servers are involved.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { runGoGazctl } from '../../src/testing/gazctl-go.js';
import { CLOCK_TICK, MessageFlags, clockFromTime, getClock, getFlags, getProducerID, parseUUID } from '../../src/lib/message/uuid.js';
import { describeResult, runGazctl } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'gazctl-attach-interop-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, content: string | Buffer): string => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};

const UUID_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

interface Both {
  go: { code: number | null; stdout: Buffer; stderr: string };
  ts: { code: number | null; stdout: Buffer; stderr: string };
  what: string;
}

async function both(args: string[], input?: string | Buffer): Promise<Both> {
  const go = await runGoGazctl(['attach-uuids', ...args], { input, cwd: dir });
  const ts = await runGazctl(['attach-uuids', ...args], { input, cwd: dir });
  const what = `Go: code ${go.code}\n${go.stderr}\n--- ours: ${describeResult(['attach-uuids', ...args], ts)}`;
  return { go, ts, what };
}

/** The UUID texts in order, and the output with each replaced by a placeholder. */
function takeUUIDs(out: Buffer): { uuids: string[]; rest: string } {
  const text = out.toString('latin1');
  return { uuids: text.match(UUID_TEXT) ?? [], rest: text.replace(UUID_TEXT, '<uuid>') };
}

/** Checks the make-up of one run's UUIDs; `startMs` is a wall time before the run began. */
function checkRun(uuids: string[], startMs: number, who: string): void {
  assert.ok(uuids.length > 0, `${who}: no UUIDs`);
  const ids = uuids.map(parseUUID);
  const producer = getProducerID(ids[0]!);
  assert.equal(producer[0]! & 1, 1, `${who}: multicast bit of the producer id`);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    assert.equal(id[6]! >> 4, 1, `${who}: version 1`);
    assert.equal(id[8]! >> 6, 0b10, `${who}: RFC 4122 variant`);
    assert.equal(getFlags(id), MessageFlags.OUTSIDE_TXN, `${who}: flags`);
    assert.deepEqual(getProducerID(id), producer, `${who}: one producer per run`);
    if (i > 0) assert.ok(getClock(id) - getClock(ids[i - 1]!) >= CLOCK_TICK, `${who}: the clock ticks per line`);
  }
  // The first clock is the run's start time (to the second: the two tools read it differently).
  assert.ok(getClock(ids[0]!) >= clockFromTime(startMs - 1000), `${who}: clock not before the run`);
  assert.ok(getClock(ids[0]!) <= clockFromTime(Date.now() + 1000), `${who}: clock not after the run`);
}

describe('attach-uuids: ours against the reference Go gazctl', () => {
  const csv = file('rows.csv', 'id,name\r\n1,eins\r\n2,zwei\n\n3,drei, dos\n4,ünïcödé ✓\nlast without newline');
  const second = file('more.csv', 'id,name\n5,fünf\n');
  const binary = file('bytes.bin', Buffer.from([0x61, 0xff, 0xfe, 0x0a, 0x00, 0x62, 0x0d, 0x0d, 0x0a, 0x80]));

  const cases: { name: string; args: string[]; input?: string | Buffer }[] = [
    { name: 'the default template on stdin', args: [], input: 'a\nb\r\n\n c \nlast' },
    { name: 'files, in order', args: [csv, second] },
    { name: '--skip-header on each file', args: ['--skip-header', csv, second] },
    { name: '--skip-header on stdin', args: ['--skip-header'], input: 'header\nrow 1\nrow 2\n' },
    { name: 'a postfix template', args: ['--template', '{{.Line}},{{.UUID}}\n', csv] },
    { name: 'a JSON wrapping template', args: ['--template', '{"uuid": "{{.UUID}}","record":{{.Line}}}\n'], input: '{"a":1}\n{"b":[2,3]}\n' },
    { name: 'trim markers and comments', args: ['--template', '{{/* row */}}[ {{- .Line -}} ]\t{{- .UUID}} {{- /* end */ -}}\n\n|\n'], input: 'x\ny\n' },
    { name: 'a template without a newline', args: ['--template', '{{.UUID}}:{{.Line}};'], input: 'p\nq\n' },
    { name: 'bytes that are not UTF-8, NUL and stray carriage returns', args: [binary] },
    { name: 'a line of --max-length - 1 bytes', args: ['--max-length', '10', '--template', '{{.Line}}|{{.UUID}}\n'], input: '123456789\n12345\n' },
    { name: 'empty input', args: [], input: '' },
  ];

  for (const c of cases) {
    test(`${c.name}: same output apart from the UUIDs`, async () => {
      const start = Date.now();
      const r = await both(c.args, c.input);
      assert.equal(r.go.code, 0, r.what);
      assert.equal(r.ts.code, 0, r.what);
      const go = takeUUIDs(r.go.stdout);
      const ts = takeUUIDs(r.ts.stdout);
      assert.equal(ts.rest, go.rest, r.what);
      assert.equal(ts.uuids.length, go.uuids.length, r.what);
      if (go.uuids.length > 0) {
        checkRun(go.uuids, start, 'Go');
        checkRun(ts.uuids, start, 'ours');
      }
    });
  }

  test('a line that does not fit --max-length: both fail with exit 1 after the same lines', async () => {
    for (const input of ['ok\n1234567890\nnever\n', 'ok\n1234567890']) {
      const r = await both(['--max-length', '10', '--template', '{{.Line}}\n'], input);
      assert.equal(r.go.code, 1, r.what);
      assert.equal(r.ts.code, 1, r.what);
      assert.equal(r.ts.stdout.toString(), r.go.stdout.toString(), r.what);
      assert.equal(r.ts.stdout.toString(), 'ok\n', r.what);
      assert.equal(r.ts.stderr.trimEnd().split('\n').length, 1, r.what);
    }
  });

  test('a missing file: both fail with exit 1 and write nothing', async () => {
    const r = await both([csv, join(dir, 'missing.csv')]);
    assert.equal(r.go.code, 1, r.what);
    assert.equal(r.ts.code, 1, r.what);
    assert.equal(r.go.stdout.length, 0, r.what);
    assert.equal(r.ts.stdout.length, 0, r.what);
  });
});
