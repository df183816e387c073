// The main job on a fresh machine: start a local cluster (etcd + 3 brokers with a file://
// store), then do real gazctl work against it: apply a journal hierarchy, list it, append
// keyed records, read them back, list fragments, and show the YAML round trip.
//
// It runs on our own brokers (bin/gazette.js) and Debian's etcd-server, so it needs no Go
// build: `scripts/setup.sh demo` installs only npm packages and that apt package.
// GAZCTL_TEST_BROKER=go and GAZCTL_TEST_ETCD=peer run it on the reference peers instead.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brokerImplFromEnv, etcdServerFromEnv, startCluster, tsBroker, waitForJournalsAssigned } from '../src/testing/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = join(root, 'bin', 'run.js');

function gazctl(args: string[], env: Record<string, string>, input?: string): string {
  console.log(`\n$ gazctl ${args.join(' ')}`);
  const r = spawnSync(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, input, encoding: 'utf8' });
  if (r.stdout) process.stdout.write(r.stdout);
  if (r.stderr) process.stderr.write(r.stderr);
  if (r.status !== 0) throw new Error(`gazctl ${args.join(' ')} exited with ${r.status}`);
  return r.stdout;
}

const specs = `name: demo/
replication: 3
labels:
- name: app
  value: demo
- name: content-type
  value: application/x-ndjson
fragment:
  length: 1048576
  compression_codec: GZIP
  stores:
  - file:///
  refresh_interval: 10s
  flush_interval: 1m0s
children:
- name: demo/clicks/
  children:
  - name: demo/clicks/part-000
  - name: demo/clicks/part-001
  - name: demo/clicks/part-002
- name: demo/orders
  replication: 2
`;

const impl = process.env.GAZCTL_TEST_BROKER ? brokerImplFromEnv() : tsBroker;
const etcd = process.env.GAZCTL_TEST_ETCD ? etcdServerFromEnv() : 'debian';
const cluster = await startCluster({ brokers: 3, impl, etcd });
try {
  console.log(`cluster up: ${cluster.brokers.length} ${cluster.impl.name} brokers, ${etcd} etcd ${cluster.etcd.endpoint}, fragments in ${cluster.fileRoot}`);
  const env = { BROKER_ADDRESS: cluster.brokerAddress };
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-demo-'));
  const specPath = join(dir, 'journals.yaml');
  writeFileSync(specPath, specs);

  gazctl(['journals', 'apply', '--specs', specPath, '--dry-run'], env);
  gazctl(['journals', 'apply', '--specs', specPath], env);
  await waitForJournalsAssigned(cluster, ['demo/clicks/part-000', 'demo/clicks/part-001', 'demo/clicks/part-002', 'demo/orders'], 30_000);
  gazctl(['journals', 'list', '-p', '-r', '--rf', '-L', 'content-type'], env);

  // Keyed records: a key line, then the record line. Each user's clicks land in one journal.
  const lines: string[] = [];
  for (let i = 0; i < 1000; i++) lines.push(`user-${i % 37}`, JSON.stringify({ user: `user-${i % 37}`, click: i }));
  gazctl(['journals', 'append', '-l', 'name:prefix=demo/clicks/', '--framing', 'lines', '--mapping', 'rendezvous'], env, lines.join('\n') + '\n');
  gazctl(['journals', 'append', '-l', 'name=demo/orders'], env, '{"order":1}\n{"order":2}\n');
  if (cluster.impl.name === 'ts') gazctl(['journals', 'flush', '-l', 'app=demo'], env); // on-demand flush: our brokers only

  const out = gazctl(['journals', 'read', '-l', 'name:prefix=demo/clicks/', '-o', join(dir, 'clicks.ndjson'), '--offsets-out', join(dir, 'offsets.json')], env);
  void out;
  const offsets = spawnSync('cat', [join(dir, 'offsets.json')], { encoding: 'utf8' }).stdout;
  console.log(`read the clicks back; offsets reached: ${offsets.trim()}`);
  gazctl(['journals', 'read', '-l', 'name=demo/orders'], env);
  gazctl(['journals', 'fragments', '-l', 'app=demo'], env);
  const yaml = gazctl(['journals', 'list', '-l', 'app=demo', '-o', 'yaml'], env);
  writeFileSync(join(dir, 'listed.yaml'), yaml);
  gazctl(['journals', 'apply', '--specs', join(dir, 'listed.yaml'), '--dry-run'], env);

  // Fragment operations: suspend an idle journal (persisting its last fragment), look for forks
  // of every journal's history in the store, plan a retention prune and a head reset (dry runs:
  // nothing changes), and check the store.
  gazctl(['journals', 'suspend', '-l', 'name=demo/orders', '--force'], env);
  gazctl(['journals', 'forks', '-l', 'app=demo', '--file-root', cluster.fileRoot], env);
  gazctl(['journals', 'prune', '-l', 'app=demo', '--file-root', cluster.fileRoot, '--dry-run'], env);
  gazctl(['journals', 'reset-head', '-l', 'name=demo/orders', '--dry-run'], env);
  gazctl(['journals', 'store-health', 'file:///'], env);
  console.log('\ndemo finished: the listed YAML re-applies as a no-op (every journal unchanged).');
} finally {
  await cluster.stop();
}
