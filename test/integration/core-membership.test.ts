// A broker's membership across an etcd outage longer than its lease TTL: once etcd is back, the
// broker takes up the lease it had (etcd gives leases a fresh TTL when it starts again) instead
// of registering under a new one, so the keys it holds under that lease (its assignments) stay.
// With a new lease they would expire a TTL later, every member of a route at once.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { memberKey } from '../../src/lib/keyspace/index.js';
import { Membership } from '../../src/core/membership.js';
import { encodeBrokerSpec } from '../../src/core/broker/allocation.js';
import { Logger } from '../../src/core/log.js';
import { delay, pollUntil, startEtcd, type EtcdProcess } from '../../src/testing/index.js';

describe('broker membership on a real etcd', { timeout: 120_000 }, () => {
  let etcd: EtcdProcess | undefined;
  before(async () => {
    etcd = await startEtcd();
  });
  after(() => etcd?.stop());

  test('after an outage longer than the lease, the member registers again under its previous lease and its assignments stay', async (t) => {
    const e = etcd!;
    const ks = e.connect();
    const check = e.connect();
    const lines: string[] = [];
    const log = new Logger('info', 'text', (l) => lines.push(l));
    const id = { zone: 'z', suffix: 'm1' };
    const ttl = 2;
    const m = new Membership(ks, '/mbr', id, 'http://127.0.0.1:1', 10, ttl, log, encodeBrokerSpec);
    try {
      await m.start();
      const lease = m.leaseId!;
      assert.ok(lease !== undefined);
      const assignment = '/mbr/assign/j#z#m1#0';
      await ks.put(assignment, '', { lease });

      await e.halt();
      await pollUntil('the lease to be reported lost', async () => !m.registered, { timeoutMs: 20_000 });
      // Well past the TTL with etcd away.
      await delay(ttl * 1000 + 1000);
      await e.resume();
      await pollUntil('the member to register again', async () => m.registered, { timeoutMs: 30_000 });
      t.diagnostic(lines.filter((l) => /registered|lease/.test(l)).join('\n'));

      assert.equal(m.leaseId, lease, 'registered under the lease it had');
      // Longer than a TTL after etcd is back: a lease nobody keeps alive would be gone by now.
      await delay(ttl * 1000 * 2 + 1000);
      const kv = await check.get(memberKey('/mbr', id));
      assert.ok(kv, 'the member key exists');
      assert.equal(kv.lease, lease, 'the member key is under the previous lease');
      assert.ok(await check.get(assignment), 'the assignment under the previous lease is still there');
      assert.ok(lines.some((l) => /registered member again under its previous lease/.test(l)), lines.join('\n'));
    } finally {
      await m.stop();
      ks.close();
      check.close();
    }
  });
});
