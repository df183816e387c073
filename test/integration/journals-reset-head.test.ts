// Acceptance: disaster recovery with `journals reset-head`, `journals suspend` and
// `journals store-health`, against three reference Go brokers + etcd.
//
// The disaster: journals are written, then every journal spec and assignment is deleted from
// etcd (as if etcd had been lost) and the journals are applied again. The brokers that take the
// journals over start their pipelines at offset 0 while the stores hold fragments up to the old
// head, so they refuse appends with INDEX_HAS_GREATER_OFFSET. reset-head must move the head to
// the end of the index: appends then continue there and the journal reads back every offset once.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { deletePrefix, listJournals, pollUntil, runGoGazctl, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { gz, gzOk, listJson, oneStderrLine } from '../helpers/journals.js';

/** One YAML document with the journals `names`, replication 3, small fragments in file:///. */
const specs = (names: string[]) => `name: reset/
replication: 3
labels:
- name: app
  value: reset
fragment:
  length: 1024
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1s
children:
${[...names].sort().map((n) => `- name: ${n}\n`).join("")}`;

const A = 'reset/a';
const G = 'reset/g'; // reset by the reference Go gazctl
const S = 'reset/s'; // suspended, then reset-head
const E = 'reset/e'; // never written
const ALL = [A, G, S, E];

/** `count` newline-terminated records of about 300 bytes, tagged so every record is unique. */
function records(tag: string, count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) out += `${tag}-${String(i).padStart(4, '0')} ${'x'.repeat(290)}\n`;
  return out;
}

/** Offset ranges of the fragment files of `journal` in the file store (name: begin-end-sum.ext). */
function storedRanges(cluster: Cluster, journal: string): [bigint, bigint][] {
  let names: string[];
  try {
    names = readdirSync(join(cluster.fileRoot, journal));
  } catch {
    return [];
  }
  return names
    .map((n) => /^([0-9a-f]{16})-([0-9a-f]{16})-/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [BigInt('0x' + m[1]), BigInt('0x' + m[2])] as [bigint, bigint])
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
}

function coveredTo(ranges: [bigint, bigint][]): bigint {
  let end = 0n;
  for (const [b, e] of ranges) if (b <= end && e > end) end = e;
  return end;
}

async function append(cluster: Cluster, journal: string, data: string) {
  return gz(cluster, ['journals', 'append', '-l', `name=${journal}`, '--framing', 'lines'], { input: data });
}

async function readAll(cluster: Cluster, journal: string): Promise<string> {
  const r = await gzOk(cluster, ['journals', 'read', '-l', `name=${journal}`]);
  return r.stdout.toString();
}

async function level(cluster: Cluster, journal: string): Promise<string> {
  const [j] = await listJson(cluster, `name=${journal}`);
  assert.ok(j, `journal ${journal} is listed`);
  return String(j.spec.suspend?.level ?? 'NONE');
}

describe('reset-head, suspend and store-health (acceptance, 3 Go brokers)', { timeout: 400_000 }, () => {
  let cluster: Cluster;
  const before1: Record<string, string> = {};

  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    await gzOk(cluster, ['journals', 'apply'], { input: specs(ALL) });
    await waitForJournalsAssigned(cluster, ALL, 30_000);
    for (const j of [A, G, S]) {
      // Several appends of more than a fragment length each: the fragments roll as they grow.
      before1[j] = '';
      for (let k = 0; k < 3; k++) {
        const part = records(`${j}-old${k}`, 5);
        await gzOk(cluster, ['journals', 'append', '-l', `name=${j}`, '--framing', 'lines'], { input: part });
        before1[j] += part;
      }
    }
  });
  after(async () => {
    await cluster?.stop();
  });

  test('suspend: not idle, then --force, then already suspended; list and Go gazctl show it; reset-head keeps it', async () => {
    // Fresh fragments are not idle: the broker leaves the journal as it is.
    let r = await gzOk(cluster, ['journals', 'suspend', '-l', `name=${S}`]);
    assert.match(r.stdout.toString(), /not suspended/, describeResult(['suspend'], r));
    assert.equal(await level(cluster, S), 'NONE');
    // So does the reference gazctl.
    const goNotIdle = await runGoGazctl(['journals', 'suspend', '-l', `name=${S}`], { brokerAddress: cluster.brokerAddress });
    assert.equal(goNotIdle.code, 0, goNotIdle.stderr);
    assert.equal(await level(cluster, S), 'NONE');

    r = await gzOk(cluster, ['journals', 'suspend', '-l', `name=${S}`, '--force', '-o', 'json']);
    const doc = JSON.parse(r.stdout.toString()) as { journals: { journal: string; result: string; suspend: string; resume_offset: string }[] };
    assert.deepEqual(doc.journals, [{ journal: S, result: 'suspended', suspend: 'PARTIAL', resume_offset: String(Buffer.byteLength(before1[S]!)) }]);
    assert.equal(await level(cluster, S), 'PARTIAL');

    // The reference gazctl shows the suspension (`<S>` after the primary).
    const go = await runGoGazctl(['journals', 'list', '-l', `name=${S}`, '-p'], { brokerAddress: cluster.brokerAddress });
    assert.equal(go.code, 0, go.stderr);
    assert.match(go.stdout.toString(), /<S>/);

    // Suspending again: the broker answers SUSPENDED, which is success.
    r = await gzOk(cluster, ['journals', 'suspend', '-l', `name=${S}`]);
    assert.match(r.stdout.toString(), /already suspended/);
    const goSuspend = await runGoGazctl(['journals', 'suspend', '-l', `name=${S}`], { brokerAddress: cluster.brokerAddress });
    assert.equal(goSuspend.code, 0, goSuspend.stderr);
    assert.equal(await level(cluster, S), 'PARTIAL');

    // A journal never written is suspended fully, by us and left alone by the reference tool.
    r = await gzOk(cluster, ['journals', 'suspend', '-l', `name=${E}`]);
    assert.match(r.stdout.toString(), /suspended/);
    assert.equal(await level(cluster, E), 'FULL');
    const goE = await runGoGazctl(['journals', 'suspend', '-l', `name=${E}`], { brokerAddress: cluster.brokerAddress });
    assert.equal(goE.code, 0, goE.stderr);
    assert.equal(await level(cluster, E), 'FULL');

    // reset-head must not resume the partially suspended journal (v0.103.0 has no SUSPEND_KEEP),
    // and skips the fully suspended one.
    r = await gzOk(cluster, ['journals', 'reset-head', '-l', `name in (${S}, ${E})`, '--yes', '-o', 'json']);
    const plan = JSON.parse(r.stdout.toString()) as { journals: { journal: string; action: string; result?: string; reason?: string }[] };
    const byName = new Map(plan.journals.map((j) => [j.journal, j]));
    assert.equal(byName.get(E)?.action, 'skip');
    assert.match(byName.get(E)?.reason ?? '', /fully suspended/);
    assert.equal(byName.get(S)?.result, 'skipped');
    assert.equal(await level(cluster, S), 'PARTIAL');
    assert.equal(await level(cluster, E), 'FULL');
  });

  test('store-health: healthy, unhealthy, delete prefix, bad inputs', async () => {
    let r = await gzOk(cluster, ['journals', 'store-health', 'file:///']);
    assert.equal(r.stdout.toString(), 'Fragment store file:/// is healthy\n');
    r = await gzOk(cluster, ['journals', 'store-health', 'file:///', '--check-delete-prefix', 'probe/']);
    assert.equal(r.stdout.toString(), 'Fragment store file:/// is healthy\n');
    r = await gzOk(cluster, ['journals', 'store-health', 'file:///', '--check-delete-prefix=']);
    assert.equal(r.stdout.toString(), 'Fragment store file:/// is healthy\n');

    const go = await runGoGazctl(['journals', 'store-health', 'file:///missing/dir/'], { brokerAddress: cluster.brokerAddress });
    r = await gz(cluster, ['journals', 'store-health', 'file:///missing/dir/']);
    assert.equal(r.code, 1, describeResult(['store-health'], r));
    assert.equal(go.code, 1, go.stderr);
    assert.match(oneStderrLine(['store-health'], r), /^gazctl: fragment store file:\/\/\/missing\/dir\/ is unhealthy: .+/);
    assert.equal(r.stdout.toString(), '');

    for (const [args, code, re] of [
      [['http://example.com/x/'], 2, /STORE_URL "http:\/\/example\.com\/x\/": scheme "http" is not supported/],
      [['file:///no-slash'], 2, /must end in "\/"/],
      [['file:///', '--check-delete-prefix', 'probe'], 2, /--check-delete-prefix "probe": must end in "\/"/],
      [['file:///', '--check-delete-prefix', '../up/'], 2, /must not contain "\." or "\.\." segments/],
      [[], 2, /STORE_URL/],
    ] as [string[], number, RegExp][]) {
      const all = ['journals', 'store-health', ...args];
      const res = await gz(cluster, all);
      assert.equal(res.code, code, describeResult(all, res));
      assert.match(oneStderrLine(all, res), re);
      assert.equal(res.stdout.toString(), '');
    }
  });

  test('wipe etcd, appends refused with INDEX_HAS_GREATER_OFFSET, reset-head, appends continue at the old head', async () => {
    const journals = [A, G];
    // Get every old byte persisted first: a spool the brokers still hold is lost with them (the
    // fragments of a real disaster are only those already in the store). Suspending with --force
    // rolls the spool, so it is persisted; the journals applied again below are not suspended.
    await gzOk(cluster, ['journals', 'suspend', '-l', `name in (${journals.join(', ')})`, '--force']);
    // The disaster: every journal spec and assignment disappears from etcd.
    await deletePrefix(cluster.etcd.endpoint, `${cluster.etcdPrefix}/items/`);
    await deletePrefix(cluster.etcd.endpoint, `${cluster.etcdPrefix}/assign/`);
    // The brokers drop the journals, persisting what they held.
    let listed = -1;
    await pollUntil(
      'journals dropped and their fragments persisted',
      async () => {
        listed = (await listJournals(cluster.brokerAddress)).journals.length;
        if (listed !== 0) return false;
        return journals.every((j) => coveredTo(storedRanges(cluster, j)) === BigInt(Buffer.byteLength(before1[j]!)));
      },
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        describe: () => `listed ${listed}; stored: ${journals.map((j) => `${j} ${JSON.stringify(storedRanges(cluster, j).map(([b, e]) => `${b}-${e}`))} of ${Buffer.byteLength(before1[j]!)}`).join('; ')}`,
      },
    );

    await gzOk(cluster, ['journals', 'apply'], { input: specs(journals) });
    await waitForJournalsAssigned(cluster, journals, 30_000);

    for (const j of journals) {
      const r = await append(cluster, j, records(`${j}-lost`, 1));
      assert.equal(r.code, 1, describeResult(['append'], r));
      const line = oneStderrLine(['append'], r);
      assert.match(line, /INDEX_HAS_GREATER_OFFSET/);
      assert.match(line, /journals reset-head/);
    }

    // Bad inputs change nothing.
    for (const [args, code, re] of [
      [['-l', `name=${A}`], 2, /refusing to reset write heads without confirmation/],
      [['-l', 'name=does/not/exist', '--yes'], 1, /no journals match selector/],
      [['-l', `name=${A}`, '--dry-run', '--yes'], 2, /--dry-run and --yes contradict each other/],
      [['-l', 'name in (a'], 2, /selector/],
      [[], 2, /selector/],
    ] as [string[], number, RegExp][]) {
      const all = ['journals', 'reset-head', ...args];
      const r = await gz(cluster, all);
      assert.equal(r.code, code, describeResult(all, r));
      assert.match(oneStderrLine(all, r), re);
    }
    // A dry run shows the plan and changes nothing either.
    const dry = await gzOk(cluster, ['journals', 'reset-head', '-l', `name=${A}`, '--dry-run']);
    const oldA = BigInt(Buffer.byteLength(before1[A]!));
    assert.match(dry.stdout.toString(), new RegExp(`${A}\\s*│\\s*NONE\\s*│\\s*\\d+\\s*│\\s*${oldA}\\s*│\\s*reset`));
    assert.match(dry.stdout.toString(), /\ndry run: nothing reset\n$/);
    const still = await append(cluster, A, records(`${A}-lost`, 1));
    assert.equal(still.code, 1, describeResult(['append'], still));

    // Ours resets A; the reference gazctl resets G.
    const r = await gzOk(cluster, ['journals', 'reset-head', '-l', `name=${A}`, '--yes']);
    assert.match(r.stdout.toString(), new RegExp(`write head at ${oldA}`));
    const go = await runGoGazctl(['journals', 'reset-head', '-l', `name=${G}`], { brokerAddress: cluster.brokerAddress });
    assert.equal(go.code, 0, go.stderr);

    for (const j of journals) {
      const more = records(`${j}-new`, 4);
      const ok = await append(cluster, j, more);
      assert.equal(ok.code, 0, describeResult(['append'], ok));
      const got = await readAll(cluster, j);
      assert.equal(got, before1[j]! + more, `${j} reads back every offset once`);
    }
    // Running it again on healthy journals is harmless.
    const again = await gzOk(cluster, ['journals', 'reset-head', '-l', `name=${A}`, '--yes']);
    assert.match(again.stdout.toString(), /write head at|raced/);
  });
});
