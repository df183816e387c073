// Which broker serves a request, from a journal's route: the resolver's choices for reads
// (any member, the others as fallbacks) and appends (the primary only).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { JournalSpec, Status, type Route } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { Resolver } from '../../../../src/core/broker/resolver.js';
import type { Membership } from '../../../../src/core/membership.js';
import type { ClusterView, JournalEntry } from '../../../../src/core/broker/view.js';

const route: Route = {
  members: [
    { zone: 'z', suffix: 'b1' },
    { zone: 'z', suffix: 'b2' },
    { zone: 'z', suffix: 'b3' },
  ],
  primary: 0,
  endpoints: ['http://b1:1', 'http://b2:1', 'http://b3:1'],
};

function resolver(random: () => number, r: Route = route): Resolver {
  const entry = { name: 'a/j', spec: JournalSpec.fromPartial({ name: 'a/j', replication: 3 }), assignments: [], route: r } as unknown as JournalEntry;
  const view = {
    journals: () => new Map([['a/j', entry]]),
    etcdHeader: () => ({ cluster_id: 1n, member_id: 1n, revision: 5n, raft_term: 1n }),
    waitFor: async () => {},
  } as unknown as ClusterView;
  return new Resolver(view, { registered: true } as unknown as Membership, { zone: 'z', suffix: 'outsider' }, random);
}

test('a read through a broker outside the route starts at a random member and falls back to every other one', async () => {
  for (const [rand, order] of [
    [0, ['http://b1:1', 'http://b2:1', 'http://b3:1']],
    [0.5, ['http://b2:1', 'http://b3:1', 'http://b1:1']],
    [0.99, ['http://b3:1', 'http://b1:1', 'http://b2:1']],
  ] as const) {
    const res = await resolver(() => rand).resolve({ journal: 'a/j', requirePrimary: false, mayProxy: true });
    assert.equal(res.kind, 'proxy');
    if (res.kind !== 'proxy') return;
    const targets = [res, ...(res.fallbacks ?? [])];
    assert.deepEqual(
      targets.map((t) => t.endpoint),
      order,
    );
    // Each target's header names the broker it is sent to, which checks it.
    assert.deepEqual(
      targets.map((t) => t.header.process_id?.suffix),
      order.map((e) => e.slice(7, 9)),
    );
  }
});

test('an append is proxied to the primary alone, with no fallback', async () => {
  const res = await resolver(() => 0.99).resolve({ journal: 'a/j', requirePrimary: true, mayProxy: true });
  assert.equal(res.kind, 'proxy');
  if (res.kind !== 'proxy') return;
  assert.equal(res.endpoint, 'http://b1:1');
  assert.equal(res.fallbacks, undefined);
});

test('members without an endpoint are skipped; none at all is INSUFFICIENT_JOURNAL_BROKERS', async () => {
  const some = await resolver(() => 0, { ...route, endpoints: ['', 'http://b2:1', ''] }).resolve({ journal: 'a/j', requirePrimary: false, mayProxy: true });
  assert.equal(some.kind === 'proxy' && [some, ...(some.fallbacks ?? [])].map((t) => t.endpoint).join(), 'http://b2:1');
  const none = await resolver(() => 0, { ...route, endpoints: ['', '', ''] }).resolve({ journal: 'a/j', requirePrimary: false, mayProxy: true });
  assert.equal(none.kind === 'status' && none.status, Status.INSUFFICIENT_JOURNAL_BROKERS);
});
