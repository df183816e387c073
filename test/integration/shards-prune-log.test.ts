// `gazctl shards prune-log` against real Go consumers and Go brokers, with hints the consumers
// wrote themselves (none are faked).
//
// A sum app of three shards (one hot standby each, hint_backups: 1) runs on three Go
// sum-consumers. Its recovery logs have 4 KiB fragments, a 1 s store refresh and a 1 min flush
// interval (the smallest a Go broker accepts), and records are appended for minutes, so each log
// rolls into dozens of fragments. How Go consumers write hints decides the shape of the test:
//
//   * backup hints (`<hint_prefix>/<id>.backup.0`) are written when a replica is promoted to
//     primary, with the hints it recovered from; the first promotion of a new shard recovers an
//     empty log, so its backup names no live files and prune skips its log. A shard needs a
//     second promotion: the consumer that is primary of the most shards is killed -9 early (its
//     shards fail over to their standbys), and each shard that did not fail over is unassigned
//     (Go gazctl `shards unassign`), which promotes its standby too;
//   * primary hints (`.primary`) are written 5 minutes after a promotion (a constant of Go's
//     consumer) and every 5 minutes after that. So the load keeps running and the test polls
//     etcd until every shard has primary and backup hints with live files, bounded at 7 minutes.
//     Our consumers, when the test runs on them, write them every 5 s (GAZETTE_HINTS_INTERVAL).
//
// Then, with the load stopped: our dry-run plan deletes exactly the fragments Go gazctl's
// `shards prune --dry-run` logs as "pruning fragment" (and some); our `--yes` deletes those files
// from the file:// store and nothing else; and a fresh consumer member, once every other member is
// killed -9, recovers every shard from the pruned logs (PRIMARY, never FAILED), and `shards
// recover` of every shard gives the exact totals of the input.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient, ShardClient } from '../../src/lib/index.js';
import { nanosToDuration } from '../../src/lib/protocol/duration.js';
import { ReplicaStatus_Code } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  consumerImplFromEnv,
  PollAbort,
  pollUntil,
  runGoGazctlShards,
  shardPrimary,
  startCluster,
  startConsumers,
  sumAppJournalSpecs,
  sumAppLayout,
  sumAppShardSpecs,
  waitForJournalsAssigned,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { filesUnder, gzs, hasLiveNodes, hintsAt, recoverAllAndCheck, SumLoad } from '../helpers/shards.js';

const SELECTOR = 'app=prune';
/**
 * Our consumers (GAZCTL_TEST_CONSUMER=ts, which the test runner's consumer pass sets) store primary
 * hints every 5 s instead of every 5 minutes, so that pass does not wait minutes for them; Go
 * consumers ignore the variable and keep their constant.
 */
const HINTS_ENV = { GAZETTE_HINTS_INTERVAL: '5s' };

let cluster: Cluster | undefined;
let group: ConsumerGroup | undefined;
let fresh: ConsumerGroup | undefined;
let journals: JournalClient | undefined;
let layout: SumAppLayout;
let load: SumLoad;
/** How far the suite got: a later step refuses to run on a failed earlier one. */
let stage = 0;

function need(n: number): void {
  if (stage < n) throw new Error(`an earlier step of this suite failed (stage ${stage}, this step needs ${n})`);
}

/** One fragment of our audit document (`-o json`). */
interface AuditFragment {
  begin: number | string;
  end: number | string;
  sum: string;
  path: string;
  action: 'delete' | 'keep';
  result: string;
}
interface Audit {
  dry_run: boolean;
  deleted: boolean;
  logs: { log: string; status: string; reason?: string; fragments: AuditFragment[] }[];
  problems: string[];
}

/** Content name of a fragment (codec NONE): `<begin>-<end>-<sum><.raw>`, offsets as 16 hex digits. */
function contentName(f: AuditFragment): string {
  const hex = (v: number | string) => BigInt(v).toString(16).padStart(16, '0');
  return `${hex(f.begin)}-${hex(f.end)}-${f.sum}.raw`;
}

/** Ours: the fragments the audit plans to delete, as `<log>/<content name>`. */
function ourDeletions(audit: Audit): string[] {
  return audit.logs.flatMap((l) => l.fragments.filter((f) => f.action === 'delete').map((f) => `${l.log}/${contentName(f)}`)).sort();
}

async function oursDryRun(): Promise<{ audit: Audit; names: string[] }> {
  const args = ['shards', 'prune-log', '-l', SELECTOR, '--dry-run', '-o', 'json'];
  const r = await gzs(cluster!, group!, args, { timeoutMs: 60_000 });
  assert.equal(r.code, 0, describeResult(args, r));
  const audit = JSON.parse(r.stdout.toString('utf8')) as Audit;
  assert.equal(audit.dry_run, true);
  assert.equal(audit.deleted, false);
  assert.deepEqual(audit.problems, []);
  return { audit, names: ourDeletions(audit) };
}

/** Go gazctl: the `pruning fragment` debug lines of a dry run, as `<log>/<name>`. */
async function goDryRun(): Promise<string[]> {
  const args = ['shards', 'prune', '-l', SELECTOR, '--dry-run', '--log.level=debug', '--log.format=json'];
  const r = await runGoGazctlShards(args, { consumerAddress: group!.address, brokerAddress: cluster!.brokerAddress, timeoutMs: 60_000 });
  assert.equal(r.code, 0, `Go gazctl ${args.join(' ')} → ${r.code}${r.timedOut ? ' (timed out)' : ''}\n${r.stderr.slice(-4000)}`);
  const names: string[] = [];
  for (const line of r.stderr.split('\n')) {
    if (!line.startsWith('{')) continue;
    const rec = JSON.parse(line) as { msg?: string; log?: string; name?: string };
    if (rec.msg === 'pruning fragment') names.push(`${rec.log}/${rec.name}`);
  }
  assert.match(r.stderr, /finished pruning logs for all shards/, 'Go gazctl logged its summary');
  return names.sort();
}

describe(`shards prune-log against ${consumerImplFromEnv().name === 'go' ? 'Go' : 'our'} consumers with real hints`, { timeout: 720_000 }, () => {
  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    group = await startConsumers(cluster, { count: 3, env: HINTS_ENV });
    layout = sumAppLayout({ name: 'prune', shards: 3 });
    const specs = sumAppJournalSpecs(layout, { fragmentLength: 4096n, refreshIntervalSec: 1 });
    for (const s of specs) {
      s.fragment = { ...s.fragment!, flush_interval: nanosToDuration(60_000_000_000n) };
    }
    journals = new JournalClient({ address: cluster.brokerAddress });
    await journals.apply(specs.map((upsert) => ({ expect_mod_revision: 0n, upsert, delete: '' })));
    await waitForJournalsAssigned(cluster, specs.map((s) => s.name), 30_000);
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1, hintBackups: 1 }));
    await waitForShardsPrimary(group.address, layout.shards.map((s) => s.id), 60_000, { standbys: true });
    load = new SumLoad(journals, layout);
  });

  after(async () => {
    await load?.stop();
    journals?.close();
    await fresh?.stop();
    await group?.stop();
    await cluster?.stop();
  });

  test('under load, a kill -9 and unassigns give every shard primary and backup hints with live files', { timeout: 540_000 }, async () => {
    const ids = layout.shards.map((s) => s.id);
    load.start(5, 500);
    // Some transactions into every log before anything fails over: these fragments are the
    // ones only the first, replaced, recovery needed.
    await pollUntil('records to be appended', async () => load.appends >= 60, { timeoutMs: 60_000, intervalMs: 200 });
    await load.waitProcessed(group!.address);

    const listed = await waitForShardsPrimary(group!.address, ids, 30_000);
    const primaries = new Map<string, number>();
    for (const s of listed.values()) primaries.set(shardPrimary(s)!, (primaries.get(shardPrimary(s)!) ?? 0) + 1);
    const victim = [...primaries].sort((a, b) => b[1] - a[1])[0]![0];
    await group!.killConsumer(group!.indexOf(victim));
    await waitForShardsPrimary(group!.consumers.find((c) => c.id !== victim)!.endpoint, ids, 60_000, { exclude: [victim] });

    // Shards the kill did not move still have the backup of their first (empty) recovery:
    // unassign their primaries so that their standbys take over too.
    const address = group!.consumers.find((c) => c.id !== victim)!.endpoint;
    const backupKey = (id: string) => `${layout.hintPrefix}/${id}.backup.0`;
    const primaryKey = (id: string) => `${layout.hintPrefix}/${id}.primary`;
    const stale: string[] = [];
    for (const id of ids) if (!hasLiveNodes(await hintsAt(cluster!, backupKey(id)))) stale.push(id);
    if (stale.length > 0) {
      const r = await runGoGazctlShards(['shards', 'unassign', '-l', `id in (${stale.join(', ')})`], {
        consumerAddress: address,
        brokerAddress: cluster!.brokerAddress,
        timeoutMs: 30_000,
      });
      assert.equal(r.code, 0, `Go gazctl shards unassign → ${r.code}\n${r.stderr}`);
    }
    await pollUntil(
      'every shard to have backup hints with live files',
      async () => {
        for (const id of ids) if (!hasLiveNodes(await hintsAt(cluster!, backupKey(id)))) return false;
        return true;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );

    // Go writes primary hints 5 minutes after the promotion: keep the load going until it has.
    const missing: string[] = [];
    await pollUntil(
      'every shard to have primary and backup hints with live files',
      async () => {
        missing.length = 0;
        for (const id of ids) {
          if (!hasLiveNodes(await hintsAt(cluster!, primaryKey(id)))) missing.push(`${id}: primary`);
          if (!hasLiveNodes(await hintsAt(cluster!, backupKey(id)))) missing.push(`${id}: backup.0`);
        }
        return missing.length === 0;
      },
      { timeoutMs: 420_000, intervalMs: 2000, describe: () => `missing: ${missing.join(', ')}` },
    );
    // Many transactions: keep the load going until every log has rolled into many fragments.
    // Go's consumers are far past that by the time their primary hints come; ours, with hints
    // every 5 s, may not be.
    await pollUntil(
      'every recovery log to hold at least 10 fragments',
      async () => {
        for (const s of layout.shards) if ((await journals!.listFragments(s.recoveryLog)).length < 10) return false;
        return true;
      },
      { timeoutMs: 300_000, intervalMs: 1000 },
    );
    await load.stop();
    await load.waitProcessed(address);
    assert.deepEqual(load.errors, []);
    for (const s of layout.shards) {
      const frags = await journals!.listFragments(s.recoveryLog);
      assert.ok(frags.length >= 10, `${s.recoveryLog} has only ${frags.length} fragments`);
    }
    stage = 1;
  });

  test('our dry-run deletion set is exactly Go gazctl shards prune --dry-run\'s, and not empty', async (t) => {
    need(1);
    // Sandwiched: Go, ours, Go. Equal Go runs mean nothing that decides a deletion moved between.
    let compared = false;
    for (let attempt = 0; attempt < 5 && !compared; attempt++) {
      const go1 = await goDryRun();
      const ours = await oursDryRun();
      const go2 = await goDryRun();
      if (go1.join('\n') !== go2.join('\n')) continue;
      assert.deepEqual(ours.names, go1, 'our deletion set (left) against Go gazctl\'s (right)');
      assert.ok(ours.names.length > 0, 'something to prune');
      t.diagnostic(`${ours.names.length} fragments to delete of ${ours.audit.logs.reduce((n, l) => n + l.fragments.length, 0)} in ${ours.audit.logs.length} logs`);
      // Every log was planned (none skipped), and each kept something: the live segments.
      for (const l of ours.audit.logs) {
        assert.equal(l.status, 'planned', `${l.log}: ${l.status} ${l.reason ?? ''}`);
        assert.ok(l.fragments.some((f) => f.action === 'keep'), `${l.log} keeps its live fragments`);
      }
      compared = true;
    }
    assert.ok(compared, 'two back-to-back Go dry runs never agreed');
    stage = 2;
  });

  test('prune-log --yes deletes exactly those files from the file:// store', async () => {
    need(2);
    const { names: planned } = await oursDryRun();
    const before = await filesUnder(cluster!.fileRoot);
    const args = ['shards', 'prune-log', '-l', SELECTOR, '--yes', '-o', 'json', '--file-root', cluster!.fileRoot];
    const r = await gzs(cluster!, group!, args, { timeoutMs: 120_000 });
    assert.equal(r.code, 0, describeResult(args, r));
    const audit = JSON.parse(r.stdout.toString('utf8')) as Audit;
    assert.equal(audit.deleted, true);
    const deleted = audit.logs.flatMap((l) => l.fragments.filter((f) => f.action === 'delete').map((f) => ({ log: l.log, f })));
    assert.deepEqual(deleted.map(({ log, f }) => `${log}/${contentName(f)}`).sort(), planned, 'deleted what the dry run planned');
    for (const { f } of deleted) assert.equal(f.result, 'deleted', `${f.path}: ${f.result}`);

    const gone = new Set(deleted.map(({ f }) => f.path.replace(/^\/+/, '')));
    for (const p of gone) {
      assert.ok(before.has(p), `deleted ${p} was in the store (store paths: e.g. ${[...before].slice(0, 3).join(', ')})`);
      assert.equal(existsSync(join(cluster!.fileRoot, p)), false, `${p} is gone`);
    }
    const afterFiles = await filesUnder(cluster!.fileRoot);
    for (const p of before) if (!gone.has(p)) assert.ok(afterFiles.has(p), `${p} was not planned and is still there`);
    // A second dry run finds nothing left to delete once the brokers' index refreshed.
    await pollUntil('the brokers to forget the deleted fragments', async () => (await oursDryRun()).names.length === 0, { timeoutMs: 30_000, intervalMs: 1000 });
    stage = 3;
  });

  test('a fresh member recovers every shard from the pruned logs, and recover gives the exact totals', async () => {
    need(3);
    const ids = layout.shards.map((s) => s.id);
    fresh = await startConsumers(cluster!, { count: 1, zone: 'fresh', env: HINTS_ENV });
    for (let i = 0; i < group!.consumers.length; i++) if (group!.isRunning(i)) await group!.killConsumer(i);
    const shards = new ShardClient({ address: fresh.address });
    const failures: string[] = [];
    const pending: string[] = [];
    try {
      await pollUntil(
        'every shard to be PRIMARY on the fresh member',
        async () => {
          pending.length = 0;
          const res = await shards.list({ include: undefined, exclude: undefined }, { timeoutMs: 5000 });
          for (const s of res.shards) {
            s.status.forEach((st, i) => {
              if (st.code === ReplicaStatus_Code.FAILED) failures.push(`${s.spec?.id} on ${s.route?.members[i]?.suffix}: ${st.errors.join('; ')}`);
            });
          }
          if (failures.length > 0) throw new PollAbort(`a replica FAILED: ${failures.join('\n')}`);
          for (const id of ids) {
            const s = res.shards.find((x) => x.spec?.id === id);
            const p = s?.route?.members[s.route.primary];
            const ok = p?.zone === 'fresh' && s?.status[s.route!.primary]?.code === ReplicaStatus_Code.PRIMARY;
            if (!ok) pending.push(`${id}: ${JSON.stringify(s?.route?.members ?? [])} ${JSON.stringify(s?.status.map((x) => ReplicaStatus_Code[x.code]) ?? [])}`);
          }
          return pending.length === 0;
        },
        { timeoutMs: 90_000, intervalMs: 200, describe: () => pending.join('\n') },
      );
    } finally {
      shards.close();
    }
    await load.waitProcessed(fresh.address);
    await recoverAllAndCheck(cluster!, fresh, load, 'after-prune');
    stage = 4;
  });
});
