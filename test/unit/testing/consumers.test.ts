// The consumer harness's pure parts: the sum app's layout and specs, the serve flags, the
// implementation choice, and reading a JSON file store's state.json.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  consumerImplFromEnv,
  consumerServeArgs,
  goConsumer,
  parseJsonFileState,
  sumAppJournalSpecs,
  sumAppLayout,
  sumAppShardSpecs,
} from '../../../src/testing/consumers.js';

test('the layout names shards of 4+ characters, sorted sources and <prefix>/<id> recovery logs', () => {
  const l = sumAppLayout({ shards: 2, sourcesPerShard: 2 });
  assert.deepEqual(
    l.shards.map((s) => [s.id, s.sources, s.recoveryLog]),
    [
      ['sums-000', ['sums/input/part-000-0', 'sums/input/part-000-1'], 'sums/recovery/sums-000'],
      ['sums-001', ['sums/input/part-001-0', 'sums/input/part-001-1'], 'sums/recovery/sums-001'],
    ],
  );
  assert.equal(l.hintPrefix, '/gazette/hints/sums');
});

test('journal specs: NDJSON sources, recovery-log content type, small fragments in a store', () => {
  const specs = sumAppJournalSpecs(sumAppLayout({ shards: 1 }), { replication: 2 });
  const ct = (name: string) => specs.find((s) => s.name === name)!.labels!.labels.find((x) => x.name === 'content-type')?.value;
  assert.deepEqual(specs.map((s) => s.name), ['sums/input/part-000', 'sums/recovery/sums-000']);
  assert.equal(ct('sums/input/part-000'), 'application/x-ndjson');
  assert.equal(ct('sums/recovery/sums-000'), 'application/x-gazette-recoverylog');
  for (const s of specs) {
    assert.equal(s.replication, 2);
    assert.equal(s.fragment!.length, 1024n);
    assert.deepEqual(s.fragment!.stores, ['file:///']);
  }
});

test('shard specs carry the recovery log prefix, hint prefix, standbys and a max txn duration', () => {
  const [s] = sumAppShardSpecs(sumAppLayout({ shards: 1 }), { hotStandbys: 2 });
  assert.equal(s!.id, 'sums-000');
  assert.equal(s!.recovery_log_prefix, 'sums/recovery');
  assert.equal(s!.hint_prefix, '/gazette/hints/sums');
  assert.equal(s!.hot_standbys, 2);
  assert.deepEqual(s!.max_txn_duration, { seconds: 1n, nanos: 0 });
  assert.deepEqual(s!.sources, [{ journal: 'sums/input/part-000', min_offset: 0n }]);
});

test('serve flags always set the etcd prefix and the loopback host', () => {
  const args = consumerServeArgs({
    id: 'consumer-0', zone: 'local', port: 9000, etcdEndpoint: 'http://127.0.0.1:2379',
    etcdPrefix: '/gazette/consumers/x', brokerAddress: 'http://127.0.0.1:8080', logDir: '/l', dataDir: '/d',
  });
  assert.equal(args[0], 'serve');
  for (const a of ['--etcd.prefix=/gazette/consumers/x', '--consumer.host=127.0.0.1', '--consumer.port=9000', '--consumer.id=consumer-0', '--broker.address=http://127.0.0.1:8080']) {
    assert.ok(args.includes(a), a);
  }
});

test('GAZCTL_TEST_CONSUMER picks the implementation, default go; an unknown one is refused', () => {
  const saved = process.env.GAZCTL_TEST_CONSUMER;
  try {
    delete process.env.GAZCTL_TEST_CONSUMER;
    assert.equal(consumerImplFromEnv(), goConsumer);
    process.env.GAZCTL_TEST_CONSUMER = 'nope';
    assert.throws(() => consumerImplFromEnv(), /^Error: GAZCTL_TEST_CONSUMER=nope: unknown consumer implementation \(registered: go/);
  } finally {
    if (saved === undefined) delete process.env.GAZCTL_TEST_CONSUMER;
    else process.env.GAZCTL_TEST_CONSUMER = saved;
  }
});

test('state.json is read as offsets, state and checkpoint; another shape is refused', () => {
  const st = parseJsonFileState('{"j":12}\n{"a":3,"b":-1}\n{"sources":{"j":{"read_through":12,"producers":null}}}\n');
  assert.deepEqual(st.offsets, { j: 12 });
  assert.deepEqual(st.state, { a: 3, b: -1 });
  assert.deepEqual(st.checkpoint, { sources: { j: { read_through: 12, producers: null } } });
  assert.throws(() => parseJsonFileState('{"j":12}\n'), /expected 3 JSON lines, found 1/);
});
