// The client's default call options, watched listings, and the append service's retry rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus, type sendUnaryData, type ServerReadableStream } from '@grpc/grpc-js';
import { AppendRequest, AppendResponse, ListResponse, Status } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { TransportError } from '../../../../src/lib/protocol/errors.js';
import { AppendService, appendStream, JournalClient, mergeCallOptions, type AppendRetryInfo } from '../../../../src/lib/client/index.js';
import { startJournalStub, stubHeader } from '../../../../src/testing/stubs.js';
import { appendOk, fastDelay, journalEntry, listFirst } from './helpers.js';

const SEL = { include: { labels: [] }, exclude: { labels: [] } };

test('per-call options override the defaults; either signal aborts', () => {
  const a = new AbortController();
  const b = new AbortController();
  const onRetry = () => undefined;
  const m = mergeCallOptions({ timeoutMs: 1000, signal: a.signal, retry: { maxAttempts: 3 }, onRetry }, { timeoutMs: 50, signal: b.signal, retry: { delay: fastDelay } });
  assert.equal(m.timeoutMs, 50);
  assert.equal(m.retry?.maxAttempts, 3);
  assert.equal(m.retry?.delay, fastDelay);
  assert.equal(m.onRetry, onRetry);
  assert.equal(m.signal?.aborted, false);
  a.abort();
  assert.equal(m.signal?.aborted, true);
  assert.equal(mergeCallOptions({ timeoutMs: 1000 }, { timeoutMs: 0 }).timeoutMs, undefined, '0 is no time limit');
});

test('a default time budget bounds calls to an unreachable service', async () => {
  const client = new JournalClient({ address: 'http://127.0.0.1:9' }, { timeoutMs: 300 });
  const retries: string[] = [];
  const c2 = new JournalClient({ address: 'http://127.0.0.1:9' }, { timeoutMs: 300, onRetry: (i) => retries.push(i.op) });
  try {
    await assert.rejects(client.list(SEL), (e: unknown) => e instanceof TransportError && /unreachable/.test(e.message));
    await assert.rejects(c2.list(SEL));
    assert.ok(retries.length > 0 && retries.every((op) => op === 'listing journals'), 'the default onRetry hears the retries');
  } finally {
    client.close();
    c2.close();
  }
});

test('watchJournals: first snapshot from a List, then newer ones from the watch', async () => {
  const stub = await startJournalStub({
    list: (call) => {
      if (!call.request.watch) {
        call.write(listFirst([journalEntry('a/1')], 100n));
        call.end();
        return;
      }
      assert.equal(call.request.watch_resume?.etcd?.revision, 100n, 'the watch resumes after the listing');
      call.write(listFirst([journalEntry('a/1'), journalEntry('a/2')], 101n));
      call.write(ListResponse.fromPartial({ header: {} }));
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  const w = client.watchJournals(SEL, { timeoutMs: 5000 });
  try {
    const first = await w.ready();
    assert.deepEqual(first.journals.map((j) => j.spec!.name), ['a/1']);
    const seen: string[][] = [];
    for await (const snap of w) {
      seen.push(snap.journals.map((j) => j.spec!.name));
      if (seen.length === 2) w.close();
    }
    assert.deepEqual(seen, [['a/1'], ['a/1', 'a/2']]);
    assert.deepEqual(w.snapshot!.journals.map((j) => j.spec!.name), ['a/1', 'a/2']);
    await w.done;
  } finally {
    w.close();
    client.close();
    await stub.stop();
  }
});

test('watchJournals fails within the time budget when the service is unreachable', async () => {
  const client = new JournalClient({ address: 'http://127.0.0.1:9' }, { timeoutMs: 300 });
  const w = client.watchJournals(SEL);
  try {
    await assert.rejects(w.ready(), (e: unknown) => e instanceof TransportError);
    await assert.rejects(w.done);
  } finally {
    w.close();
    client.close();
  }
});

type AppendCall = ServerReadableStream<AppendRequest, AppendResponse>;

/** Collects an append's content; `answer` decides the response once the client half-closes. */
function appendHandler(answer: (n: number, content: Buffer, committed: boolean, cb: sendUnaryData<AppendResponse>) => void) {
  let n = 0;
  return (call: AppendCall, cb: sendUnaryData<AppendResponse>) => {
    const i = n++;
    const parts: Buffer[] = [];
    let last: AppendRequest | undefined;
    let count = 0;
    call.on('data', (m: AppendRequest) => {
      count++;
      last = m;
      if (m.content.length) parts.push(m.content);
    });
    call.on('end', () => answer(i, Buffer.concat(parts), count > 1 && !!last && AppendRequest.encode(last).finish().length === 0, cb));
  };
}

test('the append service retries an append refused before any broker could commit it, and warns what it waits for', async () => {
  const committed: string[] = [];
  const stub = await startJournalStub({
    append: appendHandler((i, content, ok, cb) => {
      if (i === 0) return cb({ code: GrpcStatus.UNAVAILABLE, details: 'all SubConns are in TransientFailure' });
      if (i === 1) return cb(null, AppendResponse.fromPartial({ status: Status.NO_JOURNAL_PRIMARY_BROKER, header: stubHeader() }));
      assert.ok(ok);
      committed.push(content.toString());
      cb(null, appendOk('a/j', 0n, BigInt(content.length)));
    }),
  });
  const client = new JournalClient({ address: stub.address });
  const waits: AppendRetryInfo[] = [];
  const svc = new AppendService(client, { delay: fastDelay, onRetry: (i) => waits.push(i) });
  try {
    svc.push('a/j', Buffer.from('one\n'));
    await svc.flush();
    assert.deepEqual(committed, ['one\n'], 'committed exactly once');
    assert.equal(waits.length, 2);
    assert.match(waits[0]!.waitingFor, /primary broker to become reachable/);
    assert.match(waits[1]!.waitingFor, /assigned a primary broker/);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('the append service never retries an append that may have committed', async () => {
  let attempts = 0;
  const stub = await startJournalStub({
    append: appendHandler((_i, _content, _ok, cb) => {
      attempts++;
      // As if the primary committed, then the connection to it broke before the answer.
      cb({ code: GrpcStatus.UNAVAILABLE, details: 'error reading from server: EOF' });
    }),
  });
  const client = new JournalClient({ address: stub.address });
  const svc = new AppendService(client, { delay: fastDelay });
  try {
    svc.push('a/j', Buffer.from('one\n'));
    await assert.rejects(svc.flush(), /error reading from server/);
    assert.equal(attempts, 1);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('appendStream replays what it kept after a refusal, and gives up once past its replay budget', async () => {
  const contents: string[] = [];
  const stub = await startJournalStub({
    append: appendHandler((i, content, _ok, cb) => {
      if (i % 2 === 0) return cb(null, AppendResponse.fromPartial({ status: Status.NOT_JOURNAL_PRIMARY_BROKER, header: stubHeader() }));
      contents.push(content.toString());
      cb(null, appendOk('a/j', 0n, BigInt(content.length)));
    }),
  });
  const client = new JournalClient({ address: stub.address });
  async function* source(parts: string[]) {
    for (const p of parts) yield Buffer.from(p);
  }
  try {
    const res = await appendStream(client, 'a/j', source(['ab', 'cd', 'ef']), { delay: fastDelay });
    assert.equal(res.status, Status.OK);
    assert.deepEqual(contents, ['abcdef']);
    await assert.rejects(
      appendStream(client, 'a/j', source(['ab', 'cd', 'ef']), { delay: fastDelay, replayBytes: 3 }),
      (e: unknown) => (e as { status?: number }).status === Status.NOT_JOURNAL_PRIMARY_BROKER,
    );
  } finally {
    client.close();
    await stub.stop();
  }
});

test('the append service keeps records in order, cuts appends at the batch limit, and commits each record once', async () => {
  const appends: string[] = [];
  const stub = await startJournalStub({
    append: appendHandler((_i, content, ok, cb) => {
      assert.ok(ok);
      appends.push(content.toString());
      cb(null, appendOk('a/j', 0n, BigInt(content.length)));
    }),
  });
  const client = new JournalClient({ address: stub.address });
  const svc = new AppendService(client, { maxBatchBytes: 8, lingerMs: 20 });
  try {
    for (const r of ['aa\n', 'bb\n', 'cc\n', 'dd\n', 'eeeeeeeeee\n']) svc.push('a/j', Buffer.from(r));
    await svc.flush();
    assert.equal(appends.join(''), 'aa\nbb\ncc\ndd\neeeeeeeeee\n');
    assert.ok(appends.every((a) => a.length <= 8 || !a.slice(0, -1).includes('\n')), `appends ${JSON.stringify(appends)}`);
    assert.ok(appends.length >= 3, 'cut at the batch limit');
  } finally {
    client.close();
    await stub.stop();
  }
});
