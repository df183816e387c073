// Acceptance of issue #28's first item: objects under a journal's prefix that are not fragments
// (a README, notes, an operator's copy in a subdirectory, names that look almost like fragment
// names) block nothing. Run against the reference Go broker and ours, with a file:// journal and
// an s3:// journal on the real S3 server, both with stray objects written before the journals
// exist:
//
// - the broker skips them: `journals fragments` lists the rest, and reads (proxied, and direct
//   from the store) return the journal's content; our broker warns once per stray object, the
//   Go broker at every refresh (checked side by side from the brokers' logs);
// - `journals reset-head` plans from the rest of the listing;
// - `journals forks` names them under "ignored" in -o json, warns once per object on stderr, and
//   `--prune --yes` deletes the dead-end fork only;
// - `journals prune --yes` deletes the expired fragment only: a stray object older than the
//   retention stays and is not counted.
//
// An S3 folder marker (a key ending in '/') and an empty directory in the file store are not
// objects at all: nothing names them, and they stay.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/client/index.js';
import {
  goBroker,
  pollUntil,
  s3Request,
  startCluster,
  startS3,
  tsBroker,
  waitForJournalsAssigned,
  type BrokerImpl,
  type Cluster,
  type S3Server,
} from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { filler, gz, gzOk, listFragmentsAt, prng } from '../helpers/journals.js';

process.env.AWS_EC2_METADATA_DISABLED = 'true';

const HOUR = 3600;
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');
const fragName = (b: number, e: number, content: Buffer) => `${hex16(b)}-${hex16(e)}-${sha1(content)}.raw`;

/** Each append rolls the spool (fragment length 1 KiB): three persisted fragments, then a tail in the spool. */
const APPENDS = [3000, 3000, 3000, 3000];
const TOTAL = APPENDS.reduce((a, b) => a + b, 0);

/** Stray objects, relative to the journal's prefix, written before the journal exists. */
const STRAYS = [
  'notes.txt',
  'README',
  'ops/copy-of-notes',
  // A fragment name whose sum has 39 hex digits.
  `${hex16(0)}-${hex16(100)}-${'0'.repeat(39)}.raw`,
  // An operator's copy of a fragment, with a suffix.
  `${hex16(0)}-${hex16(100)}-${'0'.repeat(40)}.raw.orig`,
];
const WARNING = 'ignoring an object that is not a fragment';
const FOLDER = 'backups/';

interface JournalCase {
  name: string;
  /** The store URL in the spec. */
  store: string;
  put(rel: string, content: Buffer): Promise<void>;
  /** Sets an object's modification time (seconds ago). */
  age(rel: string, secondsAgo: number): void;
  /** Every object path (relative to the store root) under the journal's prefix. */
  list(): Promise<string[]>;
  /** Stray objects of this journal: STRAYS, then the late ones the log test adds. */
  strays: string[];
  data: Buffer;
}

for (const impl of [goBroker, tsBroker] as BrokerImpl[]) {
  describe(`stray objects under a journal's prefix (${impl.name} broker, file:// and s3://)`, { timeout: 300_000 }, () => {
    let srv: S3Server;
    let cluster: Cluster;
    let client: JournalClient;
    let creds: Record<string, string>;
    let cases: JournalCase[] = [];
    const fileDir = () => join(cluster.fileRoot, 'st');

    before(async () => {
      srv = await startS3({ bucket: `stray${impl.name}` });
      creds = { AWS_ACCESS_KEY_ID: srv.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: srv.credentials.secretAccessKey, AWS_REGION: srv.credentials.region };
      cluster = await startCluster({ brokers: 1, impl, brokerEnv: creds });
      const fileJournal = 'stray/file';
      const s3Journal = 'stray/s3';
      const listBucket = async (prefix: string): Promise<string[]> => {
        const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'GET', path: `/${srv.bucket}`, query: { 'list-type': '2', prefix } });
        const xml = await res.text();
        assert.equal(res.status, 200, xml);
        assert.doesNotMatch(xml, /<IsTruncated>true/);
        return [...xml.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => m[1]!.slice('x/'.length)).sort();
      };
      cases = [
        {
          name: fileJournal,
          store: 'file:///st/',
          put: async (rel, content) => {
            const f = join(fileDir(), fileJournal, rel);
            mkdirSync(dirname(f), { recursive: true });
            writeFileSync(f, content);
          },
          age: (rel, ago) => utimesSync(join(fileDir(), fileJournal, rel), Date.now() / 1000 - ago, Date.now() / 1000 - ago),
          list: async () => walk(fileDir(), `${fileJournal}/`),
          strays: [...STRAYS],
          data: Buffer.alloc(0),
        },
        {
          name: s3Journal,
          store: srv.storeUrl('x/'),
          put: async (rel, content) => {
            const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'PUT', path: `/${srv.bucket}/x/${s3Journal}/${rel}`, body: content });
            assert.equal(res.status, 200, await res.text());
          },
          // The posix backend keeps each object as a file; its mtime is the object's LastModified.
          age: (rel, ago) => utimesSync(join(srv.dataDir, srv.bucket, 'x', s3Journal, rel), Date.now() / 1000 - ago, Date.now() / 1000 - ago),
          list: () => listBucket(`x/${s3Journal}/`),
          strays: [...STRAYS],
          data: Buffer.alloc(0),
        },
      ];
      for (const c of cases) for (const s of c.strays) await c.put(s, Buffer.from(`not a fragment: ${s}\n`));
      // An S3 "folder" as consoles create it: a key ending in '/'. Not an object to list at all
      // (upstream's S3 store skips such keys too): never warned about, never deleted.
      await cases[1]!.put(`${FOLDER}`, Buffer.alloc(0));
      // Likewise an empty directory in the file store.
      mkdirSync(join(fileDir(), 'stray/file/empty'), { recursive: true });
      await gzOk(cluster, ['journals', 'apply'], {
        input: `name: stray/
replication: 1
fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h}
children:
${cases.map((c) => `- name: ${c.name}\n  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h, stores: [${JSON.stringify(c.store)}]}`).join('\n')}
`,
      });
      await waitForJournalsAssigned(cluster, cases.map((c) => c.name), 30_000);

      client = new JournalClient({ address: cluster.brokerAddress });
      const rand = prng(28);
      for (const c of cases) {
        const parts: Buffer[] = [];
        for (const size of APPENDS) {
          const b = filler(rand, size);
          const a = client.append(c.name);
          await a.write(b);
          await a.commit();
          parts.push(b);
        }
        c.data = Buffer.concat(parts);
        await pollUntil(
          `${c.name}: three fragments persisted`,
          async () => (await listFragmentsAt(cluster.brokerAddress, c.name)).filter((f) => f.mod_time !== 0n).length === APPENDS.length - 1,
          { timeoutMs: 30_000, intervalMs: 200 },
        );
        // A dead-end fork: a shorter copy of the first fragment's first 1000 bytes.
        const head = c.data.subarray(0, 1000);
        await c.put(fragName(0, 1000, head), head);
        // The first fragment is past the retention; so is a stray object.
        c.age(fragName(0, 3000, c.data.subarray(0, 3000)), 48 * HOUR);
        c.age('notes.txt', 48 * HOUR);
      }
    });
    after(async () => {
      client?.close();
      await cluster?.stop();
      await srv?.stop();
    });

    const env = () => ({ ...creds });
    const fileRoot = () => ['--file-root', cluster.fileRoot];
    const pathsOf = (c: JournalCase, rels: string[]) => rels.map((r) => `${c.name}/${r}`).sort();

    test('the broker serves the other fragments and logs the stray objects', async () => {
      const r = await gzOk(cluster, ['journals', 'fragments', '-l', 'name:prefix=stray/', '-o', 'json']);
      const lines = r.stdout.toString('utf8').trim().split('\n');
      for (const c of cases) {
        const mine = lines.filter((l) => l.includes(`"journal":"${c.name}"`));
        // Three persisted fragments and the spool's: the dead-end copy lies inside the first.
        assert.equal(mine.length, APPENDS.length, r.stdout.toString('utf8'));
        for (const s of c.strays) assert.ok(!mine.some((l) => l.includes(s)), `${s} is not listed`);
      }

      // Two more listings after the first: a stray object added later shows up in the log.
      const log = cluster.brokers[0]!.logFile!;
      const count = (c: JournalCase, rel: string) =>
        readFileSync(log, 'utf8')
          .split('\n')
          .filter((l) => l.includes(c.name) && new RegExp(`path="?${rel.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"?(\\s|$)`).test(l)).length;
      for (const late of ['late-1.txt', 'late-2.txt']) {
        for (const c of cases) {
          await c.put(late, Buffer.from('late\n'));
          c.strays.push(late);
        }
        for (const c of cases) await pollUntil(`${c.name}: ${late} in the broker log`, async () => count(c, late) > 0, { timeoutMs: 30_000, intervalMs: 200 });
      }
      for (const c of cases) {
        for (const s of STRAYS) {
          const n = count(c, s);
          if (impl === tsBroker) assert.equal(n, 1, `${c.name}/${s}: our broker warns once`);
          // Upstream warns at every refresh; the log shows each object at least once per listing.
          else assert.ok(n >= 3, `${c.name}/${s}: the Go broker warned ${n} times`);
        }
      }
    });

    test('reads return the content, proxied and direct', async () => {
      for (const c of cases) {
        const proxied = await gzOk(cluster, ['journals', 'read', '-l', `name=${c.name}`], { env: env() });
        assert.ok(proxied.stdout.equals(c.data), `${c.name}: proxied read`);
        const direct = await gzOk(cluster, ['journals', 'read', '-l', `name=${c.name}`, '--broker.cache.size', '16', ...fileRoot()], { env: env() });
        assert.ok(direct.stdout.equals(c.data), `${c.name}: direct read`);
      }
    });

    test('reset-head plans from the other fragments', async () => {
      const args = ['journals', 'reset-head', '-l', 'name:prefix=stray/', '--yes', '-o', 'json'];
      const r = await gzOk(cluster, args, { env: env() });
      const doc = JSON.parse(r.stdout.toString('utf8')) as { journals: { journal: string; fragments: number; new_head: string; result: string }[] };
      for (const c of cases) {
        const row = doc.journals.find((j) => j.journal === c.name);
        assert.ok(row, describeResult(args, r));
        assert.equal(row.fragments, APPENDS.length, describeResult(args, r));
        assert.equal(row.new_head, String(TOTAL));
        assert.ok(row.result === 'reset' || row.result === 'raced', describeResult(args, r));
      }
    });

    test('forks names the stray objects as ignored, warns once each, and --prune deletes the dead-end only', async () => {
      const args = ['journals', 'forks', '-l', 'name:prefix=stray/', '-o', 'json', ...fileRoot()];
      const r = await gzOk(cluster, args, { env: env() });
      assertWarnings(r.stderr, cases.flatMap((c) => pathsOf(c, c.strays)), args, r);
      const doc = JSON.parse(r.stdout.toString('utf8').replace(/:(-?\d+)([,}])/g, ':"$1"$2')) as {
        journals: { journal: string; chain: { begin: string; end: string }; forks: { kind: string; path: string; diverges_at: string }[]; ignored: { store: string; path: string; size: string; reason: string }[] }[];
      };
      for (const c of cases) {
        const j = doc.journals.find((x) => x.journal === c.name);
        assert.ok(j, describeResult(args, r));
        // The chain runs to the end of what is in the store: the three fragments persisted before,
        // and the spool's tail when the broker has persisted it meanwhile (reset-head may make it
        // do so). Which of the two forks saw cannot be told afterwards from the broker's index, whose
        // view of a just-persisted fragment can lag the store, so the store says which is allowed.
        const tail = `${c.name}/${hex16(TOTAL - APPENDS.at(-1)!)}-${hex16(TOTAL)}-`;
        const ends = [String(TOTAL - APPENDS.at(-1)!)];
        if ((await c.list()).some((p) => p.startsWith(tail))) ends.push(String(TOTAL));
        assert.equal(j.chain.begin, '0');
        assert.ok(ends.includes(j.chain.end), `${c.name}: chain end ${j.chain.end}, expected one of ${ends.join(', ')}`);
        assert.deepEqual(j.forks.map((f) => [f.kind, f.path, f.diverges_at]), [['dead-end', `${c.name}/${fragName(0, 1000, c.data.subarray(0, 1000))}`, 'same content']]);
        assert.deepEqual(j.ignored.map((o) => o.path).sort(), pathsOf(c, c.strays));
        for (const o of j.ignored) {
          assert.equal(o.store, c.store);
          assert.ok(Number(o.size) > 0);
          assert.ok(o.reason.length > 0);
        }
      }

      const before = await Promise.all(cases.map((c) => c.list()));
      const pr = ['journals', 'forks', '-l', 'name:prefix=stray/', '--prune', '--yes', ...fileRoot()];
      const p = await gzOk(cluster, pr, { env: env() });
      assertWarnings(p.stderr, cases.flatMap((c) => pathsOf(c, c.strays)), pr, p);
      assert.match(p.stdout.toString('utf8'), /^plan: delete 2 dead-end object\(s\), /m, describeResult(pr, p));
      assert.match(p.stdout.toString('utf8'), /^deleted 2 of 2 object\(s\)/m);
      for (const [i, c] of cases.entries()) {
        const gone = pathsOf(c, [fragName(0, 1000, c.data.subarray(0, 1000))]);
        assert.deepEqual(await c.list(), before[i]!.filter((p) => !gone.includes(p)), `${c.name}: the dead-end only is gone`);
        for (const s of pathsOf(c, c.strays)) assert.ok((await c.list()).includes(s), `${s} is still there`);
      }
    });

    test('prune deletes the expired fragment only; an expired stray object stays and is not counted', async () => {
      const before = await Promise.all(cases.map((c) => c.list()));
      const args = ['journals', 'prune', '-l', 'name:prefix=stray/', '--yes', ...fileRoot()];
      const r = await gzOk(cluster, args, { env: env() });
      assertWarnings(r.stderr, cases.flatMap((c) => pathsOf(c, c.strays)), args, r);
      const out = r.stdout.toString('utf8');
      assert.match(out, /^plan: delete 2 expired object\(s\), .*, of 2 journal\(s\)$/m, describeResult(args, r));
      assert.match(out, /^deleted 2 of 2 object\(s\)/m, describeResult(args, r));
      for (const [i, c] of cases.entries()) {
        const gone = pathsOf(c, [fragName(0, 3000, c.data.subarray(0, 3000))]);
        const now = await c.list();
        assert.deepEqual(now, before[i]!.filter((p) => !gone.includes(p)), `${c.name}: the expired fragment only is gone`);
        assert.ok(now.includes(`${c.name}/notes.txt`), 'the expired stray object stays');
      }
      assert.ok((await cases[1]!.list()).includes(`${cases[1]!.name}/${FOLDER}`), 'the S3 folder marker stays');
      assert.ok(existsSync(join(fileDir(), 'stray/file/empty')), 'the empty directory stays');
    });
  });
}

/** Every stderr line is a warning naming one of `paths`, and each path is named exactly once. */
function assertWarnings(stderr: string, paths: string[], args: string[], r: Parameters<typeof describeResult>[1]): void {
  const lines = stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, paths.length, describeResult(args, r));
  const named = lines.map((l) => {
    assert.ok(l.includes(WARNING), l);
    const m = /\bpath=("(?:[^"\\]|\\.)*"|\S+)/.exec(l);
    assert.ok(m, l);
    return m[1]!.startsWith('"') ? (JSON.parse(m[1]!) as string) : m[1]!;
  });
  assert.deepEqual(named.sort(), [...paths].sort());
}

/** Files under `dir/prefix`, as paths relative to `dir`. */
function walk(dir: string, prefix: string): string[] {
  const out: string[] = [];
  const go = (rel: string) => {
    const p = join(dir, rel);
    if (!existsSync(p)) return;
    for (const n of readdirSorted(p)) {
      const r = `${rel}${n.name}`;
      if (n.isDirectory()) go(`${r}/`);
      else out.push(r);
    }
  };
  go(prefix);
  return out.sort();
}

function readdirSorted(p: string) {
  return readdirSync(p, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
}
