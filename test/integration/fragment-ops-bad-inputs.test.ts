// Bad inputs of `journals forks` and `journals prune`, as a table: each case must exit with the
// exact code (2 for usage errors, 1 for failures), print exactly one line `gazctl: …` on stderr
// naming the problem, and delete nothing: every store directory lists the same files before and
// after. The journals hold expired objects and dead-end forks, so a delete that slipped through
// would show.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { freePort, startCluster, startS3, waitForJournalsAssigned, type Cluster, type S3Server } from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { gz, gzOk, oneStderrLine } from '../helpers/journals.js';

interface Case {
  name: string;
  /** `{root}` is replaced by the cluster's file root. */
  args: string[];
  env?: Record<string, string>;
  code: 1 | 2;
  says: RegExp[];
}

const F = ['journals', 'forks'];
const P = ['journals', 'prune'];
const ROOT = ['--file-root', '{root}'];
const GOOD = ['-l', 'name=bad/good'];

const CASES: Case[] = [
  // ---- flags ----
  { name: 'forks without a selector', args: [...F, ...ROOT], code: 2, says: [/selector|-l/] },
  { name: 'prune without a selector', args: [...P, ...ROOT], code: 2, says: [/selector|-l/] },
  { name: 'forks: unparseable selector', args: [...F, '-l', 'a b c', ...ROOT], code: 2, says: [/selector/i] },
  { name: 'forks: unknown format', args: [...F, ...GOOD, '-o', 'yaml', ...ROOT], code: 2, says: [/yaml/] },
  { name: 'forks: --dry-run without --prune', args: [...F, ...GOOD, '--dry-run', ...ROOT], code: 2, says: [/--dry-run only applies with --prune/] },
  { name: 'forks: --yes without --prune', args: [...F, ...GOOD, '--yes', ...ROOT], code: 2, says: [/--yes only applies with --prune/] },
  { name: 'forks: --prune --dry-run --yes', args: [...F, ...GOOD, '--prune', '--dry-run', '--yes', ...ROOT], code: 2, says: [/--dry-run and --yes contradict/] },
  { name: 'prune: --dry-run --yes', args: [...P, ...GOOD, '--dry-run', '--yes', ...ROOT], code: 2, says: [/--dry-run and --yes contradict/] },
  { name: 'forks --prune without --yes and no terminal', args: [...F, ...GOOD, '--prune', ...ROOT], code: 2, says: [/refusing to delete fragments/, /--yes/] },
  { name: 'prune without --yes and no terminal', args: [...P, ...GOOD, ...ROOT], code: 2, says: [/refusing to delete fragments/, /--yes/] },

  // ---- what the selector finds ----
  { name: 'forks: no journal matches', args: [...F, '-l', 'name=bad/none', ...ROOT], code: 1, says: [/no journals match selector/, /bad\/none/] },
  { name: 'prune: no journal matches', args: [...P, '-l', 'name=bad/none', '--yes', ...ROOT], code: 1, says: [/no journals match selector/] },

  // ---- stores ----
  { name: 'forks: file:// store without --file-root', args: [...F, ...GOOD, '--prune', '--yes'], code: 1, says: [/bad\/good/, /file:\/\/\/s\//, /no local root directory/, /pass --file-root/] },
  { name: 'prune: file:// store without --file-root', args: [...P, ...GOOD, '--yes'], code: 1, says: [/file:\/\/\/s\//, /no local root directory/, /pass --file-root/] },
  { name: 'forks: --file-root that does not exist (unreachable store)', args: [...F, ...GOOD, '--prune', '--yes', '--file-root', '{root}/missing'], code: 1, says: [/file:\/\/\/s\//, /not reachable/, /--file-root/] },
  { name: 'prune: --file-root that is a file', args: [...P, ...GOOD, '--yes', '--file-root', '{root}/plainfile'], code: 1, says: [/file:\/\/\/s\//, /--file-root/] },
  { name: 'forks: a store scheme without a backend', args: [...F, '-l', 'name=bad/gs', '--prune', '--yes', ...ROOT], code: 1, says: [/bad\/gs/, /gs:\/\//, /no backend/] },
  { name: 'prune: a store scheme without a backend', args: [...P, '-l', 'name=bad/gs', '--yes', ...ROOT], code: 1, says: [/gs:\/\//, /no backend/] },

  // ---- S3 ----
  { name: 'forks: wrong S3 secret', args: [...F, '-l', 'name=bad/s3', '--prune', '--yes'], env: { AWS_SECRET_ACCESS_KEY: 'not-the-secret' }, code: 1, says: [/bad\/s3/, /s3:\/\/bad-inputs\/x\//, /signature|secret/i] },
  { name: 'prune: wrong S3 secret', args: [...P, '-l', 'name=bad/s3', '--yes'], env: { AWS_SECRET_ACCESS_KEY: 'not-the-secret' }, code: 1, says: [/s3:\/\/bad-inputs\/x\//, /signature|secret/i] },
  { name: 'forks: unreachable S3 endpoint', args: [...F, '-l', 'name=bad/s3down'], code: 1, says: [/bad\/s3down/, /127\.0\.0\.1/, /unreachable|refused|connect/i] },

  // ---- broker ----
  { name: 'forks: unreachable broker', args: [...F, ...GOOD, '--timeout', '2s', ...ROOT], env: { BROKER_ADDRESS: 'http://127.0.0.1:1' }, code: 1, says: [/127\.0\.0\.1:1/] },
];

const specs = (srv: S3Server, downPort: number) => `name: bad/
replication: 1
fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 1h, stores: [file:///s/]}
children:
- name: bad/good
- name: bad/gs
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m, retention: 1h, stores: ["gs://bucket/x/", file:///s/]}
- name: bad/s3
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m, retention: 1h, stores: [${JSON.stringify(srv.storeUrl('x/'))}]}
- name: bad/s3down
  fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1m, retention: 1h, stores: ["s3://bad-inputs/x/?endpoint=http%3A%2F%2F127.0.0.1%3A${downPort}&region=us-east-1"]}
`;

function listAll(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(root, p));
    }
  };
  walk(root);
  return out.sort();
}

describe('journals forks / prune: bad inputs (one line, exact exit code, nothing deleted)', { timeout: 240_000 }, () => {
  let cluster: Cluster;
  let srv: S3Server;

  before(async () => {
    srv = await startS3({ bucket: 'bad-inputs' });
    // gazctl (and the broker) take the S3 credentials from the environment; a case may override.
    process.env.AWS_ACCESS_KEY_ID = srv.credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = srv.credentials.secretAccessKey;
    process.env.AWS_REGION = srv.credentials.region;
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    const downPort = await freePort();
    cluster = await startCluster({ brokers: 1 });
    const old = Date.now() / 1000 - 10 * 3600;
    const put = (rel: string, data: Buffer) => {
      // bad/s3 lives in the S3 server's bucket (its posix backend: one file per object).
      const f = rel.startsWith('bad/s3/') ? join(srv.dataDir, srv.bucket, 'x', rel) : join(cluster.fileRoot, 's', rel);
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, data);
      utimesSync(f, old, old);
    };
    for (const j of ['bad/good', 'bad/gs', 'bad/s3']) {
      const h = Buffer.from(`${j} `.repeat(40)).subarray(0, 200);
      // A chain [0, 100) [100, 200), and a superseded copy [0, 50): expired, and a dead-end.
      for (const [b, e] of [[0, 100], [100, 200], [0, 50]] as const) {
        const c = h.subarray(b, e);
        put(`${j}/${b.toString(16).padStart(16, '0')}-${e.toString(16).padStart(16, '0')}-${createHash('sha1').update(c).digest('hex')}.raw`, c);
      }
    }
    writeFileSync(join(cluster.fileRoot, 'plainfile'), 'a file, not a directory\n');
    await gzOk(cluster, ['journals', 'apply'], { input: specs(srv, downPort) });
    await waitForJournalsAssigned(cluster, ['bad/good', 'bad/gs', 'bad/s3', 'bad/s3down'], 30_000);
  });
  after(async () => {
    await cluster?.stop();
    await srv?.stop();
  });

  test(`the table has at least 15 cases (${CASES.length})`, () => {
    assert.ok(CASES.length >= 15);
  });

  for (const c of CASES) {
    test(c.name, async (t) => {
      const before = [...listAll(cluster.fileRoot), ...listAll(join(srv.dataDir, srv.bucket))];
      const args = c.args.map((a) => a.replace('{root}', cluster.fileRoot));
      const r = await gz(cluster, args, { env: c.env ?? {}, timeoutMs: 60_000 });
      assert.equal(r.code, c.code, describeResult(args, r));
      const line = oneStderrLine(args, r);
      assert.match(line, /^gazctl: /);
      t.diagnostic(line);
      for (const re of c.says) assert.match(line, re, describeResult(args, r));
      assert.deepEqual([...listAll(cluster.fileRoot), ...listAll(join(srv.dataDir, srv.bucket))], before, 'nothing deleted');
    });
  }
});
