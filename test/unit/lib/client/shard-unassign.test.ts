// ShardClient.unassignInBatches against the loopback Shard stub: batches of 100 in order, the
// flags on every request, the ids answered, and how a failing request stops the run.

import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { describe, it } from 'node:test';

import { Status, UnassignResponse, type UnassignRequest } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { ConsumerStatusError } from '../../../../src/lib/protocol/errors.js';
import { ShardClient, UNASSIGN_BATCH_SIZE, UnassignError, type UnassignBatch } from '../../../../src/lib/client/index.js';
import { startShardStub } from '../../../../src/testing/stubs.js';

const ids = (n: number) => Array.from({ length: n }, (_, i) => `shard-${String(i).padStart(3, '0')}`);

describe('ShardClient.unassignInBatches', () => {
  it('sends 250 ids as 100, 100 and 50, in order, with the flags, and returns what the consumer changed', async () => {
    const stub = await startShardStub({
      // The consumer changes every other shard.
      unassign: (call, cb) => cb(null, UnassignResponse.fromPartial({ status: Status.OK, shards: call.request.shards.filter((_, i) => i % 2 === 0) })),
    });
    const client = new ShardClient({ address: stub.address });
    try {
      const batches: UnassignBatch[] = [];
      const all = ids(250);
      const res = await client.unassignInBatches(all, { onlyFailed: true, dryRun: true, onBatch: (b) => batches.push(b) });
      const reqs = stub.requests.map((r) => r.request as UnassignRequest);
      assert.equal(UNASSIGN_BATCH_SIZE, 100);
      assert.deepEqual(reqs.map((r) => r.shards.length), [100, 100, 50]);
      assert.deepEqual(reqs.flatMap((r) => r.shards), all);
      for (const r of reqs) {
        assert.equal(r.only_failed, true);
        assert.equal(r.dry_run, true);
      }
      assert.equal(res.batches, 3);
      assert.deepEqual(res.changed, all.filter((_, i) => i % 2 === 0));
      assert.deepEqual(batches.map((b) => [b.index, b.batches, b.requested.length, b.changed.length]), [
        [0, 3, 100, 50],
        [1, 3, 100, 50],
        [2, 3, 50, 25],
      ]);
    } finally {
      client.close();
      await stub.stop();
    }
  });

  it('sends nothing for no ids, and honours another batch size', async () => {
    const stub = await startShardStub({ unassign: (call, cb) => cb(null, UnassignResponse.fromPartial({ status: Status.OK, shards: call.request.shards })) });
    const client = new ShardClient({ address: stub.address });
    try {
      assert.deepEqual(await client.unassignInBatches([]), { changed: [], batches: 0 });
      assert.equal(stub.requests.length, 0);
      const res = await client.unassignInBatches(ids(5), { batchSize: 2 });
      assert.deepEqual(stub.requests.map((r) => (r.request as UnassignRequest).shards.length), [2, 2, 1]);
      assert.deepEqual(res.changed, ids(5));
      assert.deepEqual((stub.requests[0]!.request as UnassignRequest).only_failed, false);
      await assert.rejects(client.unassignInBatches(ids(1), { batchSize: 0 }), RangeError);
    } finally {
      client.close();
      await stub.stop();
    }
  });

  it('stops at a refused request and says what the requests before it changed', async () => {
    let n = 0;
    const stub = await startShardStub({
      unassign: (call, cb) =>
        cb(null, UnassignResponse.fromPartial({ status: ++n === 2 ? Status.ETCD_TRANSACTION_FAILED : Status.OK, shards: n === 2 ? [] : call.request.shards })),
    });
    const client = new ShardClient({ address: stub.address });
    try {
      await assert.rejects(client.unassignInBatches(ids(250)), (e: unknown) => {
        assert.ok(e instanceof UnassignError);
        assert.equal(e.batchIndex, 1);
        assert.equal(e.batches, 3);
        assert.equal(e.requested.length, 100);
        assert.deepEqual(e.changed, ids(100));
        assert.ok(e.cause instanceof ConsumerStatusError);
        assert.equal(e.message, 'unassigning shards: ETCD_TRANSACTION_FAILED (batch 2 of 3, 100 shards; the 1 batch before it changed 100 shards)');
        return true;
      });
      assert.equal(stub.requests.length, 2, 'nothing after the failed request');
    } finally {
      client.close();
      await stub.stop();
    }
  });

  it('does not retry an unavailable consumer: the first request may have taken effect', async () => {
    const stub = await startShardStub({ unassign: (_call, cb) => cb({ code: GrpcStatus.UNAVAILABLE, details: 'going away' }) });
    const client = new ShardClient({ address: stub.address });
    try {
      await assert.rejects(client.unassignInBatches(ids(3)), (e: unknown) => e instanceof UnassignError && e.batchIndex === 0 && /\(batch 1 of 1, 3 shards\)$/.test(e.message));
      assert.equal(stub.requests.length, 1);
    } finally {
      client.close();
      await stub.stop();
    }
  });

  it('bounds all the requests together by timeoutMs', async () => {
    let n = 0;
    const stub = await startShardStub({
      // The second request is never answered.
      unassign: (call, cb) => {
        if (++n === 1) cb(null, UnassignResponse.fromPartial({ status: Status.OK, shards: call.request.shards }));
      },
    });
    const client = new ShardClient({ address: stub.address });
    try {
      await assert.rejects(client.unassignInBatches(ids(150), { timeoutMs: 300 }), (e: unknown) => e instanceof UnassignError && e.batchIndex === 1 && e.changed.length === 100);
    } finally {
      client.close();
      await stub.stop();
    }
  });
});
