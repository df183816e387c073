import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  ApplyResponse,
  GetHintsResponse,
  ListResponse,
  StatResponse,
  Status,
  UnassignResponse,
  type ApplyRequest,
  type ApplyRequest_Change,
  type UnassignRequest,
} from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { ConsumerStatusError, TransportError } from '../../../../src/lib/protocol/errors.js';
import { ApplyError, ShardClient } from '../../../../src/lib/client/index.js';
import { startShardStub, stubHeader } from '../../../../src/testing/stubs.js';
import { fastDelay } from './helpers.js';

const ALL = { include: { labels: [] }, exclude: { labels: [] } };

test('getHints preserves absent versus empty hints', async () => {
  const stub = await startShardStub({
    getHints: (_call, cb) =>
      cb(
        null,
        GetHintsResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          primary_hints: { hints: { log: 'recovery/logs/s1', live_nodes: [], properties: [] } },
          backup_hints: [{ hints: undefined }, { hints: { log: '', live_nodes: [], properties: [] } }],
        }),
      ),
  });
  const client = new ShardClient({ address: stub.address });
  try {
    const res = await client.getHints('s1');
    assert.equal(res.primary_hints!.hints!.log, 'recovery/logs/s1');
    assert.equal(res.backup_hints.length, 2);
    assert.equal(res.backup_hints[0]!.hints, undefined, 'absent hints stay absent');
    assert.notEqual(res.backup_hints[1]!.hints, undefined, 'empty hints stay present');
    assert.equal(res.backup_hints[1]!.hints!.log, '');
  } finally {
    client.close();
    await stub.stop();
  }
});

test('shard list, stat and status errors', async () => {
  let stats = 0;
  const stub = await startShardStub({
    list: (_call, cb) =>
      cb(null, ListResponse.fromPartial({ status: Status.OK, header: stubHeader(), shards: [{ spec: { id: 's1' } }, { spec: { id: 's2' } }] })),
    stat: (call, cb) => {
      stats++;
      // NO_SHARD_PRIMARY is transient: retried.
      if (stats === 1) cb(null, StatResponse.fromPartial({ status: Status.NO_SHARD_PRIMARY, header: stubHeader() }));
      else if (call.request.shard === 'missing') cb(null, StatResponse.fromPartial({ status: Status.SHARD_NOT_FOUND, header: stubHeader() }));
      else cb(null, StatResponse.fromPartial({ status: Status.OK, header: stubHeader(), read_through: { 'a/j': 55n } }));
    },
  });
  const client = new ShardClient({ address: stub.address }, { delay: fastDelay });
  try {
    const list = await client.list(ALL);
    assert.deepEqual(
      list.shards.map((s) => s.spec!.id),
      ['s1', 's2'],
    );
    const st = await client.stat('s1', { readThrough: { 'a/j': 50n } });
    assert.equal(st.read_through['a/j'], 55n);
    assert.equal(stats, 2);
    await assert.rejects(client.stat('missing'), (e: unknown) => e instanceof ConsumerStatusError && e.status === Status.SHARD_NOT_FOUND);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('shard apply batches and reports a failed batch', async () => {
  let n = 0;
  const stub = await startShardStub({
    apply: (_call, cb) => {
      n++;
      cb(null, ApplyResponse.fromPartial({ status: n === 3 ? Status.ETCD_TRANSACTION_FAILED : Status.OK, header: stubHeader() }));
    },
  });
  const client = new ShardClient({ address: stub.address });
  const changes: ApplyRequest_Change[] = Array.from({ length: 7 }, (_, i) => ({
    expect_mod_revision: -1n,
    upsert: undefined,
    delete: `s${i}`,
    primary_hints: undefined,
  }));
  try {
    await assert.rejects(client.apply(changes, { maxTxnSize: 3 }), (e: unknown) => {
      assert.ok(e instanceof ApplyError);
      assert.ok(e.cause instanceof ConsumerStatusError);
      assert.equal(e.cause.status, Status.ETCD_TRANSACTION_FAILED);
      assert.equal(e.reason, 'revision-mismatch');
      assert.equal(e.batchIndex, 2);
      assert.equal(e.applied, 6);
      assert.match(e.message, /batch 3 of 3 failed \(6 of 7 changes already applied\): ETCD_TRANSACTION_FAILED/);
      return true;
    });
    assert.deepEqual(
      stub.requests.map((r) => (r.request as ApplyRequest).changes.length),
      [3, 3, 1],
    );
  } finally {
    client.close();
    await stub.stop();
  }
});

test('unassign sends its flags and JWT claims list every shard', async () => {
  const key = Buffer.from('k'.repeat(32));
  const stub = await startShardStub({
    unassign: (call, cb) => cb(null, UnassignResponse.fromPartial({ status: Status.OK, shards: call.request.shards.slice(0, 1) })),
  });
  const client = new ShardClient({ address: stub.address, authKeys: key.toString('base64') });
  try {
    const res = await client.unassign(['s2', 's1'], { onlyFailed: true, dryRun: true });
    assert.deepEqual(res.shards, ['s2']);
    const req = stub.requests[0]!.request as UnassignRequest;
    assert.deepEqual(req, { shards: ['s2', 's1'], only_failed: true, dry_run: true });
    const payload = JSON.parse(Buffer.from(stub.calls[0]!.authorization!.split('.')[1]!, 'base64url').toString());
    assert.equal(payload.cap, 4);
    assert.deepEqual(payload.sel.include.labels, [
      { name: 'id', value: 's1' },
      { name: 'id', value: 's2' },
    ]);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('an unreachable consumer fails with a clear TransportError', async () => {
  const client = new ShardClient({ address: 'http://127.0.0.1:9' });
  try {
    await assert.rejects(client.list(ALL, { timeoutMs: 500 }), (e: unknown) => {
      assert.ok(e instanceof TransportError);
      assert.match(e.message, /^consumer http:\/\/127\.0\.0\.1:9 is unreachable: /);
      assert.equal(e.code, GrpcStatus.UNAVAILABLE);
      return true;
    });
  } finally {
    client.close();
  }
});
