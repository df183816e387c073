// Acceptance: `gazctl journals prune` against a reference Go broker, with file:// stores and
// then with s3:// stores on the S3 server (see the second suite).
//
// Fragment objects are written straight into the broker's store directories and aged with
// utimes. prune must delete exactly the objects older than their journal's retention, in every
// store and under every postfix (the broker indexes only its cover set), keep the fragment
// holding the newest content whatever its age, keep everything of a journal without retention,
// and report a store that refuses deletes (a directory made append-only with chattr +a, which
// blocks unlinks even for root) with one line while the other stores are pruned.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { s3Request, startCluster, startS3, waitForJournalsAssigned, type Cluster, type S3Server } from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { gz, gzOk, oneStderrLine } from '../helpers/journals.js';

const HOUR = 3600;

interface Obj {
  journal: string;
  /** Store directory under the file root. */
  dir: string;
  b: number;
  e: number;
  postfix?: string;
  /** Age in hours. */
  age: number;
  /** Whether prune must delete it. */
  expired: boolean;
}

const OBJS: Obj[] = [
  // 24h retention, two stores; copies age separately; a shorter copy under a postfix (not in
  // the broker's cover set) is pruned too; the newest content is kept although it is old.
  { journal: 'prune/a', dir: 'pa', b: 0, e: 100, age: 48, expired: true },
  { journal: 'prune/a', dir: 'pb', b: 0, e: 100, age: 1, expired: false },
  { journal: 'prune/a', dir: 'pa', b: 0, e: 50, postfix: 'date=2024-01-01', age: 50, expired: true },
  { journal: 'prune/a', dir: 'pa', b: 100, e: 200, age: 30, expired: true },
  { journal: 'prune/a', dir: 'pb', b: 100, e: 200, age: 23, expired: false },
  { journal: 'prune/a', dir: 'pa', b: 200, e: 300, age: 100, expired: false },
  { journal: 'prune/a', dir: 'pb', b: 200, e: 300, age: 100, expired: false },
  // No retention: nothing goes, however old.
  { journal: 'prune/zero', dir: 'pa', b: 0, e: 100, age: 1000, expired: false },
  { journal: 'prune/zero', dir: 'pa', b: 100, e: 200, age: 900, expired: false },
  // A store refusing deletes, beside one that allows them.
  { journal: 'prune/locked', dir: 'locked', b: 0, e: 100, age: 48, expired: false },
  { journal: 'prune/locked', dir: 'locked', b: 100, e: 200, age: 48, expired: false },
  { journal: 'prune/locked', dir: 'pa', b: 0, e: 100, age: 48, expired: true },
  { journal: 'prune/locked', dir: 'pa', b: 100, e: 200, age: 48, expired: true },
  { journal: 'prune/locked', dir: 'pa', b: 200, e: 300, age: 48, expired: false },
];

const SPECS = `name: prune/
replication: 1
fragment:
  length: 1024
  compression_codec: NONE
  refresh_interval: 1s
children:
- name: prune/a
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h, stores: [file:///pa/, file:///pb/]}
- name: prune/locked
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h, stores: [file:///locked/, file:///pa/]}
- name: prune/zero
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, stores: [file:///pa/]}
`;

const hex16 = (n: number) => n.toString(16).padStart(16, '0');

function content(o: Obj): Buffer {
  return Buffer.from(`${o.journal}:${o.b}:`.padEnd(o.e - o.b, '.'));
}

function relPath(o: Obj): string {
  const name = `${hex16(o.b)}-${hex16(o.e)}-${createHash('sha1').update(content(o)).digest('hex')}.raw`;
  return [o.dir, o.journal, ...(o.postfix ? [o.postfix] : []), name].join('/');
}

/** Every file under the store directories of the file root, relative to it. */
function listAll(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(root, p));
    }
  };
  for (const d of ['pa', 'pb', 'locked']) walk(join(root, d));
  return out.sort();
}

describe('journals prune (acceptance, file:// stores, Go broker)', { timeout: 180_000 }, () => {
  let cluster: Cluster;
  let lockedDir = '';

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    const now = Date.now() / 1000;
    for (const d of ['pa', 'pb', 'locked']) mkdirSync(join(cluster.fileRoot, d), { recursive: true });
    for (const o of OBJS) {
      const f = join(cluster.fileRoot, relPath(o));
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, content(o));
      utimesSync(f, now - o.age * HOUR, now - o.age * HOUR);
    }
    lockedDir = join(cluster.fileRoot, 'locked', 'prune', 'locked');
    execFileSync('chattr', ['+a', lockedDir]);
    await gzOk(cluster, ['journals', 'apply'], { input: SPECS });
    await waitForJournalsAssigned(cluster, ['prune/a', 'prune/locked', 'prune/zero'], 30_000);
  });
  after(async () => {
    if (lockedDir) execFileSync('chattr', ['-a', lockedDir]);
    await cluster?.stop();
  });

  test('--dry-run prints the plan per journal and store, and deletes nothing', async () => {
    const before = listAll(cluster.fileRoot);
    const r = await gzOk(cluster, ['journals', 'prune', '-l', 'name:prefix=prune/', '--dry-run', '--file-root', cluster.fileRoot]);
    const out = r.stdout.toString('utf8');
    assert.match(out, /^plan: delete 7 expired object\(s\), 650 B, of 3 journal\(s\)$/m, out);
    assert.match(out, /prune\/a\s*│\s*file:\/\/\/pa\/\s*│\s*3\s*│/, out);
    assert.match(out, /prune\/locked\s*│\s*file:\/\/\/locked\/\s*│\s*2\s*│/, out);
    assert.match(out, /prune\/zero\s*│\s*│\s*0\s*│.*no retention: keeps everything/, out);
    assert.match(out, /^dry run: nothing deleted$/m);
    assert.deepEqual(listAll(cluster.fileRoot), before);
  });

  test('--yes deletes exactly the expired objects; the locked store is one line and the rest is pruned', async () => {
    const before = listAll(cluster.fileRoot);
    const args = ['journals', 'prune', '-l', 'name:prefix=prune/', '--yes', '--file-root', cluster.fileRoot];
    const r = await gz(cluster, args);
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(oneStderrLine(args, r), /^gazctl: store file:\/\/\/locked\/: no permission to delete; 2 object\(s\) left in place \(first: prune\/locked\/.*(not permitted|EPERM)/);
    assert.match(r.stdout.toString('utf8'), /^deleted 5 of 7 object\(s\), 450 B$/m);
    const gone = OBJS.filter((o) => o.expired).map(relPath);
    assert.deepEqual(listAll(cluster.fileRoot), before.filter((p) => !gone.includes(p)), 'exactly the expired objects are gone');
    assert.equal(gone.length, 5);
  });

  test('a second run finds only what the locked store kept', async () => {
    const r = await gzOk(cluster, ['journals', 'prune', '-l', 'name:prefix=prune/', '--dry-run', '--file-root', cluster.fileRoot]);
    assert.match(r.stdout.toString('utf8'), /^plan: delete 2 expired object\(s\), 200 B, of 3 journal\(s\)$/m);
  });
});

describe('journals prune (acceptance, s3:// stores, Go broker)', { timeout: 180_000 }, () => {
  // The S3 server's posix backend keeps each object as a file: utimes sets its LastModified, and
  // an append-only directory makes the server fail deletes there (an internal error, retried by
  // the SDK, then reported).
  let srv: S3Server;
  let cluster: Cluster;
  let lockedDir = '';
  const objs: (Obj & { prefix: string })[] = [
    { journal: 'prune/s3', dir: '', prefix: 'ok/', b: 0, e: 100, age: 48, expired: true },
    { journal: 'prune/s3', dir: '', prefix: 'ok/', b: 100, e: 200, age: 1, expired: false },
    { journal: 'prune/s3', dir: '', prefix: 'ok/', b: 200, e: 300, age: 100, expired: false },
    { journal: 'prune/s3', dir: '', prefix: 'stuck/', b: 0, e: 100, age: 48, expired: false },
    { journal: 'prune/s3zero', dir: '', prefix: 'ok/', b: 0, e: 100, age: 1000, expired: false },
    { journal: 'prune/s3zero', dir: '', prefix: 'ok/', b: 100, e: 200, age: 1000, expired: false },
  ];
  const key = (o: Obj & { prefix: string }) => o.prefix + relPath(o).replace(/^\//, '');
  /** Every key under ok/prune/ and stuck/prune/ (not the brokers' health checks), from the server's own listing. */
  const listBucket = async (): Promise<string[]> => {
    const out: string[] = [];
    for (const prefix of ['ok/prune/', 'stuck/prune/']) {
      const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'GET', path: `/${srv.bucket}`, query: { 'list-type': '2', prefix } });
      const xml = await res.text();
      assert.equal(res.status, 200, xml);
      assert.doesNotMatch(xml, /<IsTruncated>true/);
      for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) out.push(m[1]!);
    }
    return out.sort();
  };

  before(async () => {
    srv = await startS3({ bucket: 'prune' });
    process.env.AWS_ACCESS_KEY_ID = srv.credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = srv.credentials.secretAccessKey;
    process.env.AWS_REGION = srv.credentials.region;
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    cluster = await startCluster({ brokers: 1 });
    const now = Date.now() / 1000;
    for (const o of objs) {
      const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'PUT', path: `/${srv.bucket}/${key(o)}`, body: content(o) });
      assert.equal(res.status, 200, await res.text());
      const f = join(srv.dataDir, srv.bucket, key(o));
      utimesSync(f, now - o.age * HOUR, now - o.age * HOUR);
    }
    lockedDir = join(srv.dataDir, srv.bucket, 'stuck', 'prune', 's3');
    execFileSync('chattr', ['+a', lockedDir]);
    const stores = (...p: string[]) => `[${p.map((x) => JSON.stringify(srv.storeUrl(x))).join(', ')}]`;
    await gzOk(cluster, ['journals', 'apply'], {
      input: `name: prune/
replication: 1
fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m}
children:
- name: prune/s3
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m, retention: 24h, stores: ${stores('ok/', 'stuck/')}}
- name: prune/s3zero
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m, stores: ${stores('ok/')}}
`,
    });
    await waitForJournalsAssigned(cluster, ['prune/s3', 'prune/s3zero'], 30_000);
  });
  after(async () => {
    if (lockedDir) execFileSync('chattr', ['-a', lockedDir]);
    await cluster?.stop();
    await srv?.stop();
  });

  test('--yes deletes exactly the expired objects; a store failing deletes is one line, the other is pruned', async () => {
    const before = await listBucket();
    assert.deepEqual(before, objs.map(key).sort());
    const args = ['journals', 'prune', '-l', 'name:prefix=prune/', '--yes'];
    const r = await gz(cluster, args, { timeoutMs: 120_000 });
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(oneStderrLine(args, r), /^gazctl: store s3:\/\/prune\/stuck\/\?\S+: 1 delete\(s\) failed; those objects are left in place \(first: prune\/s3\/0{16}-0{14}64-/);
    assert.match(r.stdout.toString('utf8'), /^plan: delete 2 expired object\(s\), 200 B, of 2 journal\(s\)$/m);
    assert.match(r.stdout.toString('utf8'), /^deleted 1 of 2 object\(s\), 100 B$/m);
    const gone = objs.filter((o) => o.expired).map(key);
    assert.deepEqual(await listBucket(), before.filter((p) => !gone.includes(p)), 'exactly the expired objects are gone; retention 0 kept everything');
  });
});
