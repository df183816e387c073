// Our TypeScript brokers (`gazette serve` from bin/gazette.js) as a cluster on a real etcd:
// journals get assigned consistently, and both our gazctl and the reference Go gazctl list,
// apply, append, read and list fragments against them. A second cluster of four shows that
// with replication 3 a kill -9 of a journal's primary loses nothing that was acknowledged.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Status } from '../../src/lib/protocol/gen/broker/protocol.js';
import {
  runGoGazctl,
  startCluster,
  tsBroker,
  waitForJournalsAssigned,
  listJournals,
  type Cluster,
} from '../../src/testing/index.js';
import { gzOk, listJson } from '../helpers/journals.js';
import { appendOnce, readRaw } from '../helpers/core.js';

const SPECS = `name: core/
replication: 3
labels:
- name: app
  value: core
fragment:
  length: 1024
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1m
children:
- name: core/a
- name: core/b
`;

async function goOk(cluster: Cluster, args: string[], input?: string, brokerAddress = cluster.brokerAddress): Promise<Buffer> {
  const r = await runGoGazctl(args, { brokerAddress, input, timeoutMs: 30_000 });
  assert.equal(r.code, 0, `Go gazctl ${args.join(' ')} failed (code ${r.code}):\n${r.stderr}`);
  return r.stdout;
}

describe('a cluster of three of our brokers', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;

  before(async () => {
    cluster = await startCluster({ brokers: 3, impl: tsBroker });
  });
  after(() => cluster?.stop());

  test('each broker serves /debug/ready and /metrics on its service port', async () => {
    for (const b of cluster!.brokers) {
      const ready = await fetch(`${b.endpoint}/debug/ready`);
      assert.equal(ready.status, 200);
      const metrics = await fetch(`${b.endpoint}/metrics`);
      assert.equal(metrics.status, 200);
      const text = await metrics.text();
      assert.match(text, /^# HELP gazette_journals /m);
      assert.match(text, /^process_cpu_user_seconds_total /m);
    }
  });

  test('journals applied with our gazctl are assigned consistently and listed by both gazctls', async () => {
    const c = cluster!;
    await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: SPECS });
    const listed = await waitForJournalsAssigned(c, ['core/a', 'core/b'], 30_000);
    for (const name of ['core/a', 'core/b']) {
      const route = listed.get(name)!.route!;
      assert.equal(route.members.length, 3);
      assert.ok(route.primary >= 0 && route.primary < 3);
      assert.equal(route.endpoints.length, 3);
    }
    const ours = await listJson(c, 'app=core');
    assert.deepEqual(ours.map((j) => j.spec.name).sort(), ['core/a', 'core/b']);
    const go = (await goOk(c, ['journals', 'list', '-l', 'app=core', '--format', 'json'])).toString('utf8');
    const goNames = [...go.matchAll(/"name":\s*"(core\/[ab])"/g)].map((m) => m[1]).sort();
    assert.deepEqual([...new Set(goNames)], ['core/a', 'core/b']);
  });

  test('the Go gazctl applies a change and both see it', async () => {
    const c = cluster!;
    // Revision -1: upsert without checking the current revision.
    const changed = SPECS.replace('children:\n- name: core/a\n- name: core/b\n', 'children:\n- name: core/b\n  revision: -1\n  labels:\n  - name: tier\n    value: gold\n');
    assert.notEqual(changed, SPECS);
    await goOk(c, ['journals', 'apply'], changed);
    const ours = await listJson(c, 'tier=gold');
    assert.deepEqual(ours.map((j) => j.spec.name), ['core/b']);
  });

  test('appends through any broker read back through any broker, with both gazctls', async () => {
    const c = cluster!;
    await gzOk(c, ['journals', 'append', '-l', 'name=core/a'], { input: 'one from ours\n', env: { BROKER_ADDRESS: c.brokers[1]!.endpoint } });
    await goOk(c, ['journals', 'append', '-l', 'name=core/a'], 'two from go\n', c.brokers[2]!.endpoint);
    for (const b of c.brokers) {
      const go = await goOk(c, ['journals', 'read', '-l', 'name=core/a'], undefined, b.endpoint);
      assert.equal(go.toString('utf8'), 'one from ours\ntwo from go\n');
      const ours = await gzOk(c, ['journals', 'read', '-l', 'name=core/a'], { env: { BROKER_ADDRESS: b.endpoint } });
      assert.equal(ours.stdout.toString('utf8'), 'one from ours\ntwo from go\n');
    }
  });

  test('/metrics reports the bytes each broker holds in its spools', async () => {
    const c = cluster!;
    const gauge = async (endpoint: string, name: string): Promise<number> => {
      const text = await (await fetch(`${endpoint}/metrics`)).text();
      const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
      assert.ok(m, `${name} in /metrics of ${endpoint}`);
      return Number(m[1]);
    };
    await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: SPECS.replace('length: 1024', 'length: 1048576').replace(/children:[\s\S]*/, 'children:\n- name: core/metrics\n') });
    await waitForJournalsAssigned(c, ['core/metrics'], 30_000);
    const before = await Promise.all(c.brokers.map((b) => gauge(b.endpoint, 'gazette_spool_bytes')));
    const line = 'x'.repeat(499) + '\n';
    await gzOk(c, ['journals', 'append', '-l', 'name=core/metrics'], { input: line });
    // Replication 3 on three brokers: every broker's spool holds the 500 bytes once committed.
    for (const [i, b] of c.brokers.entries()) {
      assert.equal((await gauge(b.endpoint, 'gazette_spool_bytes')) - before[i]!, line.length, b.endpoint);
      assert.ok((await gauge(b.endpoint, 'gazette_spool_disk_bytes')) >= line.length, b.endpoint);
      assert.ok((await gauge(b.endpoint, 'gazette_spool_files')) >= 1, b.endpoint);
      assert.ok((await gauge(b.endpoint, 'gazette_spool_queued_bytes')) >= 0);
      assert.ok((await gauge(b.endpoint, 'gazette_unpersisted_bytes')) >= 0);
    }
  });

  test('spools roll at the fragment length and persist to the file store; fragments lists them', async () => {
    const c = cluster!;
    const line = 'x'.repeat(99) + '\n';
    for (let i = 0; i < 30; i++) await goOk(c, ['journals', 'append', '-l', 'name=core/b'], line);
    const dir = join(c.fileRoot, 'core', 'b');
    const deadline = Date.now() + 20_000;
    let files: string[] = [];
    while (Date.now() < deadline) {
      files = existsSync(dir) ? readdirSync(dir).filter((f) => /^[0-9a-f]{16}-[0-9a-f]{16}-[0-9a-f]{40}\.raw$/.test(f)) : [];
      if (files.length >= 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(files.length >= 2, `expected persisted fragments under ${dir}, found ${files.join(', ')}`);
    const go = (await goOk(c, ['journals', 'fragments', '-l', 'name=core/b', '--format', 'json'])).toString('utf8');
    // One JSON object a line; zero fields are left out.
    const persisted = new Set(
      go
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as { spec: { begin?: number; mod_time?: number; backing_store?: string } })
        .filter((x) => x.spec.mod_time && x.spec.backing_store === 'file:///')
        .map((x) => BigInt(x.spec.begin ?? 0)),
    );
    for (const f of files) assert.ok(persisted.has(BigInt('0x' + f.split('-')[0]!)), `Go gazctl fragments lists ${f} as persisted:\n${go}`);
    const ours = await gzOk(c, ['journals', 'fragments', '-l', 'name=core/b', '-o', 'json']);
    assert.match(ours.stdout.toString('utf8'), /file:\/\/\//);
    const read = await goOk(c, ['journals', 'read', '-l', 'name=core/b']);
    assert.equal(read.toString('utf8'), line.repeat(30));
  });

  test('the Go gazctl suspends journals (fully when never written, partially when written) and an append resumes them', async () => {
    const c = cluster!;
    const specs = 'name: susp/\nreplication: 3\nfragment:\n  length: 1024\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1s\nchildren:\n- name: susp/empty\n- name: susp/written\n';
    await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: specs });
    await waitForJournalsAssigned(c, ['susp/empty', 'susp/written'], 30_000);
    await goOk(c, ['journals', 'append', '-l', 'name=susp/written'], 'before\n');
    await goOk(c, ['journals', 'suspend', '-l', 'prefix=susp/', '--force']);
    const levels = new Map((await listJson(c, 'prefix=susp/')).map((j) => [j.spec.name, j.spec.suspend?.level]));
    assert.equal(levels.get('susp/empty'), 'FULL');
    assert.equal(levels.get('susp/written'), 'PARTIAL');
    // Appending (RESUME, the default) lifts both suspensions. As on upstream's brokers, that
    // first append fails while the journal has too few brokers (INSUFFICIENT_JOURNAL_BROKERS
    // when partially suspended, NO_JOURNAL_PRIMARY_BROKER when fully) and writes nothing; once
    // the allocator has assigned it again, appends go through.
    const first = await runGoGazctl(['journals', 'append', '-l', 'name=susp/written'], { brokerAddress: c.brokerAddress, input: 'lost\n' });
    assert.equal(first.code, 1);
    assert.match(first.stderr, /INSUFFICIENT_JOURNAL_BROKERS/);
    const firstEmpty = await runGoGazctl(['journals', 'append', '-l', 'name=susp/empty'], { brokerAddress: c.brokerAddress, input: 'lost\n' });
    assert.equal(firstEmpty.code, 1);
    assert.match(firstEmpty.stderr, /NO_JOURNAL_PRIMARY_BROKER/);
    await waitForJournalsAssigned(c, ['susp/empty', 'susp/written'], 30_000);
    await goOk(c, ['journals', 'append', '-l', 'name=susp/written'], 'after\n');
    await goOk(c, ['journals', 'append', '-l', 'name=susp/empty'], 'first\n');
    const after = new Map((await listJson(c, 'prefix=susp/')).map((j) => [j.spec.name, j.spec.suspend?.level]));
    assert.ok(!after.get('susp/empty') || after.get('susp/empty') === 'NONE', `susp/empty resumed: ${after.get('susp/empty')}`);
    assert.ok(!after.get('susp/written') || after.get('susp/written') === 'NONE', `susp/written resumed: ${after.get('susp/written')}`);
    assert.equal((await goOk(c, ['journals', 'read', '-l', 'name=susp/written'])).toString('utf8'), 'before\nafter\n');
    assert.equal((await goOk(c, ['journals', 'read', '-l', 'name=susp/empty'])).toString('utf8'), 'first\n');
  });

  test('a store fragment beyond the head is INDEX_HAS_GREATER_OFFSET until the Go gazctl reset-head', async () => {
    const c = cluster!;
    const journal = 'reset/a';
    await gzOk(c, ['journals', 'apply', '--specs', '-'], {
      input: `name: ${journal}\nreplication: 3\nfragment:\n  length: 1024\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1s\n`,
    });
    await waitForJournalsAssigned(c, [journal], 30_000);
    await goOk(c, ['journals', 'append', '-l', `name=${journal}`], 'abc\n');
    // A fragment the brokers never wrote, at [1000, 1010): as if written by a lost primary.
    const content = Buffer.from('0123456789');
    const sum = createHash('sha1').update(content).digest('hex');
    const dir = join(c.fileRoot, 'reset', 'a');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${(1000).toString(16).padStart(16, '0')}-${(1010).toString(16).padStart(16, '0')}-${sum}.raw`), content);
    let status = Status.OK;
    for (let i = 0; i < 200 && status !== Status.INDEX_HAS_GREATER_OFFSET; i++) {
      // Until every broker's index refresh has seen the fragment, the append may still succeed.
      status = (await appendOnce(c.brokerAddress, journal, Buffer.from('probe\n'))).status;
      if (status !== Status.INDEX_HAS_GREATER_OFFSET) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, Status.INDEX_HAS_GREATER_OFFSET);
    await goOk(c, ['journals', 'reset-head', '-l', `name=${journal}`]);
    const r = await appendOnce(c.brokerAddress, journal, Buffer.from('resumed\n'));
    assert.equal(r.status, Status.OK);
    assert.equal(r.commit!.begin, 1010n);
  });

  test('an unknown journal is JOURNAL_NOT_FOUND from every broker', async () => {
    for (const b of cluster!.brokers) {
      const r = await appendOnce(b.endpoint, 'core/missing', Buffer.from('x'));
      assert.equal(r.status, Status.JOURNAL_NOT_FOUND);
      const l = await listJournals(b.endpoint, { selector: { include: { labels: [{ name: 'name', value: 'core/missing', prefix: false }] }, exclude: undefined } });
      assert.equal(l.journals.length, 0);
    }
  });
});

describe('kill -9 of a primary with replication 3 (four of our brokers)', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;

  before(async () => {
    cluster = await startCluster({ brokers: 4, impl: tsBroker });
  });
  after(() => cluster?.stop());

  test('every acknowledged append reads back at its committed offsets', async () => {
    const c = cluster!;
    const journal = 'kill/a';
    await gzOk(c, ['journals', 'apply', '--specs', '-'], {
      input: `name: ${journal}\nreplication: 3\nfragment:\n  length: 4096\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1m\n`,
    });
    const listed = await waitForJournalsAssigned(c, [journal], 30_000);
    const route = listed.get(journal)!.route!;
    const primaryId = route.members[route.primary]!.suffix;
    const victim = c.brokers.findIndex((b) => b.id === primaryId);
    assert.ok(victim >= 0);

    const acked: { begin: bigint; end: bigint; data: Buffer }[] = [];
    let failures = 0;
    let killed = false;
    for (let i = 0; acked.length < 120; i++) {
      assert.ok(failures < 2000, 'appends resumed after the kill');
      if (acked.length === 40 && !killed) {
        killed = true;
        await c.stopBroker(victim, { graceful: false });
      }
      const data = Buffer.from(`record ${i} `.padEnd(60, '.') + '\n');
      // Any live broker: it proxies to whichever is primary.
      const live = c.brokers.filter((_, j) => c.isRunning(j));
      const endpoint = live[i % live.length]!.endpoint;
      try {
        const r = await appendOnce(endpoint, journal, data);
        if (r.status === Status.OK) acked.push({ begin: r.commit!.begin, end: r.commit!.end, data });
        else {
          failures++;
          await new Promise((res) => setTimeout(res, 50));
        }
      } catch {
        failures++;
        await new Promise((res) => setTimeout(res, 50));
      }
    }
    assert.ok(killed);
    const content = await readRaw(c.brokerAddress, journal);
    const ranges = new Set<string>();
    for (const a of acked) {
      assert.equal(a.end - a.begin, BigInt(a.data.length));
      const key = `${a.begin}-${a.end}`;
      assert.ok(!ranges.has(key), `range ${key} acknowledged twice`);
      ranges.add(key);
      assert.deepEqual(content.subarray(Number(a.begin), Number(a.end)), a.data, `acknowledged bytes at [${a.begin}, ${a.end})`);
    }
  });
});
