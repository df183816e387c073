// The main job on a fresh machine: start a local cluster (etcd + 3 brokers with a file://
// store), then do real gazctl work against it: apply a journal hierarchy, list it, append
// keyed records, read them back, list fragments, and show the YAML round trip. Then the shards
// half: two of our consumers (`gazette-sum`, the example application) beside the brokers, shard
// specs applied with gazctl, records summed by key, the shards listed with their lag, a shard's
// state played out of its recovery log, and a dry run of recovery-log pruning.
//
// It runs on our own brokers (bin/gazette.js) and Debian's etcd-server, so it needs no Go
// build: `scripts/setup.sh demo` installs only npm packages and that apt package.
// GAZCTL_TEST_BROKER=go and GAZCTL_TEST_ETCD=peer run it on the reference peers instead.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  brokerImplFromEnv,
  etcdServerFromEnv,
  parseJsonFileState,
  pollUntil,
  startCluster,
  startConsumers,
  tsBroker,
  tsConsumer,
  waitForJournalsAssigned,
  waitForShardsPrimary,
  type ConsumerGroup,
} from '../src/testing/index.js';

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

// The sum app: two input journals of NDJSON records, a recovery log per shard, two shards with
// a hot standby each.
const sumJournals = `name: demo/sums/
replication: 1
labels:
- name: app
  value: demo-sums
fragment:
  length: 4096
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 5s
children:
- name: demo/sums/input/
  labels:
  - name: content-type
    value: application/x-ndjson
  children:
  - name: demo/sums/input/part-000
  - name: demo/sums/input/part-001
- name: demo/sums/recovery/
  labels:
  - name: content-type
    value: application/x-gazette-recoverylog
  children:
  - name: demo/sums/recovery/sums-000
  - name: demo/sums/recovery/sums-001
`;

const sumShards = `common:
  recovery_log_prefix: demo/sums/recovery
  hint_prefix: /gazette/hints/demo-sums
  hint_backups: 1
  max_txn_duration: 1s
  hot_standbys: 1
  labels:
  - name: app
    value: demo-sums
shards:
- id: sums-000
  sources:
  - journal: demo/sums/input/part-000
- id: sums-001
  sources:
  - journal: demo/sums/input/part-001
`;

const impl = process.env.GAZCTL_TEST_BROKER ? brokerImplFromEnv() : tsBroker;
const etcd = process.env.GAZCTL_TEST_ETCD ? etcdServerFromEnv() : 'debian';
const cluster = await startCluster({ brokers: 3, impl, etcd });
let group: ConsumerGroup | undefined;
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

  // The shards half, on two of our consumers.
  group = await startConsumers(cluster, { count: 2, impl: tsConsumer });
  const shardsEnv = { ...env, CONSUMER_ADDRESS: group.address };
  writeFileSync(join(dir, 'sums-journals.yaml'), sumJournals);
  writeFileSync(join(dir, 'sums-shards.yaml'), sumShards);
  gazctl(['journals', 'apply', '--specs', join(dir, 'sums-journals.yaml')], env);
  await waitForJournalsAssigned(cluster, ['demo/sums/input/part-000', 'demo/sums/input/part-001', 'demo/sums/recovery/sums-000', 'demo/sums/recovery/sums-001'], 30_000);
  gazctl(['shards', 'apply', '--specs', join(dir, 'sums-shards.yaml'), '--dry-run'], shardsEnv);
  gazctl(['shards', 'apply', '--specs', join(dir, 'sums-shards.yaml')], shardsEnv);
  await waitForShardsPrimary(group.address, ['sums-000', 'sums-001'], 60_000);

  const expected: Record<string, number>[] = [{}, {}];
  for (const part of [0, 1]) {
    const records: string[] = [];
    for (let i = 0; i < 500; i++) {
      const key = `k${(i * 7 + part) % 11}`;
      records.push(JSON.stringify({ key, value: i }));
      expected[part]![key] = (expected[part]![key] ?? 0) + i;
    }
    gazctl(['journals', 'append', '-l', `name=demo/sums/input/part-00${part}`], env, records.join('\n') + '\n');
  }
  // Play shard sums-000's state out of its recovery log until it has summed every record.
  const recovered = join(dir, 'sums-000');
  const totals = await pollUntil(
    'sums-000 to sum every record',
    async () => {
      const r = spawnSync(process.execPath, [bin, 'shards', 'recover', '--id', 'sums-000', '--dir', recovered, '--force'], { env: { ...process.env, ...shardsEnv }, encoding: 'utf8' });
      if (r.status !== 0) return undefined;
      const state = parseJsonFileState(readFileSync(join(recovered, 'state.json'), 'utf8')).state as Record<string, number>;
      return Object.entries(expected[0]!).every(([k, v]) => state[k] === v) ? state : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
  gazctl(['shards', 'list', '-p', '-r', '--lag'], shardsEnv);
  gazctl(['shards', 'recover', '--id', 'sums-000', '--dir', recovered, '--force'], shardsEnv);
  console.log(`sums-000's recovered state.json holds the input's totals: ${JSON.stringify(totals)}`);
  gazctl(['shards', 'list', '-l', 'app=demo-sums', '-o', 'yaml'], shardsEnv);
  gazctl(['shards', 'prune-log', '-l', 'app=demo-sums', '--dry-run'], shardsEnv);
  console.log('\ndemo finished: the listed YAML re-applies as a no-op (every journal unchanged), and the consumers summed every record exactly.');
} finally {
  await group?.stop();
  await cluster.stop();
}
