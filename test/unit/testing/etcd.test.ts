// Choosing the etcd the harness runs: the peers' build, Debian's package, or a path.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DEBIAN_ETCD_BINARY, etcdServerFromEnv, resolveEtcdServer } from '../../../src/testing/etcd.js';
import { startCluster } from '../../../src/testing/cluster.js';
import { tsBroker } from '../../../src/testing/brokers.js';

test('Debian etcd runs /usr/bin/etcd with the zap logger (etcd 3.4 refuses --log-level otherwise)', () => {
  assert.deepEqual(resolveEtcdServer('debian'), { bin: DEBIAN_ETCD_BINARY, args: ['--logger=zap'] });
});

test('an etcd path must be absolute and executable, with one clear message', () => {
  assert.throws(() => resolveEtcdServer('etcd'), /^Error: etcd server 'etcd': expected 'peer', 'debian' or an absolute path to an etcd binary$/);
  assert.throws(() => resolveEtcdServer('/nonexistent/etcd'), /^Error: etcd binary \/nonexistent\/etcd is not an executable file$/);
  assert.deepEqual(resolveEtcdServer('/usr/bin/etcd'), { bin: '/usr/bin/etcd', args: [] });
});

test('GAZCTL_TEST_ETCD picks the etcd, default the peers\' build', () => {
  const saved = process.env.GAZCTL_TEST_ETCD;
  try {
    delete process.env.GAZCTL_TEST_ETCD;
    assert.equal(etcdServerFromEnv(), 'peer');
    process.env.GAZCTL_TEST_ETCD = 'debian';
    assert.equal(etcdServerFromEnv(), 'debian');
  } finally {
    if (saved === undefined) delete process.env.GAZCTL_TEST_ETCD;
    else process.env.GAZCTL_TEST_ETCD = saved;
  }
});

test('startCluster refuses brokerImpls that disagree with brokers, before starting anything', async () => {
  await assert.rejects(startCluster({ brokers: 3, brokerImpls: [tsBroker, tsBroker] }), /^RangeError: brokerImpls has 2 entries for 3 brokers$/);
});
