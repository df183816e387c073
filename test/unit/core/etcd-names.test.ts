// A daemon warns once at start about an etcd endpoint whose host name does not exist (the default
// http://etcd:2379 outside Kubernetes), and says nothing about addresses that resolve.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { warnUnresolvableEtcd } from '../../../src/core/etcd-names.js';

test('warnUnresolvableEtcd: one line per endpoint that does not resolve, naming --etcd.address', async () => {
  const warned: string[] = [];
  await warnUnresolvableEtcd(['http://etcd-0.no-such-namespace.invalid:2379', 'http://127.0.0.1:2379', 'http://localhost:2379', 'http://[::1]:2379', 'not a url'], { warn: (m: string) => warned.push(m) });
  assert.equal(warned.length, 1, warned.join('\n'));
  assert.match(warned[0]!, /^etcd endpoint http:\/\/etcd-0\.no-such-namespace\.invalid:2379: host name "etcd-0\.no-such-namespace\.invalid" does not resolve; set --etcd\.address or ETCD_ADDRESS/);
});
