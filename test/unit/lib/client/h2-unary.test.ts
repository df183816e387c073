// The lean unary call (h2-unary.ts) against the grpc-js one: same responses, and the same codes,
// details and trailing metadata for what a server answers on a connection that stands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import http2, { type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Metadata, Server, ServerCredentials, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { JournalService, Status, type ApplyResponse } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { encodeApplyRequest } from '../../../../src/lib/protocol/fast-encode.js';
import { ConnectionPool } from '../../../../src/lib/client/dial.js';
import { JournalClient } from '../../../../src/lib/client/index.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../../src/testing/stubs.js';
import { claimsFor } from '../../../../src/lib/client/auth.js';

const decode = (b: Buffer): ApplyResponse => JournalService.apply.responseDeserialize(b);
const request = encodeApplyRequest({ changes: [{ expect_mod_revision: 0n, upsert: undefined, delete: 'a/journal' }] });

/** Waits (a bounded number of event-loop turns) for the pool's lean session to connect. */
async function connected(pool: ConnectionPool): Promise<void> {
  pool.connect();
  for (let i = 0; i < 500 && !pool.lean(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(pool.lean(), 'the lean session connects');
}

interface Outcome {
  res?: ApplyResponse;
  code?: number;
  details?: string;
  trailers?: Record<string, unknown>;
}

function outcome(err: ServiceError | null, res?: ApplyResponse): Outcome {
  if (!err) return { res };
  const trailers = err.metadata.getMap();
  return { code: err.code, details: err.details, trailers };
}

/** The same Apply request through the lean session and through grpc-js. */
async function both(pool: ConnectionPool, timeoutMs?: number): Promise<{ lean: Outcome; grpc: Outcome }> {
  const md = pool.metadata(claimsFor.journalApply());
  // The grpc-js channel connects first, so that both calls are made on a connection that stands.
  await new Promise<void>((resolve, reject) => pool.journal().waitForReady(Date.now() + 5000, (e) => (e ? reject(e) : resolve())));
  let deadline = timeoutMs !== undefined ? Date.now() + timeoutMs : undefined;
  const lean = await new Promise<Outcome>((resolve) => {
    pool.lean()!.unary(JournalService.apply.path, request, md.toHttp2Headers() as Record<string, string | string[]>, deadline, decode, (e, r) => resolve(outcome(e, r)));
  });
  deadline = timeoutMs !== undefined ? Date.now() + timeoutMs : undefined;
  const grpc = await new Promise<Outcome>((resolve) => {
    pool
      .journal()
      .makeUnaryRequest(JournalService.apply.path, (b: Buffer) => b, decode, request, md, deadline !== undefined ? { deadline } : {}, (e, r) => resolve(outcome(e, r)));
  });
  return { lean, grpc };
}

async function withStub(apply: Parameters<typeof startJournalStub>[0]['apply'], fn: (stub: StubServer, pool: ConnectionPool) => Promise<void>, authToken?: string): Promise<void> {
  const stub = await startJournalStub({ apply });
  const pool = new ConnectionPool({ address: stub.address, authToken });
  try {
    await connected(pool);
    await fn(stub, pool);
  } finally {
    pool.close();
    await stub.stop();
  }
}

test('lean unary: a response decodes as through grpc-js, with the call metadata sent', async () => {
  await withStub(
    (_call, cb) => cb(null, { status: Status.OK, header: stubHeader({ revision: 42n }) }),
    async (stub, pool) => {
      const { lean, grpc } = await both(pool);
      assert.deepEqual(lean, grpc);
      assert.equal(lean.res?.header?.etcd?.revision, 42n);
      assert.deepEqual(
        stub.calls.map((c) => c.authorization),
        ['Bearer s3cret', 'Bearer s3cret'],
      );
      assert.deepEqual(stub.requests[0], stub.requests[1]);
    },
    's3cret',
  );
});

test('lean unary: a refused call has the code, details and trailers grpc-js gives', async () => {
  const trailers = new Metadata();
  trailers.set('x-why', 'because');
  await withStub(
    (_call, cb) => cb({ code: GrpcStatus.INVALID_ARGUMENT, details: 'bad: 100% wrong, "quoted" and ünïcode', metadata: trailers }),
    async (_stub, pool) => {
      const { lean, grpc } = await both(pool);
      assert.equal(lean.code, GrpcStatus.INVALID_ARGUMENT);
      assert.equal(lean.details, 'bad: 100% wrong, "quoted" and ünïcode');
      // The server dates each response: the two calls may fall in different seconds, so the
      // dates are checked apart (both there, both HTTP dates, close together) and the rest whole.
      const dates = [lean, grpc].map((o) => o.trailers?.date);
      for (const d of dates) assert.match(String(d), /^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
      assert.ok(Math.abs(Date.parse(String(dates[0])) - Date.parse(String(dates[1]))) <= 5000, `dates ${dates.join(' / ')}`);
      const undated = (o: Outcome): Outcome => ({ ...o, trailers: Object.fromEntries(Object.entries(o.trailers ?? {}).filter(([k]) => k !== 'date')) });
      assert.deepEqual(undated(lean), undated(grpc));
      assert.equal(lean.trailers?.['x-why'], 'because');
    },
  );
});

test('lean unary: a call the server leaves unanswered ends at its deadline, naming the peer', async () => {
  await withStub(
    () => undefined,
    async (_stub, pool) => {
      const { lean, grpc } = await both(pool, 150);
      assert.equal(lean.code, GrpcStatus.DEADLINE_EXCEEDED);
      assert.equal(grpc.code, GrpcStatus.DEADLINE_EXCEEDED);
      assert.match(lean.details!, /^Deadline exceeded after \d+\.\d{3}s,remote_addr=127\.0\.0\.1:\d+$/);
      assert.match(grpc.details!, /remote_addr=127\.0\.0\.1:\d+$/);
    },
  );
});

test('lean unary: a connection dropped mid-call is UNAVAILABLE', async () => {
  let stop: (() => Promise<void>) | undefined;
  const stub = await startJournalStub({ apply: () => void stop?.() });
  stop = stub.stop;
  const pool = new ConnectionPool({ address: stub.address });
  try {
    await connected(pool);
    const md = pool.metadata(claimsFor.journalApply());
    const got = await new Promise<Outcome>((resolve) => {
      pool.lean()!.unary(JournalService.apply.path, request, md.toHttp2Headers() as Record<string, string | string[]>, undefined, decode, (e, r) => resolve(outcome(e, r)));
    });
    assert.equal(got.code, GrpcStatus.UNAVAILABLE);
    // The session is gone: the next call takes grpc-js.
    assert.equal(pool.lean(), undefined);
  } finally {
    pool.close();
    await stub.stop();
  }
});

test('lean unary: a call out of time when it starts fails at once, as on a connected grpc-js channel', async () => {
  await withStub(
    () => undefined,
    async (_stub, pool) => {
      const { lean, grpc } = await both(pool, -1);
      assert.equal(lean.code, GrpcStatus.DEADLINE_EXCEEDED);
      assert.equal(grpc.code, GrpcStatus.DEADLINE_EXCEEDED);
      assert.match(lean.details!, /^Deadline exceeded after \d+\.\d{3}s,remote_addr=127\.0\.0\.1:\d+$/);
      assert.match(grpc.details!, /remote_addr=127\.0\.0\.1:\d+$/);
    },
  );
});

test('lean unary: cancel() ends the call as CANCELLED', async () => {
  await withStub(
    () => undefined,
    async (_stub, pool) => {
      const md = pool.metadata(claimsFor.journalApply());
      const got = await new Promise<Outcome>((resolve) => {
        const call = pool.lean()!.unary(JournalService.apply.path, request, md.toHttp2Headers() as Record<string, string | string[]>, undefined, decode, (e, r) =>
          resolve(outcome(e, r)),
        );
        setTimeout(() => call.cancel(), 20);
      });
      assert.equal(got.code, GrpcStatus.CANCELLED);
    },
  );
});

test('lean unary: no session until one connects, so an unreachable service is grpc-js\'s to report', async () => {
  const pool = new ConnectionPool({ address: 'http://127.0.0.1:1' });
  try {
    assert.equal(pool.lean(), undefined);
    pool.connect();
    for (let i = 0; i < 200 && pool.state('http://127.0.0.1:1') === 'connecting'; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(pool.lean(), undefined);
  } finally {
    pool.close();
  }
  const client = new JournalClient({ address: 'http://127.0.0.1:1' }, { timeoutMs: 300 });
  try {
    client.pool.connect();
    await assert.rejects(
      client.apply([{ expect_mod_revision: -1n, upsert: undefined, delete: 'a/journal' }]),
      /broker http:\/\/127\.0\.0\.1:1 is unreachable: No connection established/,
    );
  } finally {
    client.close();
  }
});

test('lean unary: JournalClient.apply batches go out on the lean session once it is connected', async () => {
  let revision = 10n;
  const stub = await startJournalStub({ apply: (_call, cb) => cb(null, { status: Status.OK, header: stubHeader({ revision: ++revision }) }) });
  const client = new JournalClient({ address: stub.address });
  try {
    await connected(client.pool);
    let lean = 0;
    const pick = client.pool.lean.bind(client.pool);
    client.pool.lean = (endpoint?: string) => {
      const l = pick(endpoint);
      if (l) lean++;
      return l;
    };
    const changes = Array.from({ length: 5 }, (_, i) => ({ expect_mod_revision: -1n, upsert: undefined, delete: `a/j${i}` }));
    const res = await client.apply(changes, { maxTxnSize: 2 });
    assert.equal(res.batches, 3);
    assert.equal(lean, 3);
    assert.equal(res.revision, 13n);
    assert.deepEqual(
      stub.requests.map((r) => (r.request as { changes: { delete: string }[] }).changes.map((c) => c.delete)),
      [['a/j0', 'a/j1'], ['a/j2', 'a/j3'], ['a/j4']],
    );
  } finally {
    client.close();
    await stub.stop();
  }
});

test('lean unary: a unix:// endpoint gets a session too, answering as grpc-js does', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-lean-'));
  const sock = join(dir, 'broker.sock');
  const { replicate: _r, ...service } = JournalService;
  const server = new Server();
  server.addService(service, {
    apply: (_call: unknown, cb: (e: null, r: ApplyResponse) => void) => cb(null, { status: Status.OK, header: stubHeader({ revision: 7n }) }),
  } as never);
  await new Promise<number>((resolve, reject) => server.bindAsync(`unix://${sock}`, ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  const pool = new ConnectionPool({ address: `unix://localhost${sock}` });
  try {
    await connected(pool);
    const { lean, grpc } = await both(pool);
    assert.equal(lean.res?.header?.etcd?.revision, 7n);
    assert.deepEqual(lean, grpc);
  } finally {
    pool.close();
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('lean unary: responses a gRPC server should not send fail as grpc-js fails them', async () => {
  const ok = (b: Buffer) => {
    const f = Buffer.alloc(5);
    f.writeUInt32BE(b.length, 1);
    return Buffer.concat([f, b]);
  };
  const message = Buffer.from(JournalService.apply.responseSerialize({ status: Status.OK, header: stubHeader({ revision: 3n }) }));
  const cases: Record<string, (s: ServerHttp2Stream) => void> = {
    'no message': (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
      s.end();
    },
    'a cut message': (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
      s.end(ok(message).subarray(0, 9));
    },
    'an HTTP error': (s) => {
      s.respond({ ':status': 503, 'content-type': 'text/plain' });
      s.end('overloaded');
    },
    'a status in the headers': (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '7', 'grpc-message': 'not%20yours' }, { endStream: true });
    },
    'a reset stream': (s) => s.close(http2.constants.NGHTTP2_INTERNAL_ERROR),
  };
  let current = '';
  const server = http2.createServer();
  server.on('stream', (s) => {
    s.on('error', () => undefined); // the reset case's own stream
    s.on('data', () => undefined);
    s.on('end', () => cases[current]!(s));
  });
  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
  const pool = new ConnectionPool({ address: `http://127.0.0.1:${port}` });
  try {
    await connected(pool);
    for (const name of Object.keys(cases)) {
      current = name;
      const { lean, grpc } = await both(pool);
      assert.notEqual(lean.code, undefined, name);
      assert.deepEqual(lean, grpc, name);
    }
    // Two messages: grpc-js means to fail the call with this status (its client cancels on the
    // second message) but, on this input, never calls back; the lean call says it.
    cases['two'] = (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
      s.end(Buffer.concat([ok(message), ok(message)]));
    };
    current = 'two';
    const md = pool.metadata(claimsFor.journalApply());
    const two = await new Promise<Outcome>((resolve) => {
      pool.lean()!.unary(JournalService.apply.path, request, md.toHttp2Headers() as Record<string, string | string[]>, undefined, decode, (e, r) => resolve(outcome(e, r)));
    });
    assert.deepEqual(two, { code: GrpcStatus.UNIMPLEMENTED, details: 'Too many responses received', trailers: {} });
  } finally {
    pool.close();
    await new Promise((r) => server.close(r));
  }
});

test('concurrent Apply batches (parallel 3): each call gets its own answer, on the lean session and on grpc-js', async () => {
  for (const path of ['lean', 'grpc-js'] as const) {
    // The stub holds each window of calls until it is full, then answers them last first, each
    // with a revision that says which batch it answers (100 + its first journal's number).
    type Held = { first: number; cb: (e: null, r: ApplyResponse) => void };
    let held: Held[] = [];
    let max = 0;
    let answered = 0;
    const BATCHES = 7;
    const stub = await startJournalStub({
      apply: (call, cb) => {
        const first = Number(/\d+$/.exec(call.request.changes[0]!.delete)![0]);
        held.push({ first, cb: cb as Held['cb'] });
        max = Math.max(max, held.length);
        if (held.length === Math.min(3, BATCHES - answered)) {
          const window = held.reverse();
          held = [];
          for (const h of window) {
            answered++;
            h.cb(null, { status: Status.OK, header: stubHeader({ revision: 100n + BigInt(h.first) }) });
          }
        }
      },
    });
    const client = new JournalClient({ address: stub.address });
    try {
      let lean = 0;
      if (path === 'lean') {
        await connected(client.pool);
        const pick = client.pool.lean.bind(client.pool);
        client.pool.lean = (endpoint?: string) => {
          const l = pick(endpoint);
          if (l) lean++;
          return l;
        };
      } else client.pool.lean = () => undefined;
      const changes = Array.from({ length: 2 * BATCHES }, (_, i) => ({ expect_mod_revision: -1n, upsert: undefined, delete: `a/j${i}` }));
      const seen: [number, bigint][] = [];
      const res = await client.apply(changes, { maxTxnSize: 2, parallel: 3, onBatch: (b) => seen.push([b.index, b.revision]) });
      assert.equal(max, 3, `${path}: three calls in flight at once`);
      assert.equal(lean, path === 'lean' ? BATCHES : 0, `${path}: the path the calls took`);
      assert.equal(res.batches, BATCHES);
      assert.equal(res.applied, 2 * BATCHES);
      assert.equal(res.revision, 112n);
      assert.equal(res.response.header?.etcd?.revision, 112n);
      assert.equal(seen.length, BATCHES);
      for (const [index, revision] of seen) assert.equal(revision, 100n + BigInt(2 * index), `${path}: batch ${index} got its own answer`);
      assert.notDeepEqual(seen.map(([i]) => i), [0, 1, 2, 3, 4, 5, 6], `${path}: answers came out of order`);
      assert.deepEqual(
        stub.requests.map((r) => (r.request as { changes: { delete: string }[] }).changes.map((c) => c.delete)).sort(),
        Array.from({ length: BATCHES }, (_, b) => [`a/j${2 * b}`, `a/j${2 * b + 1}`]).sort(),
      );
    } finally {
      client.close();
      await stub.stop();
    }
  }
});
