// `-o json` of the commands that act on a cluster (issue #29: "-o json wherever output is data"),
// against one real cluster with a file:// store: journals apply (plan and result), journals prune
// (plan and audit) and journals store-health. stdout must hold exactly one JSON document, and the
// human-readable plan or summary goes to stderr.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, runGazctl } from '../helpers/cli.js';
import { gz, gzOk, listJson } from '../helpers/journals.js';

const SPECS = `name: jsonout/
replication: 1
fragment: {length: 1024, compression_codec: NONE, refresh_interval: 1s, retention: 24h, stores: [file:///jstore/]}
children:
- name: jsonout/a
- name: jsonout/b
`;

/** stdout as one JSON document (it must be exactly one). */
function doc(args: string[], r: { stdout: Buffer; stderr: string; code: number | null }): Record<string, unknown> {
  const text = r.stdout.toString('utf8');
  assert.ok(text.endsWith('\n') && text.indexOf('\n') === text.length - 1, `one line of JSON on stdout\n${describeResult(args, r as never)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

describe('-o json of acting commands (real cluster)', { timeout: 120_000 }, () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    mkdirSync(join(cluster.fileRoot, 'jstore'), { recursive: true });
  });
  after(async () => {
    await cluster?.stop();
  });

  test('journals apply --dry-run -o json: the plan, nothing applied', async () => {
    const args = ['journals', 'apply', '--dry-run', '-o', 'json'];
    const r = await gzOk(cluster, args, { input: SPECS });
    const d = doc(args, r);
    assert.equal(d.dry_run, true);
    assert.equal(d.applied, false);
    assert.equal(d.revision, null);
    assert.equal(d.transactions, 1);
    assert.deepEqual(
      (d.changes as { name: string; action: string }[]).map((c) => [c.name, c.action]),
      [['jsonout/a', 'create'], ['jsonout/b', 'create']],
    );
    assert.deepEqual(await listJson(cluster, 'name:prefix=jsonout/'), []);
  });

  test('journals apply -o json: applied at an etcd revision; the summary stays on stderr', async () => {
    const args = ['journals', 'apply', '-o', 'json'];
    const r = await gzOk(cluster, args, { input: SPECS });
    const d = doc(args, r);
    assert.equal(d.applied, true);
    assert.equal(typeof d.revision, 'number');
    assert.ok((d.revision as number) > 0);
    assert.match(r.stderr, /applied 2 journal changes in 1 transaction \(etcd revision \d+\)/);
    await waitForJournalsAssigned(cluster, ['jsonout/a', 'jsonout/b'], 30_000);
    // The same creates again: the plan names the conflicts.
    const again = await gzOk(cluster, ['journals', 'apply', '--dry-run', '-o', 'json'], { input: SPECS });
    const p = doc(args, again);
    assert.equal(p.conflicts, 2);
    assert.match((p.changes as { conflict?: string }[])[0]!.conflict ?? '', /already exists at revision \d+/);
  });

  test('journals prune -o json: the plan, then the audit of what was deleted', async () => {
    // One fragment object two days old (expired under 24h retention) and a newer one holding
    // the newest content (kept whatever its age).
    const now = Date.now() / 1000;
    const put = (b: number, e: number, ageH: number) => {
      const body = Buffer.from('x'.repeat(e - b));
      const name = `${b.toString(16).padStart(16, '0')}-${e.toString(16).padStart(16, '0')}-${createHash('sha1').update(body).digest('hex')}.raw`;
      const f = join(cluster.fileRoot, 'jstore', 'jsonout', 'a', name);
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, body);
      utimesSync(f, now - ageH * 3600, now - ageH * 3600);
      return { f, path: `jsonout/a/${name}` };
    };
    const old = put(0, 100, 48);
    put(100, 200, 48);
    const base = ['journals', 'prune', '-l', 'name:prefix=jsonout/', '--file-root', cluster.fileRoot, '-o', 'json'];

    const dry = [...base, '--dry-run'];
    const r1 = await gzOk(cluster, dry);
    const p = doc(dry, r1);
    assert.equal(p.dry_run, true);
    assert.equal(p.applied, false);
    assert.equal(p.count, 1);
    assert.equal(p.bytes, 100);
    const a = (p.journals as { journal: string; retention: string; kept_newest: number; expired: { path: string; begin: number; end: number; store: string }[] }[]).find((j) => j.journal === 'jsonout/a')!;
    assert.equal(a.retention, '24h0m0s');
    assert.equal(a.kept_newest, 1);
    assert.deepEqual(a.expired.map((o) => [o.store, o.path, o.begin, o.end]), [['file:///jstore/', old.path, 0, 100]]);
    assert.match(r1.stderr, /^plan: delete 1 expired object\(s\), 100 B, of 2 journal\(s\)$/m, 'the plan goes to stderr');
    assert.ok(existsSync(old.f));

    const yes = [...base, '--yes'];
    const r2 = await gzOk(cluster, yes);
    const q = doc(yes, r2);
    assert.equal(q.applied, true);
    assert.equal(q.deleted, 1);
    assert.equal(q.deleted_bytes, 100);
    assert.deepEqual(q.problems, []);
    assert.ok(!existsSync(old.f), 'the expired object is gone');
  });

  test('journals append -o json: per journal the appends, bytes and commit offsets of this run', async () => {
    const one = ['journals', 'append', '-l', 'name=jsonout/b', '-o', 'json'];
    const r1 = await gzOk(cluster, one, { input: 'hello json\n' });
    const d1 = doc(one, r1) as { journals: { journal: string; appends: number; bytes: number; begin: number; end: number }[] };
    assert.equal(d1.journals.length, 1);
    const j = d1.journals[0]!;
    assert.deepEqual([j.journal, j.appends, j.bytes, j.end - j.begin], ['jsonout/b', 1, 11, 11]);
    // The offsets are where the content is: read it back from there.
    const offsets = join(mkdtempSync(join(tmpdir(), 'gazctl-json-')), 'offsets.json');
    writeFileSync(offsets, JSON.stringify({ 'jsonout/b': j.begin }));
    const back = await gzOk(cluster, ['journals', 'read', '-l', 'name=jsonout/b', '--offsets', offsets]);
    assert.equal(back.stdout.toString('utf8'), 'hello json\n');

    const lines = Array.from({ length: 200 }, (_, i) => `line ${i}\n`).join('');
    // (jsonout/a holds the fragments the prune test wrote ahead of its write head: not there.)
    const many = ['journals', 'append', '-l', 'name=jsonout/b', '--framing', 'lines', '-o', 'json'];
    const r2 = await gzOk(cluster, many, { input: lines });
    const d2 = doc(many, r2) as { journals: { journal: string; bytes: number }[] };
    assert.equal(d2.journals.reduce((n, x) => n + x.bytes, 0), Buffer.byteLength(lines), 'every byte is accounted for');
    assert.deepEqual(d2.journals.map((x) => x.journal), ['jsonout/b']);
  });

  test('a context reaches the cluster with nothing else set; the command line beats it', async () => {
    const cfg = mkdtempSync(join(tmpdir(), 'gazctl-ctx-it-'));
    const env = { XDG_CONFIG_HOME: cfg };
    const create = ['context', 'create', 'here', `broker.address=${cluster.brokerAddress}`, '--use'];
    const c = await runGazctl(create, { env });
    assert.equal(c.code, 0, describeResult(create, c));
    const list = ['journals', 'list', '-l', 'name:prefix=jsonout/', '-o', 'json'];
    const r = await runGazctl(list, { env });
    assert.equal(r.code, 0, describeResult(list, r));
    assert.equal((JSON.parse(r.stdout.toString('utf8')) as { journals: unknown[] }).journals.length, 2);
    const flag = [...list, '--broker.address', 'http://127.0.0.1:1', '--timeout', '1s'];
    const f = await runGazctl(flag, { env });
    assert.equal(f.code, 1, describeResult(flag, f));
    assert.match(f.stderr, /127\.0\.0\.1:1/);
  });

  test('journals store-health -o json: healthy, and unhealthy with the reason and exit 1', async () => {
    const ok = ['journals', 'store-health', 'file:///jstore/', '-o', 'json'];
    const r = await gzOk(cluster, ok);
    assert.deepEqual(doc(ok, r), { store: 'file:///jstore/', check_delete_prefix: null, healthy: true, error: '' });

    const bad = ['journals', 'store-health', 's3://no-such-bucket-for-json-test/', '-o', 'json', '--timeout', '60s'];
    const r2 = await gz(cluster, bad, { timeoutMs: 90_000 });
    assert.equal(r2.code, 1, describeResult(bad, r2));
    const d = doc(bad, r2);
    assert.equal(d.healthy, false);
    assert.ok(typeof d.error === 'string' && d.error !== '', describeResult(bad, r2));
    assert.match(r2.stderr, /^gazctl: fragment store s3:\/\/no-such-bucket-for-json-test\/ is unhealthy: /);
  });
});
