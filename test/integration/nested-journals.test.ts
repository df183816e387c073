// Nested journal names (`nest/ab` and `nest/ab/cd`) in one file:// store: every object of
// `nest/ab/cd` lies under `nest/ab/` too and would parse as a fragment of `nest/ab` with path
// postfix `cd`. `journals prune` and `journals forks --prune` of `nest/ab` must leave them alone:
// they are another journal's, planned under its own retention and chain only. Run against the
// reference Go broker and ours.
//
// The nested journal's fragments are made to look deletable from `nest/ab`'s side: they are past
// `nest/ab`'s retention, and their offset ranges lie inside `nest/ab`'s chain (as dead-end forks
// would).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/client/index.js';
import { goBroker, pollUntil, startCluster, tsBroker, waitForJournalsAssigned, type BrokerImpl, type Cluster } from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { filler, gzOk, listFragmentsAt, prng } from '../helpers/journals.js';

const HOUR = 3600;
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');
const fragName = (b: number, e: number, content: Buffer) => `${hex16(b)}-${hex16(e)}-${sha1(content)}.raw`;

const OUTER = 'nest/ab';
const INNER = 'nest/ab/cd';
/** Each append rolls the spool (fragment length 1 KiB): all but the last are persisted promptly. */
const OUTER_APPENDS = [3000, 3000, 3000, 3000];
const INNER_APPENDS = [1500, 1500, 1500, 1500];

for (const impl of [goBroker, tsBroker] as BrokerImpl[]) {
  describe(`nested journal names in one file:// store (${impl.name} broker)`, { timeout: 240_000 }, () => {
    let cluster: Cluster;
    let client: JournalClient;
    const data = new Map<string, Buffer>();
    const dir = () => join(cluster.fileRoot, 'ns');
    const age = (rel: string, secondsAgo: number) => {
      const t = Date.now() / 1000 - secondsAgo;
      utimesSync(join(dir(), rel), t, t);
    };
    /** Every file under `<journal>/` (relative to the store root): a nested journal's too. */
    const filesOf = (journal: string): string[] => walk(dir(), `${journal}/`);
    const fileRoot = () => ['--file-root', cluster.fileRoot];

    before(async () => {
      cluster = await startCluster({ brokers: 1, impl });
      // A file store's directory must exist before the brokers' health check.
      mkdirSync(dir(), { recursive: true });
      const frag = (name: string) => `- name: ${name}\n  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h, stores: ["file:///ns/"]}`;
      await gzOk(cluster, ['journals', 'apply'], {
        input: `name: nest/
replication: 1
fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h}
children:
${frag(OUTER)}
${frag(INNER)}
`,
      });
      await waitForJournalsAssigned(cluster, [OUTER, INNER], 30_000);
      client = new JournalClient({ address: cluster.brokerAddress });
      const rand = prng(2828);
      for (const [journal, appends] of [
        [OUTER, OUTER_APPENDS],
        [INNER, INNER_APPENDS],
      ] as const) {
        const parts: Buffer[] = [];
        for (const size of appends) {
          const b = filler(rand, size);
          const a = client.append(journal);
          await a.write(b);
          await a.commit();
          parts.push(b);
        }
        data.set(journal, Buffer.concat(parts));
        // The brokers index the nested journal's objects under the outer one too (path postfix
        // `cd`): count only the journal's own, unpostfixed fragments.
        await pollUntil(
          `${journal}: fragments persisted`,
          async () => (await listFragmentsAt(cluster.brokerAddress, journal)).filter((f) => f.mod_time !== 0n && f.path_postfix === '').length >= appends.length - 1,
          { timeoutMs: 30_000, intervalMs: 200 },
        );
      }
      // Past the retention: the outer journal's first fragment, and every persisted fragment of
      // the nested one.
      const outer = data.get(OUTER)!;
      age(`${OUTER}/${fragName(0, 3000, outer.subarray(0, 3000))}`, 48 * HOUR);
      for (const f of filesOf(INNER)) age(f, 48 * HOUR);
    });
    after(async () => {
      client?.close();
      await cluster?.stop();
    });

    test('the nested journal\'s fragments are in the store, under the outer journal\'s prefix', () => {
      const inner = filesOf(INNER);
      assert.ok(inner.length >= INNER_APPENDS.length - 1, inner.join('\n'));
      for (const f of inner) assert.ok(filesOf(OUTER).includes(f), f);
    });

    test('forks of the outer journal sees no forks and no stray objects; --prune deletes nothing of the nested one', async () => {
      const args = ['journals', 'forks', '-l', `name=${OUTER}`, '-o', 'json', ...fileRoot()];
      const r = await gzOk(cluster, args);
      assert.equal(r.stderr, '', describeResult(args, r));
      const doc = JSON.parse(r.stdout.toString('utf8').replace(/:(-?\d+)([,}])/g, ':"$1"$2')) as {
        journals: { journal: string; chain: { begin: string; end: string }; forks: unknown[]; ignored: unknown[] }[];
      };
      assert.deepEqual(
        doc.journals.map((j) => [j.journal, j.forks, j.ignored]),
        [[OUTER, [], []]],
        describeResult(args, r),
      );

      const inner = filesOf(INNER);
      const pr = ['journals', 'forks', '-l', `name=${OUTER}`, '--prune', '--yes', ...fileRoot()];
      const p = await gzOk(cluster, pr);
      assert.match(p.stdout.toString('utf8'), /^plan: delete 0 dead-end object\(s\), /m, describeResult(pr, p));
      assert.deepEqual(filesOf(INNER), inner);
    });

    test('prune of the outer journal deletes its own expired fragment only', async () => {
      const outer = data.get(OUTER)!;
      const before = filesOf(OUTER);
      const inner = filesOf(INNER);
      const args = ['journals', 'prune', '-l', `name=${OUTER}`, '--yes', ...fileRoot()];
      const r = await gzOk(cluster, args);
      assert.equal(r.stderr, '', describeResult(args, r));
      const out = r.stdout.toString('utf8');
      assert.match(out, /^plan: delete 1 expired object\(s\), .*, of 1 journal\(s\)$/m, describeResult(args, r));
      assert.match(out, /^deleted 1 of 1 object\(s\)/m, describeResult(args, r));
      const gone = `${OUTER}/${fragName(0, 3000, outer.subarray(0, 3000))}`;
      assert.deepEqual(filesOf(OUTER), before.filter((f) => f !== gone));
      assert.deepEqual(filesOf(INNER), inner, 'the nested journal keeps every object');
    });

    test('the nested journal reads back whole, proxied and direct', async () => {
      const want = data.get(INNER)!;
      const proxied = await gzOk(cluster, ['journals', 'read', '-l', `name=${INNER}`]);
      assert.ok(proxied.stdout.equals(want), `${INNER}: proxied read`);
      const direct = await gzOk(cluster, ['journals', 'read', '-l', `name=${INNER}`, '--broker.cache.size', '16', ...fileRoot()]);
      assert.ok(direct.stdout.equals(want), `${INNER}: direct read`);
    });
  });
}

/** Files under `dir/prefix`, as paths relative to `dir`, sorted. */
function walk(dir: string, prefix: string): string[] {
  const out: string[] = [];
  const go = (rel: string) => {
    const p = join(dir, rel);
    if (!existsSync(p)) return;
    for (const n of readdirSync(p, { withFileTypes: true })) {
      const r = `${rel}${n.name}`;
      if (n.isDirectory()) go(`${r}/`);
      else out.push(r);
    }
  };
  go(prefix);
  return out.sort();
}
