import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { ApplyResponse, Status, type ApplyRequest, type ApplyRequest_Change } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import {
  ApplyResponse as ShardApplyResponse,
  Status as ConsumerStatus,
  type ApplyRequest_Change as ShardChange,
} from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { BrokerStatusError, ConsumerStatusError, GazctlError, TransportError, ValidationError } from '../../../../src/lib/protocol/errors.js';
import {
  ApplyError,
  applyInBatches,
  JournalClient,
  ShardClient,
  type ApplyBatchInfo,
  type ApplyService,
} from '../../../../src/lib/client/index.js';
import { startJournalStub, startShardStub, stubHeader } from '../../../../src/testing/stubs.js';
import { fastDelay } from './helpers.js';

interface FakeResponse {
  status: number;
  header?: { etcd?: { revision: bigint } };
}

const journals: ApplyService<FakeResponse> = {
  what: 'applying journal specs',
  statusError: (status, context) => new BrokerStatusError(status, context),
};

/** A fake service answering OK with revisions 11, 12, ... and recording the batches. */
function fake(answer: (batch: number[], i: number) => FakeResponse | Promise<FakeResponse> = (_b, i) => ({ status: 0, header: { etcd: { revision: 11n + BigInt(i) } } })) {
  const sent: number[][] = [];
  return {
    sent,
    send: async (batch: number[]) => {
      sent.push(batch);
      return answer(batch, sent.length - 1);
    },
  };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

function grpcError(code: GrpcStatus, details: string): ServiceError {
  return Object.assign(new Error(`${code} ${GrpcStatus[code]}: ${details}`), { code, details, metadata: new Metadata() });
}

test('applyInBatches cuts the changes into batches of maxTxnSize, in order', async () => {
  const f = fake();
  const res = await applyInBatches(range(25), f.send, journals, { maxTxnSize: 10 });
  assert.deepEqual(f.sent.map((b) => b.length), [10, 10, 5]);
  assert.deepEqual(f.sent.flat(), range(25));
  assert.equal(res.batches, 3);
  assert.equal(res.applied, 25);
  assert.equal(res.revision, 13n, 'the revision of the last transaction');
  assert.equal(res.response.status, 0);
});

test('applyInBatches sends everything at once for maxTxnSize 0 or absent, and an empty list once', async () => {
  for (const opts of [{ maxTxnSize: 0 }, {}]) {
    const f = fake();
    const res = await applyInBatches(range(300), f.send, journals, opts);
    assert.deepEqual(f.sent.map((b) => b.length), [300]);
    assert.equal(res.batches, 1);
  }
  const f = fake();
  const res = await applyInBatches([], f.send, journals, { maxTxnSize: 5 });
  assert.deepEqual(f.sent, [[]]);
  assert.equal(res.batches, 1);
  assert.equal(res.applied, 0);
});

test('applyInBatches calls onBatch after each applied batch', async () => {
  const f = fake();
  const seen: ApplyBatchInfo[] = [];
  await applyInBatches(range(7), f.send, journals, { maxTxnSize: 3, onBatch: (b) => seen.push(b) });
  assert.deepEqual(seen, [
    { index: 0, batches: 3, size: 3, applied: 3, done: 1, total: 7, revision: 11n },
    { index: 1, batches: 3, size: 3, applied: 6, done: 2, total: 7, revision: 12n },
    { index: 2, batches: 3, size: 1, applied: 7, done: 3, total: 7, revision: 13n },
  ]);
});

test('a revision mismatch stops the run with an ApplyError saying where', async () => {
  const f = fake((_b, i) => ({ status: i === 1 ? Status.ETCD_TRANSACTION_FAILED : 0, header: { etcd: { revision: 5n } } }));
  const seen: number[] = [];
  await assert.rejects(applyInBatches(range(25), f.send, journals, { maxTxnSize: 10, onBatch: (b) => seen.push(b.index) }), (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.reason, 'revision-mismatch');
    assert.equal(e.batchIndex, 1);
    assert.equal(e.batches, 3);
    assert.equal(e.batchSize, 10);
    assert.equal(e.applied, 10);
    assert.equal(e.total, 25);
    assert.equal(e.status, Status.ETCD_TRANSACTION_FAILED);
    assert.equal(e.statusName, 'ETCD_TRANSACTION_FAILED');
    assert.ok(e.cause instanceof BrokerStatusError);
    assert.equal(e.cause.status, Status.ETCD_TRANSACTION_FAILED);
    assert.equal(e.detail, 'applying journal specs: ETCD_TRANSACTION_FAILED');
    assert.equal(e.message, 'applying journal specs: batch 2 of 3 failed (10 of 25 changes already applied): ETCD_TRANSACTION_FAILED');
    assert.ok(e instanceof GazctlError);
    return true;
  });
  assert.equal(f.sent.length, 2, 'nothing is sent after the failing batch');
  assert.deepEqual(seen, [0]);
});

test('a one-batch failure reads like the plain status error', async () => {
  const f = fake(() => ({ status: Status.ETCD_TRANSACTION_FAILED }));
  await assert.rejects(applyInBatches(range(3), f.send, journals), (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.message, 'applying journal specs: ETCD_TRANSACTION_FAILED');
    assert.equal(e.batchIndex, 0);
    assert.equal(e.batches, 1);
    assert.equal(e.applied, 0);
    return true;
  });
});

test('another status is reason "other" and keeps the status', async () => {
  const f = fake(() => ({ status: Status.NOT_ALLOWED }));
  await assert.rejects(applyInBatches(range(3), f.send, journals), (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.reason, 'other');
    assert.equal(e.status, Status.NOT_ALLOWED);
    assert.equal(e.statusName, 'NOT_ALLOWED');
    return true;
  });
});

test('a transport failure is reason "other", with the transport error as cause', async () => {
  const cause = new TransportError('applying journal specs: UNAUTHENTICATED: not authorized to a/b', GrpcStatus.UNAUTHENTICATED);
  const f = fake((_b, i) => {
    if (i === 2) throw cause;
    return { status: 0 };
  });
  await assert.rejects(applyInBatches(range(25), f.send, journals, { maxTxnSize: 10 }), (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.reason, 'other');
    assert.equal(e.cause, cause);
    assert.equal(e.status, undefined);
    assert.equal(e.batchIndex, 2);
    assert.equal(e.applied, 20);
    assert.equal(e.detail, cause.message);
    assert.equal(e.message, `applying journal specs: batch 3 of 3 failed (20 of 25 changes already applied): ${cause.message}`);
    assert.ok(e.cause instanceof TransportError, 'the cause keeps its class (the CLI picks the exit code from it)');
    return true;
  });
});

test("etcd's too-many-operations refusal is recognised through the transport error", async () => {
  const inner = grpcError(GrpcStatus.UNKNOWN, 'etcdserver: too many operations in txn request');
  const f = fake(() => {
    throw new TransportError(`applying journal specs: UNKNOWN: ${inner.details}`, inner.code, { cause: inner });
  });
  await assert.rejects(applyInBatches(range(200), f.send, journals), (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.reason, 'too-many-operations');
    assert.equal(e.batchSize, 200);
    assert.equal(e.batches, 1);
    return true;
  });
  // The same words in another kind of error (not from the service) are not etcd's refusal.
  const g = fake(() => {
    throw new Error('too many operations in txn request');
  });
  await assert.rejects(applyInBatches(range(2), g.send, journals), (e: unknown) => e instanceof ApplyError && e.reason === 'other');
});

test('an abort is rethrown as is', async () => {
  const ac = new AbortController();
  ac.abort();
  const f = fake(() => {
    throw ac.signal.reason;
  });
  await assert.rejects(applyInBatches(range(2), f.send, journals), (e: unknown) => !(e instanceof ApplyError) && (e as Error).name === 'AbortError');
});

test('JournalClient.apply: too many operations from the broker, at a real gRPC boundary', async () => {
  const stub = await startJournalStub({
    apply: (call, cb) => {
      if (call.request.changes.length > 128) {
        cb({ code: GrpcStatus.UNKNOWN, details: 'etcdserver: too many operations in txn request', metadata: new Metadata() } as ServiceError, null);
      } else cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 42n }) }));
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  const changes: ApplyRequest_Change[] = range(200).map((i) => ({ expect_mod_revision: -1n, upsert: undefined, delete: `j/${i}` }));
  try {
    await assert.rejects(client.apply(changes, { maxTxnSize: 150 }), (e: unknown) => {
      assert.ok(e instanceof ApplyError);
      assert.equal(e.reason, 'too-many-operations');
      assert.equal(e.batchIndex, 0);
      assert.equal(e.batches, 2);
      assert.equal(e.batchSize, 150);
      assert.equal(e.applied, 0);
      assert.ok(e.cause instanceof TransportError);
      assert.doesNotMatch(e.message, /--/, 'library messages name no CLI flag');
      return true;
    });
    const batches: number[] = [];
    const res = await client.apply(changes, { maxTxnSize: 100, onBatch: (b) => batches.push(b.size) });
    assert.deepEqual(batches, [100, 100]);
    assert.equal(res.revision, 42n);
    assert.equal(res.batches, 2);
    assert.deepEqual(
      stub.requests.map((r) => (r.request as ApplyRequest).changes.length),
      [150, 100, 100],
    );
  } finally {
    client.close();
    await stub.stop();
  }
});

test('ShardClient.apply: the consumer status is carried, with progress and the final revision', async () => {
  let n = 0;
  const stub = await startShardStub({
    apply: (_call, cb) => {
      n++;
      cb(null, ShardApplyResponse.fromPartial({ status: n === 2 ? ConsumerStatus.SHARD_NOT_FOUND : ConsumerStatus.OK, header: stubHeader({ revision: 7n }) }));
    },
  });
  const client = new ShardClient({ address: stub.address });
  const changes: ShardChange[] = range(5).map((i) => ({ expect_mod_revision: -1n, upsert: undefined, delete: `s${i}`, primary_hints: undefined }));
  try {
    const seen: number[] = [];
    await assert.rejects(client.apply(changes, { maxTxnSize: 2, onBatch: (b) => seen.push(b.applied) }), (e: unknown) => {
      assert.ok(e instanceof ApplyError);
      assert.equal(e.reason, 'other');
      assert.equal(e.status, ConsumerStatus.SHARD_NOT_FOUND);
      assert.ok(e.cause instanceof ConsumerStatusError);
      assert.equal(e.message, 'applying shard specs: batch 2 of 3 failed (2 of 5 changes already applied): SHARD_NOT_FOUND');
      return true;
    });
    assert.deepEqual(seen, [2]);
    const res = await client.apply(changes.slice(0, 1));
    assert.equal(res.revision, 7n);
    assert.equal(res.batches, 1);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('applyInBatches with prepare: each batch is prepared while the one before is in flight, sent one at a time', async () => {
  const events: string[] = [];
  let inFlight = 0;
  let release: (() => void) | undefined;
  const send = async (batch: number[], prepared?: string) => {
    inFlight++;
    assert.equal(inFlight, 1, 'one request at a time');
    events.push(`send ${batch[0]} with ${prepared}`);
    // Answer once the test lets it (after the next batch had its chance to be prepared).
    await new Promise<void>((r) => (release = r));
    events.push(`answer ${batch[0]}`);
    inFlight--;
    return { status: 0, header: { etcd: { revision: BigInt(batch[0]!) } } };
  };
  const prepare = (batch: number[]) => {
    events.push(`prepare ${batch[0]}`);
    return `p${batch[0]}`;
  };
  const run = applyInBatches(range(30), send, journals, { maxTxnSize: 10 }, prepare);
  for (let i = 0; i < 3; i++) {
    // Let the event loop turn: the request is out, the next batch gets prepared meanwhile.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    release!();
  }
  const res = await run;
  assert.equal(res.applied, 30);
  assert.equal(res.revision, 20n);
  // Batch 10 is prepared before batch 0 is answered, and so on; the last has nothing after it.
  assert.deepEqual(events, [
    'prepare 0', 'send 0 with p0', 'prepare 10', 'answer 0',
    'send 10 with p10', 'prepare 20', 'answer 10',
    'send 20 with p20', 'answer 20',
  ]);
});

test('applyInBatches with prepare stops at the first failure and sends nothing prepared after it', async () => {
  const sent: number[] = [];
  const prepared: number[] = [];
  const send = async (batch: number[]) => {
    sent.push(batch[0]!);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    return batch[0] === 10 ? { status: Status.ETCD_TRANSACTION_FAILED } : { status: 0 };
  };
  await assert.rejects(
    applyInBatches(range(40), send, journals, { maxTxnSize: 10 }, (b) => prepared.push(b[0]!)),
    (e: unknown) => e instanceof ApplyError && e.reason === 'revision-mismatch' && e.batchIndex === 1 && e.applied === 10,
  );
  assert.deepEqual(sent, [0, 10]);
  assert.ok(!prepared.includes(30), 'nothing is prepared beyond the batch after the failing one');
});

test('applyInBatches with a prepare that throws: the batch is sent unprepared', async () => {
  const got: (string | undefined)[] = [];
  const res = await applyInBatches(
    range(3),
    async (_batch, p?: string) => {
      got.push(p);
      return { status: 0 };
    },
    journals,
    { maxTxnSize: 1 },
    (b) => {
      if (b[0] === 1) throw new Error('cannot prepare');
      return `p${b[0]}`;
    },
  );
  assert.equal(res.applied, 3);
  assert.deepEqual(got, ['p0', undefined, 'p2']);
});

test('JournalClient.apply: the broker receives every batch exactly, and a change the fast encoder leaves fails as before', async () => {
  const stub = await startJournalStub({
    apply: (_call, cb) => cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 7n }) })),
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  const changes: ApplyRequest_Change[] = range(250).map((i) => ({
    expect_mod_revision: i % 3 === 0 ? 0n : i % 3 === 1 ? -1n : BigInt(100 + i),
    upsert: {
      name: `acme/part-${i % 7}/journal-${i}-é`,
      replication: 1 + (i % 3),
      labels: { labels: [{ name: 'app', value: 'billing', prefix: false }, { name: 'owner', value: `team-${i % 4}`, prefix: i % 2 === 0 }] },
      fragment: {
        length: 67108864n,
        compression_codec: 1 + (i % 4),
        stores: ['s3://bucket/x/'],
        refresh_interval: { seconds: 300n, nanos: 0 },
        retention: i % 2 ? { seconds: 86400n, nanos: 5 } : undefined,
        flush_interval: undefined,
        path_postfix_template: i % 5 === 0 ? 'date={{.Spool.FirstAppendTime.Format "2006-01-02"}}' : '',
      },
      flags: i % 2 ? 4 : 0,
      max_append_rate: BigInt(i * 1000),
      suspend: i % 9 === 0 ? { level: 1, offset: BigInt(i) } : undefined,
    },
    delete: '',
  }));
  try {
    const res = await client.apply(changes, { maxTxnSize: 100 });
    assert.equal(res.batches, 3);
    assert.deepEqual(
      stub.requests.map((r) => r.request as ApplyRequest),
      [{ changes: changes.slice(0, 100) }, { changes: changes.slice(100, 200) }, { changes: changes.slice(200) }],
    );
    // An int64 beyond 64 bits: refused by the generated serializer in the second batch, as always.
    const bad = changes.map((c) => ({ ...c }));
    bad[150] = { ...bad[150]!, expect_mod_revision: 2n ** 64n };
    await assert.rejects(client.apply(bad, { maxTxnSize: 100 }), (e: unknown) => {
      assert.ok(e instanceof ApplyError);
      assert.equal(e.reason, 'other');
      assert.equal(e.batchIndex, 1);
      assert.equal(e.applied, 100);
      assert.match(e.detail, /serialization failure.*too large/i);
      return true;
    });
  } finally {
    client.close();
    await stub.stop();
  }
});

// ---- several batches in flight (opts.parallel) ------------------------------------------------

/** Lets every promise and immediate of the current work run (a bounded number of loop turns). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

/**
 * A sender whose calls stay in flight until the test answers them: it records the order batches
 * were sent in (by their first change), how many were in flight at most, and, with `itemName`,
 * whether two calls naming the same item were ever in flight together.
 */
function held<C>(first: (batch: C[]) => number = (b) => b[0] as number, itemName?: (c: C) => string) {
  const calls = new Map<number, { batch: C[]; resolve: (r: FakeResponse) => void; reject: (e: unknown) => void }>();
  const started: number[] = [];
  let max = 0;
  let overlapped = false;
  const send = (batch: C[]) =>
    new Promise<FakeResponse>((resolve, reject) => {
      const id = first(batch);
      if (itemName) {
        const names = new Set(batch.map(itemName));
        for (const c of calls.values()) if (c.batch.some((x) => names.has(itemName(x)))) overlapped = true;
      }
      started.push(id);
      calls.set(id, { batch, resolve, reject });
      max = Math.max(max, calls.size);
    });
  const take = (id: number) => {
    const c = calls.get(id);
    assert.ok(c, `batch ${id} is in flight (in flight: ${[...calls.keys()].join(', ')})`);
    calls.delete(id);
    return c;
  };
  return {
    send,
    started,
    inFlight: () => [...calls.keys()].sort((a, b) => a - b),
    max: () => max,
    overlapped: () => overlapped,
    ok: (id: number, revision: bigint) => take(id).resolve({ status: 0, header: { etcd: { revision } } }),
    answer: (id: number, r: FakeResponse) => take(id).resolve(r),
    fail: (id: number, err: unknown) => take(id).reject(err),
  };
}

test('parallel: batches are sent in order, the window stays full and is never exceeded, answers come in any order', async () => {
  const h = held<number>();
  const seen: ApplyBatchInfo[] = [];
  let result: Awaited<ReturnType<typeof applyInBatches<number, FakeResponse>>> | undefined;
  const run = applyInBatches(range(100), h.send, journals, { maxTxnSize: 10, parallel: 3, onBatch: (b) => seen.push(b) }).then((r) => (result = r));
  // Answer the latest batch in flight each time (last in, first out), so answers are never in
  // the order of sending; batch 10..90's revision is 1000 minus its first change, so the highest
  // revision is the first batch's.
  const answered: number[] = [];
  for (let step = 0; step < 10; step++) {
    await settle();
    const inFlight = h.inFlight();
    const unsent = 10 - h.started.length;
    assert.equal(inFlight.length, Math.min(3, inFlight.length + unsent), `step ${step}: the window is kept full (${inFlight.join(', ')} in flight)`);
    const id = inFlight[inFlight.length - 1]!;
    answered.push(id);
    h.ok(id, 1000n - BigInt(id));
  }
  await run;
  assert.equal(h.max(), 3, 'never more than 3 in flight');
  assert.deepEqual(h.started, range(10).map((i) => i * 10), 'sent in order');
  assert.notDeepEqual(answered, h.started, 'answered out of order');
  assert.deepEqual(seen.map((b) => b.index * 10), answered, 'onBatch as each batch answers');
  assert.deepEqual(seen.map((b) => b.done), range(10).map((i) => i + 1));
  assert.deepEqual(seen.map((b) => b.applied), range(10).map((i) => (i + 1) * 10));
  assert.deepEqual(seen.map((b) => b.revision), answered.map((id) => 1000n - BigInt(id)), "each batch's own revision");
  assert.ok(result);
  assert.equal(result.applied, 100);
  assert.equal(result.batches, 10);
  assert.equal(result.revision, 1000n, 'the highest revision of the run');
  assert.equal(result.response.header?.etcd?.revision, 910n, "the response is the last batch's");
});

test('parallel: a failure stops the sending; the batches in flight are awaited, and the error names exactly what was applied', async () => {
  const h = held<number>();
  const seen: number[] = [];
  let settled = false;
  const run = applyInBatches(range(100), h.send, journals, { maxTxnSize: 10, parallel: 4, onBatch: (b) => seen.push(b.index) });
  void run.catch(() => undefined).finally(() => (settled = true));
  await settle();
  assert.deepEqual(h.inFlight(), [0, 10, 20, 30]);
  // Batch 3 (index 2) is refused first; nothing is sent after that.
  h.answer(20, { status: Status.ETCD_TRANSACTION_FAILED });
  await settle();
  assert.deepEqual(h.started, [0, 10, 20, 30], 'no batch is sent after a failure');
  h.ok(30, 50n);
  await settle();
  assert.equal(settled, false, 'the run waits for the batches still in flight');
  // Batch 2 (index 1) then fails too, with a transport error: it is the lowest failure.
  const cause = new TransportError('applying journal specs: UNAVAILABLE: connection dropped', GrpcStatus.UNAVAILABLE);
  h.fail(10, cause);
  await settle();
  assert.equal(settled, false);
  h.ok(0, 40n);
  await assert.rejects(run, (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.batchIndex, 1, 'the lowest failed batch');
    assert.equal(e.reason, 'other');
    assert.equal(e.cause, cause);
    assert.deepEqual(e.appliedBatches, [0, 3]);
    assert.deepEqual(e.failedBatches, [1, 2]);
    assert.equal(e.appliedInOrder, false);
    assert.equal(e.applied, 20);
    assert.equal(e.batches, 10);
    assert.equal(e.batchSize, 10);
    assert.equal(e.message, `applying journal specs: batch 2 of 10 failed (20 of 100 changes already applied): ${cause.message}`);
    return true;
  });
  assert.deepEqual(h.started, [0, 10, 20, 30]);
  assert.deepEqual(seen, [3, 0]);
});

test('parallel: when only the batches before the failed one went through, the error reads as one at a time', async () => {
  const h = held<number>();
  const run = applyInBatches(range(60), h.send, journals, { maxTxnSize: 10, parallel: 3 });
  void run.catch(() => undefined);
  await settle();
  h.ok(0, 1n);
  await settle();
  assert.deepEqual(h.inFlight(), [10, 20, 30]);
  h.answer(20, { status: Status.ETCD_TRANSACTION_FAILED });
  h.answer(30, { status: Status.NOT_ALLOWED });
  h.ok(10, 2n);
  await assert.rejects(run, (e: unknown) => {
    assert.ok(e instanceof ApplyError);
    assert.equal(e.batchIndex, 2);
    assert.equal(e.reason, 'revision-mismatch');
    assert.equal(e.status, Status.ETCD_TRANSACTION_FAILED);
    assert.deepEqual(e.appliedBatches, [0, 1]);
    assert.deepEqual(e.failedBatches, [2, 3]);
    assert.equal(e.appliedInOrder, true);
    assert.equal(e.applied, 20);
    assert.equal(e.message, 'applying journal specs: batch 3 of 6 failed (20 of 60 changes already applied): ETCD_TRANSACTION_FAILED');
    return true;
  });
  assert.deepEqual(h.started, [0, 10, 20, 30]);
});

test('parallel: an abort stops the sending, waits for the batches in flight, and is rethrown as is', async () => {
  const h = held<number>();
  const ac = new AbortController();
  ac.abort();
  let settled = false;
  const run = applyInBatches(range(50), h.send, journals, { maxTxnSize: 10, parallel: 3 });
  void run.catch(() => undefined).finally(() => (settled = true));
  await settle();
  h.fail(10, ac.signal.reason);
  await settle();
  assert.deepEqual(h.started, [0, 10, 20]);
  h.answer(0, { status: Status.ETCD_TRANSACTION_FAILED });
  await settle();
  assert.equal(settled, false);
  h.ok(20, 3n);
  await assert.rejects(run, (e: unknown) => e === ac.signal.reason && !(e instanceof ApplyError));
  assert.deepEqual(h.started, [0, 10, 20]);
});

test('parallel: two batches naming the same item are never in flight at once, and the order is kept', async () => {
  // Batches of two: [a b] [c d] [a e] [f g] [h i] [b j]: the third waits for the first, the
  // last for the third (which named a, not b) and for the first (b): the latest that names one
  // of its items is enough.
  const names = ['a', 'b', 'c', 'd', 'a', 'e', 'f', 'g', 'h', 'i', 'b', 'j'];
  const changes = names.map((name, i) => ({ name, i }));
  type Change = (typeof changes)[number];
  const h = held<Change>((b) => b[0]!.i, (c) => c.name);
  const service: ApplyService<FakeResponse, Change> = { ...journals, itemName: (c) => c.name };
  const run = applyInBatches(changes, h.send, service, { maxTxnSize: 2, parallel: 4 });
  await settle();
  assert.deepEqual(h.inFlight(), [0, 2], 'the batch naming "a" again waits, and so do the ones after it');
  h.ok(2, 1n);
  await settle();
  assert.deepEqual(h.inFlight(), [0]);
  h.ok(0, 2n);
  await settle();
  assert.deepEqual(h.inFlight(), [4, 6, 8, 10]);
  for (const id of [10, 8, 6, 4]) h.ok(id, 3n);
  const res = await run;
  assert.equal(res.applied, 12);
  assert.equal(h.overlapped(), false);
  assert.deepEqual(h.started, [0, 2, 4, 6, 8, 10]);

  // Without itemName, the same changes go out four at a time.
  const g = held<Change>((b) => b[0]!.i, (c) => c.name);
  const again = applyInBatches(changes, g.send, journals, { maxTxnSize: 2, parallel: 4 });
  await settle();
  assert.deepEqual(g.inFlight(), [0, 2, 4, 6]);
  assert.equal(g.overlapped(), true);
  for (const id of [0, 2, 4, 6]) g.ok(id, 1n);
  await settle();
  for (const id of [8, 10]) g.ok(id, 1n);
  await again;
});

test('parallel: JournalClient and ShardClient name their items, so duplicates within a run are never in flight at once', async () => {
  let pending = 0;
  let max = 0;
  /** An Apply handler that answers `response` after 5 ms, counting the calls in flight at once. */
  const slowly =
    <R>(response: R) =>
    (_call: unknown, cb: (err: null, res: R) => void) => {
      max = Math.max(max, ++pending);
      setTimeout(() => {
        pending--;
        cb(null, response);
      }, 5);
    };
  const stub = await startJournalStub({
    apply: slowly(ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 5n }) })),
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  // The same journal in every batch: they go one at a time, whatever --parallel says.
  const changes: ApplyRequest_Change[] = range(8).map((i) => ({ expect_mod_revision: -1n, upsert: undefined, delete: i % 2 ? `j/${i}` : 'j/same' }));
  try {
    const res = await client.apply(changes, { maxTxnSize: 2, parallel: 4 });
    assert.equal(res.batches, 4);
    assert.equal(max, 1);
    assert.deepEqual(
      stub.requests.map((r) => (r.request as ApplyRequest).changes.map((c) => c.delete)),
      [['j/same', 'j/1'], ['j/same', 'j/3'], ['j/same', 'j/5'], ['j/same', 'j/7']],
    );
  } finally {
    client.close();
    await stub.stop();
  }
  const shards = await startShardStub({
    apply: slowly(ShardApplyResponse.fromPartial({ status: ConsumerStatus.OK, header: stubHeader({ revision: 7n }) })),
  });
  const sc = new ShardClient({ address: shards.address });
  max = 0;
  const shardChanges: ShardChange[] = range(6).map((i) => ({ expect_mod_revision: -1n, upsert: undefined, delete: i === 4 ? 's0' : `s${i}`, primary_hints: undefined }));
  try {
    // [s0 s1] [s2 s3] [s0 s5]: the third waits for the first.
    const res = await sc.apply(shardChanges, { maxTxnSize: 2, parallel: 3 });
    assert.equal(res.batches, 3);
    assert.equal(max, 2);
  } finally {
    sc.close();
    await shards.stop();
  }
});

test('parallel must be a positive integer; nothing is sent otherwise', async () => {
  for (const parallel of [0, -1, 1.5, Number.NaN]) {
    const f = fake();
    await assert.rejects(applyInBatches(range(5), f.send, journals, { maxTxnSize: 1, parallel }), (e: unknown) => e instanceof ValidationError && e.message === `parallel: must be a positive integer (got ${parallel})`);
    assert.equal(f.sent.length, 0);
  }
});

test('parallel with prepare: each batch is sent with its own prepared value, prepared once; the one after a full window while it is in flight', async () => {
  const h = held<number>();
  const prepared: number[] = [];
  const got = new Map<number, string | undefined>();
  const send = (batch: number[], p?: string) => {
    got.set(batch[0]!, p);
    return h.send(batch);
  };
  const run = applyInBatches(range(50), send, journals, { maxTxnSize: 10, parallel: 2 }, (b) => {
    prepared.push(b[0]!);
    return `p${b[0]}`;
  });
  await settle();
  assert.deepEqual(h.inFlight(), [0, 10]);
  assert.deepEqual(prepared, [0, 10, 20], 'the batch after the window is prepared while the window is in flight');
  h.ok(10, 1n);
  await settle();
  assert.deepEqual(h.inFlight(), [0, 20]);
  assert.deepEqual(prepared, [0, 10, 20, 30]);
  for (const id of [0, 20]) h.ok(id, 2n);
  await settle();
  for (const id of [30, 40]) h.ok(id, 3n);
  const res = await run;
  assert.equal(res.applied, 50);
  assert.deepEqual(prepared, [0, 10, 20, 30, 40]);
  assert.deepEqual([...got].sort((a, b) => a[0] - b[0]), range(5).map((i) => [i * 10, `p${i * 10}`]));
});
