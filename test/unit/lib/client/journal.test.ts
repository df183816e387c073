import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  ApplyResponse,
  FragmentStoreHealthResponse,
  FragmentsResponse,
  ListResponse,
  Status,
  type ApplyRequest,
  type ApplyRequest_Change,
  type FragmentsRequest,
  type LabelSelector,
  type ListRequest,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { BrokerStatusError, TransportError } from '../../../../src/lib/protocol/errors.js';
import { ApplyError, JournalClient } from '../../../../src/lib/client/index.js';
import { largePageLimit } from '../../../../src/lib/client/journal-client.js';
import { startJournalStub, stubHeader } from '../../../../src/testing/stubs.js';
import { fastDelay, fragment, journalEntry, listCont, listFirst } from './helpers.js';

const SEL: LabelSelector = { include: { labels: [{ name: 'app', value: 'x', prefix: false }] }, exclude: { labels: [] } };

test('list merges continuation messages into one response', async () => {
  const stub = await startJournalStub({
    list: (call) => {
      call.write(listFirst([journalEntry('a/1'), journalEntry('a/2')], 77n));
      call.write(listCont([journalEntry('a/3')]));
      call.write(listCont([journalEntry('a/4'), journalEntry('a/5')]));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const res = await client.list(SEL);
    assert.equal(res.status, Status.OK);
    assert.deepEqual(
      res.journals.map((j) => j.spec!.name),
      ['a/1', 'a/2', 'a/3', 'a/4', 'a/5'],
    );
    assert.equal(res.header!.etcd!.revision, 77n);
    const req = stub.requests[0]!.request as ListRequest;
    assert.equal(req.watch, false);
    assert.deepEqual(req.selector!.include!.labels, SEL.include!.labels);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('list surfaces a non-OK status as BrokerStatusError', async () => {
  const stub = await startJournalStub({
    list: (call) => {
      call.write(listFirst([], 10n, Status.NOT_ALLOWED));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    await assert.rejects(client.list(SEL), (err: unknown) => {
      assert.ok(err instanceof BrokerStatusError);
      assert.equal(err.status, Status.NOT_ALLOWED);
      assert.match(err.message, /listing journals: NOT_ALLOWED/);
      return true;
    });
  } finally {
    client.close();
    await stub.stop();
  }
});

test('list rejects an empty continuation message', async () => {
  const stub = await startJournalStub({
    list: (call) => {
      call.write(listFirst([journalEntry('a/1')]));
      call.write(listCont([]));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    await assert.rejects(client.list(SEL), /unexpected empty ListResponse continuation/);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('list retries UNAVAILABLE until the broker answers', async () => {
  let n = 0;
  const stub = await startJournalStub({
    list: (call) => {
      if (n++ < 2) {
        call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'restarting' });
        return;
      }
      call.write(listFirst([journalEntry('a/1')]));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    const res = await client.list(SEL);
    assert.equal(res.journals.length, 1);
    assert.equal(n, 3);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('list survives a broker restart on the same port', async () => {
  let stub = await startJournalStub({});
  const port = stub.port;
  await stub.stop();
  const client = new JournalClient({ address: `http://127.0.0.1:${port}` }, { delay: () => 30 });
  try {
    const pending = client.list(SEL, { timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 150));
    stub = await startJournalStub(
      {
        list: (call) => {
          call.write(listFirst([journalEntry('back/1')]));
          call.end();
        },
      },
      { port },
    );
    const res = await pending;
    assert.deepEqual(
      res.journals.map((j) => j.spec!.name),
      ['back/1'],
    );
  } finally {
    client.close();
    await stub.stop();
  }
});

test('an unreachable broker fails with a clear TransportError within the timeout', async () => {
  const client = new JournalClient({ address: 'http://127.0.0.1:9' });
  const started = Date.now();
  try {
    await assert.rejects(client.list(SEL, { timeoutMs: 800 }), (err: unknown) => {
      assert.ok(err instanceof TransportError, String(err));
      assert.match(err.message, /^broker http:\/\/127\.0\.0\.1:9 is unreachable: /);
      assert.equal(err.code, GrpcStatus.UNAVAILABLE);
      return true;
    });
    const took = Date.now() - started;
    assert.ok(took < 2500, `took ${took} ms`);
  } finally {
    client.close();
  }
});

test('watch yields complete snapshots and resumes after a transport error', async () => {
  const resumes: (bigint | undefined)[] = [];
  let n = 0;
  const stub = await startJournalStub({
    list: (call) => {
      const req = call.request;
      assert.equal(req.watch, true);
      resumes.push(req.watch_resume?.etcd?.revision);
      if (n++ === 0) {
        // Snapshot 1 split in two, then its end marker; then snapshot 2 (single message).
        call.write(listFirst([journalEntry('a/1')], 100n));
        call.write(listCont([journalEntry('a/2')]));
        call.write(ListResponse.fromPartial({ header: {} }));
        call.write(listFirst([journalEntry('a/1'), journalEntry('a/2'), journalEntry('a/3')], 105n));
        call.write(ListResponse.fromPartial({ header: {} }));
        // A partial snapshot, then the connection breaks.
        call.write(listFirst([journalEntry('partial')], 107n));
        setTimeout(() => call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'broker restarting' }), 20);
        return;
      }
      call.write(listFirst([journalEntry('a/9')], 110n));
      call.write(ListResponse.fromPartial({ header: {} }));
      // Then hold the stream open.
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  const ac = new AbortController();
  const snaps: string[][] = [];
  try {
    for await (const snap of client.watch(SEL, { signal: ac.signal })) {
      snaps.push(snap.journals.map((j) => j.spec!.name));
      if (snaps.length === 3) ac.abort();
    }
    assert.deepEqual(snaps, [['a/1', 'a/2'], ['a/1', 'a/2', 'a/3'], ['a/9']]);
    assert.deepEqual(resumes, [undefined, 105n]);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('watch throws a non-OK status', async () => {
  const stub = await startJournalStub({
    list: (call) => {
      call.write(listFirst([], 10n, Status.NOT_ALLOWED));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    await assert.rejects(async () => {
      for await (const _ of client.watch(SEL)) {
        /* no snapshot expected */
      }
    }, BrokerStatusError);
  } finally {
    client.close();
    await stub.stop();
  }
});

function changes(n: number): ApplyRequest_Change[] {
  return Array.from({ length: n }, (_, i) => ({ expect_mod_revision: 0n, upsert: undefined, delete: `j/${i}` }));
}

test('apply sends batches of maxTxnSize sequentially', async () => {
  const stub = await startJournalStub({
    apply: (_call, cb) => cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader() })),
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const res = await client.apply(changes(250), { maxTxnSize: 100 });
    assert.equal(res.response.status, Status.OK);
    assert.equal(res.batches, 3);
    assert.equal(res.applied, 250);
    assert.equal(res.revision, 100n);
    const sizes = stub.requests.filter((r) => r.method === 'apply').map((r) => (r.request as ApplyRequest).changes.length);
    assert.deepEqual(sizes, [100, 100, 50]);
    const names = stub.requests.flatMap((r) => (r.request as ApplyRequest).changes.map((c) => c.delete));
    assert.deepEqual(names, changes(250).map((c) => c.delete));
  } finally {
    client.close();
    await stub.stop();
  }
});

test('apply with maxTxnSize 0 sends a single request', async () => {
  const stub = await startJournalStub({
    apply: (_call, cb) => cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader() })),
  });
  const client = new JournalClient({ address: stub.address });
  try {
    await client.apply(changes(250), { maxTxnSize: 0 });
    assert.deepEqual(
      stub.requests.map((r) => (r.request as ApplyRequest).changes.length),
      [250],
    );
  } finally {
    client.close();
    await stub.stop();
  }
});

test('apply stops at a failing batch and reports progress', async () => {
  let n = 0;
  const stub = await startJournalStub({
    apply: (_call, cb) => {
      n++;
      cb(null, ApplyResponse.fromPartial({ status: n === 2 ? Status.ETCD_TRANSACTION_FAILED : Status.OK, header: stubHeader() }));
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    await assert.rejects(client.apply(changes(250), { maxTxnSize: 100 }), (err: unknown) => {
      assert.ok(err instanceof ApplyError);
      assert.ok(err.cause instanceof BrokerStatusError);
      assert.equal(err.cause.status, Status.ETCD_TRANSACTION_FAILED);
      assert.equal(err.status, Status.ETCD_TRANSACTION_FAILED);
      assert.equal(err.reason, 'revision-mismatch');
      assert.equal(err.batchIndex, 1);
      assert.equal(err.batches, 3);
      assert.equal(err.applied, 100);
      assert.match(err.message, /batch 2 of 3/);
      assert.match(err.message, /100 of 250 changes already applied/);
      return true;
    });
    assert.equal(stub.requests.length, 2);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('listFragments follows pages until next_page_token is 0', async () => {
  const stub = await startJournalStub({
    listFragments: (call, cb) => {
      const req = call.request;
      const pages: Record<string, { frags: [bigint, bigint][]; next: bigint }> = {
        '0': { frags: [[0n, 10n], [10n, 20n]], next: 20n },
        '20': { frags: [[20n, 30n], [30n, 40n]], next: 40n },
        '40': { frags: [[40n, 45n]], next: 0n },
      };
      const page = pages[String(req.next_page_token)]!;
      cb(
        null,
        FragmentsResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          fragments: page.frags.map(([b, e]) => ({ spec: fragment(req.journal, b, e), signed_url: `http://store/${b}` })),
          next_page_token: page.next,
        }),
      );
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const frags = await client.listFragments('a/j', { beginModTime: 5, endModTime: 9n, signatureTTLms: 60_000, pageLimit: 2 });
    assert.deepEqual(
      frags.map((f) => [f.spec!.begin, f.spec!.end]),
      [[0n, 10n], [10n, 20n], [20n, 30n], [30n, 40n], [40n, 45n]],
    );
    const reqs = stub.requests.map((r) => r.request as FragmentsRequest);
    assert.deepEqual(
      reqs.map((r) => r.next_page_token),
      [0n, 20n, 40n],
    );
    for (const r of reqs) {
      assert.equal(r.journal, 'a/j');
      assert.equal(r.begin_mod_time, 5n);
      assert.equal(r.end_mod_time, 9n);
      assert.equal(r.page_limit, 2);
      assert.deepEqual(r.signatureTTL, { seconds: 60n, nanos: 0 });
      assert.equal(r.do_not_proxy, false);
      assert.equal(r.header, undefined);
    }
  } finally {
    client.close();
    await stub.stop();
  }
});

test('listFragments with largePages: a first page of the server default, then pages sized by its longest entry', async () => {
  // 25,000 fragments served in pages of whatever size is asked (1,000 when 0 is asked).
  const total = 25_000n;
  const stub = await startJournalStub({
    listFragments: (call, cb) => {
      const req = call.request;
      const size = BigInt(req.page_limit || 1000);
      const from = req.next_page_token;
      const to = from + size < total ? from + size : total;
      const fragments = [];
      for (let b = from; b < to; b++) fragments.push({ spec: fragment(req.journal, b, b + 1n), signed_url: '' });
      cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader(), fragments, next_page_token: to < total ? to : 0n }));
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const frags = await client.listFragments('a/j', { largePages: true });
    assert.equal(frags.length, 25_000);
    assert.ok(frags.every((f, i) => f.spec!.begin === BigInt(i)));
    const limits = stub.requests.map((r) => (r.request as FragmentsRequest).page_limit);
    // Short entries: the broker's largest page after the first.
    assert.deepEqual(limits, [0, 10_000, 10_000, 10_000]);
    // Long entries: pages kept near 4 MiB (a journal name of 500 and a store of 1,000 characters).
    const long = { spec: { ...fragment('x'.repeat(500), 0n, 1n), backing_store: 's3://' + 'b'.repeat(995) }, signed_url: '' };
    assert.equal(largePageLimit([long]), Math.floor((4 << 20) / (3 * 1500 + 100)));
    assert.equal(largePageLimit([{ spec: fragment('a/j', 0n, 1n), signed_url: '' }]), 10_000);
    // An explicit pageLimit is kept for every page.
    stub.requests.length = 0;
    await client.listFragments('a/j', { largePages: true, pageLimit: 7000 });
    assert.deepEqual(stub.requests.map((r) => (r.request as FragmentsRequest).page_limit), [7000, 7000, 7000, 7000]);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('listFragments surfaces SUSPENDED', async () => {
  const stub = await startJournalStub({
    listFragments: (_call, cb) => cb(null, FragmentsResponse.fromPartial({ status: Status.SUSPENDED, header: stubHeader() })),
  });
  const client = new JournalClient({ address: stub.address });
  try {
    await assert.rejects(client.listFragments('a/j'), (e: unknown) => e instanceof BrokerStatusError && e.status === Status.SUSPENDED);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('fragmentStoreHealth returns unhealthy answers and sends the delete probe', async () => {
  const stub = await startJournalStub({
    fragmentStoreHealth: (call, cb) =>
      cb(
        null,
        FragmentStoreHealthResponse.fromPartial({
          status: call.request.check_delete ? Status.FRAGMENT_STORE_UNHEALTHY : Status.OK,
          header: stubHeader(),
          store_health_error: call.request.check_delete ? 'access denied' : '',
        }),
      ),
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const ok = await client.fragmentStoreHealth('s3://bucket/');
    assert.equal(ok.status, Status.OK);
    const bad = await client.fragmentStoreHealth('s3://bucket/', 'probe/');
    assert.equal(bad.status, Status.FRAGMENT_STORE_UNHEALTHY);
    assert.equal(bad.store_health_error, 'access denied');
    assert.deepEqual(stub.requests[1]!.request, { fragment_store: 's3://bucket/', check_delete: true, check_delete_prefix: 'probe/' });
  } finally {
    client.close();
    await stub.stop();
  }
});

function verifyJwt(token: string, key: Buffer): Record<string, unknown> {
  const [h, p, s] = token.split('.');
  const want = createHmac('sha256', key).update(`${h}.${p}`).digest('base64url');
  assert.equal(s, want, 'JWT signature verifies with the key');
  assert.deepEqual(JSON.parse(Buffer.from(h!, 'base64url').toString()), { alg: 'HS256', typ: 'JWT' });
  return JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
}

test('a static auth token is sent verbatim as a bearer token', async () => {
  const stub = await startJournalStub({
    apply: (_call, cb) => cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader() })),
  });
  const client = new JournalClient({ address: stub.address, authToken: 's3cr3t' });
  try {
    await client.apply([]);
    assert.equal(stub.calls[0]!.authorization, 'Bearer s3cr3t');
  } finally {
    client.close();
    await stub.stop();
  }
});

test('auth keys mint a per-call HS256 JWT with capability and selector claims', async () => {
  const key1 = Buffer.from('first signing key material');
  const key2 = Buffer.from('second key');
  const stub = await startJournalStub({
    list: (call) => {
      call.write(listFirst([]));
      call.end();
    },
    listFragments: (_call, cb) => cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader() })),
    apply: (_call, cb) => cb(null, ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader() })),
  });
  const client = new JournalClient({ address: stub.address, authKeys: `AA==, ${key1.toString('base64')}\n${key2.toString('base64')}` });
  try {
    const now = Math.floor(Date.now() / 1000);
    await client.list(SEL);
    await client.listFragments('a/j');
    await client.apply([]);
    const [list, frags, apply] = stub.calls.map((c) => {
      assert.match(c.authorization!, /^Bearer /);
      return verifyJwt(c.authorization!.slice(7), key1);
    });
    assert.equal(list!.cap, 2);
    assert.deepEqual(list!.sel, { include: { labels: [{ name: 'app', value: 'x' }] }, exclude: { labels: null } });
    assert.ok(Math.abs((list!.iat as number) - now) <= 2);
    assert.equal((list!.exp as number) - (list!.iat as number), 3600);
    assert.equal(frags!.cap, 8);
    assert.deepEqual(frags!.sel, { include: { labels: [{ name: 'name', value: 'a/j' }] }, exclude: { labels: null } });
    assert.equal(apply!.cap, 4);
    assert.equal((apply!.exp as number) - (apply!.iat as number), 60);
    assert.deepEqual(apply!.sel, { include: { labels: null }, exclude: { labels: null } });
  } finally {
    client.close();
    await stub.stop();
  }
});
