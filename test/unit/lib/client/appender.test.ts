import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { status as GrpcStatus, type sendUnaryData, type ServerReadableStream } from '@grpc/grpc-js';
import {
  AppendRequest,
  AppendRequest_Suspend,
  AppendResponse,
  Status,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { BrokerStatusError } from '../../../../src/lib/protocol/errors.js';
import { JournalClient, appendOnce, MAX_APPEND_MESSAGE } from '../../../../src/lib/client/index.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../../src/testing/stubs.js';
import { appendOk, bytes, fastDelay } from './helpers.js';

type AppendCall = ServerReadableStream<AppendRequest, AppendResponse>;

interface Seen {
  messages: AppendRequest[];
  committed: boolean;
  content: Buffer;
}

/** A broker-like append handler: commits iff the stream ends right after an empty message. */
function broker(seen: Seen[], status = Status.OK) {
  return (call: AppendCall, cb: sendUnaryData<AppendResponse>) => {
    const s: Seen = { messages: [], committed: false, content: Buffer.alloc(0) };
    seen.push(s);
    const parts: Buffer[] = [];
    call.on('data', (m: AppendRequest) => {
      s.messages.push(m);
      if (m.content.length) parts.push(m.content);
    });
    call.on('end', () => {
      const last = s.messages[s.messages.length - 1];
      s.committed = s.messages.length > 1 && !!last && AppendRequest.encode(last).finish().length === 0;
      s.content = Buffer.concat(parts);
      if (!s.committed) {
        cb({ code: GrpcStatus.ABORTED, details: 'append rolled back: stream ended without commit' });
        return;
      }
      if (status !== Status.OK) cb(null, AppendResponse.fromPartial({ status, header: stubHeader() }));
      else cb(null, appendOk(s.messages[0]!.journal, 0n, BigInt(s.content.length)));
    });
  };
}

function appendMessages(stub: StubServer): AppendRequest[] {
  return stub.requests.filter((r) => r.method === 'append').map((r) => r.request as AppendRequest);
}

test('append sends parameters first, then content-only messages, then one empty message', async () => {
  const seen: Seen[] = [];
  const stub = await startJournalStub({ append: broker(seen) });
  const client = new JournalClient({ address: stub.address });
  try {
    const a = client.append('a/j', {
      offset: 1234n,
      suspend: AppendRequest_Suspend.SUSPEND_NO_RESUME,
      check_registers: { include: { labels: [{ name: 'owner', value: 'me', prefix: false }] }, exclude: { labels: [] } },
      union_registers: { labels: [{ name: 'owner', value: 'you', prefix: false }] },
      subtract_registers: { labels: [{ name: 'owner', value: 'me', prefix: false }] },
    });
    await a.write(Buffer.from('hello '));
    await a.write(Buffer.from('world\n'));
    const res = await a.commit();
    assert.equal(res.status, Status.OK);
    assert.equal(res.commit!.end, 12n);

    const msgs = appendMessages(stub);
    assert.equal(msgs.length, 4);
    const first = msgs[0]!;
    assert.equal(first.journal, 'a/j');
    assert.equal(first.offset, 1234n);
    assert.equal(first.suspend, AppendRequest_Suspend.SUSPEND_NO_RESUME);
    assert.equal(first.content.length, 0);
    assert.equal(first.header, undefined);
    assert.deepEqual(first.check_registers!.include!.labels, [{ name: 'owner', value: 'me', prefix: false }]);
    assert.deepEqual(first.union_registers!.labels, [{ name: 'owner', value: 'you', prefix: false }]);
    assert.deepEqual(first.subtract_registers!.labels, [{ name: 'owner', value: 'me', prefix: false }]);
    // Content messages carry nothing but content.
    for (const [m, text] of [
      [msgs[1]!, 'hello '],
      [msgs[2]!, 'world\n'],
    ] as const) {
      assert.deepEqual(m, AppendRequest.fromPartial({ content: Buffer.from(text) }));
    }
    // The commit message is completely empty on the wire.
    assert.equal(AppendRequest.encode(msgs[3]!).finish().length, 0);
    assert.equal(seen[0]!.committed, true);
    assert.equal(seen[0]!.content.toString(), 'hello world\n');
  } finally {
    client.close();
    await stub.stop();
  }
});

test('abort half-closes without the empty message, so the broker rolls back', async () => {
  const seen: Seen[] = [];
  const stub = await startJournalStub({ append: broker(seen) });
  const client = new JournalClient({ address: stub.address });
  try {
    const a = client.append('a/j');
    await a.write(Buffer.from('partial'));
    a.abort();
    const outcome = await a.settled();
    assert.ok(outcome instanceof Error, 'the broker answered with an error');
    const msgs = appendMessages(stub);
    assert.equal(msgs.length, 2);
    assert.equal(msgs[0]!.journal, 'a/j');
    assert.equal(msgs[1]!.content.toString(), 'partial');
    assert.equal(seen[0]!.committed, false);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('large writes are split into messages of at most 1 MiB and arrive intact', async () => {
  const seen: Seen[] = [];
  const stub = await startJournalStub({ append: broker(seen) });
  const client = new JournalClient({ address: stub.address });
  try {
    const data = bytes(3 * MAX_APPEND_MESSAGE + 17, 4);
    const a = client.append('a/j');
    await a.write(data);
    await a.commit();
    const msgs = appendMessages(stub);
    assert.deepEqual(
      msgs.slice(1, -1).map((m) => m.content.length),
      [MAX_APPEND_MESSAGE, MAX_APPEND_MESSAGE, MAX_APPEND_MESSAGE, 17],
    );
    assert.equal(createHash('sha1').update(seen[0]!.content).digest('hex'), createHash('sha1').update(data).digest('hex'));
  } finally {
    client.close();
    await stub.stop();
  }
});

test('write waits while the broker is not reading (backpressure)', async () => {
  let resume!: () => void;
  const seen: Seen[] = [];
  const handler = broker(seen);
  const stub = await startJournalStub({
    append: (call, cb) => {
      handler(call, cb);
      call.pause();
      resume = () => call.resume();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const a = client.append('a/j');
    const chunk = bytes(MAX_APPEND_MESSAGE, 2);
    let accepted = 0;
    const writing = (async () => {
      for (let i = 0; i < 64; i++) {
        await a.write(chunk);
        accepted++;
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    const stalledAt = accepted;
    assert.ok(stalledAt < 64, `writes should stall, got ${stalledAt} accepted`);
    resume();
    await writing;
    const res = await a.commit();
    assert.equal(res.commit!.end, BigInt(64 * MAX_APPEND_MESSAGE));
    assert.equal(seen[0]!.content.length, 64 * MAX_APPEND_MESSAGE);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('a non-OK append status throws BrokerStatusError with the store health detail', async () => {
  const stub = await startJournalStub({
    append: (call, cb) => {
      call.on('data', () => undefined);
      call.on('end', () =>
        cb(null, AppendResponse.fromPartial({ status: Status.FRAGMENT_STORE_UNHEALTHY, header: stubHeader(), store_health_error: 'bucket gone' })),
      );
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const a = client.append('a/j');
    await a.write(Buffer.from('x'));
    await assert.rejects(a.commit(), (e: unknown) => {
      assert.ok(e instanceof BrokerStatusError);
      assert.equal(e.status, Status.FRAGMENT_STORE_UNHEALTHY);
      assert.match(e.message, /appending to a\/j: FRAGMENT_STORE_UNHEALTHY \(bucket gone\)/);
      return true;
    });
  } finally {
    client.close();
    await stub.stop();
  }
});

test('appendOnce retries a refused append at the primary learned from the response', async () => {
  const seenPrimary: Seen[] = [];
  const primary = await startJournalStub({ append: broker(seenPrimary) });
  const other = await startJournalStub({
    append: (call, cb) => {
      call.on('data', () => undefined);
      call.on('end', () =>
        cb(
          null,
          AppendResponse.fromPartial({
            status: Status.NOT_JOURNAL_PRIMARY_BROKER,
            header: stubHeader({
              route: { members: [{ zone: 'z', suffix: 'p' }], primary: 0, endpoints: [primary.address] },
            }),
          }),
        ),
      );
    },
  });
  const client = new JournalClient({ address: other.address, cacheSize: 4 }, { delay: fastDelay });
  try {
    const res = await appendOnce(client, 'a/j', [Buffer.from('one '), Buffer.from('two')], { delay: fastDelay });
    assert.equal(res.status, Status.OK);
    assert.equal(seenPrimary.length, 1);
    assert.equal(seenPrimary[0]!.content.toString(), 'one two');
    assert.equal(appendMessages(other).length, 4);
  } finally {
    client.close();
    await primary.stop();
    await other.stop();
  }
});

test('appendOnce retries UNAVAILABLE but not terminal statuses', async () => {
  let n = 0;
  const seen: Seen[] = [];
  const ok = broker(seen);
  const stub = await startJournalStub({
    append: (call, cb) => {
      if (n++ === 0) {
        // What a proxying broker answers while the primary it dials is gone: never committed.
        cb({ code: GrpcStatus.UNAVAILABLE, details: 'all SubConns are in TransientFailure' });
        return;
      }
      if (n === 3) {
        call.on('data', () => undefined);
        call.on('end', () => cb(null, AppendResponse.fromPartial({ status: Status.WRONG_APPEND_OFFSET, header: stubHeader() })));
        return;
      }
      ok(call, cb);
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const res = await appendOnce(client, 'a/j', [Buffer.from('data')], { delay: fastDelay });
    assert.equal(res.status, Status.OK);
    assert.equal(n, 2);
    await assert.rejects(
      appendOnce(client, 'a/j', [Buffer.from('data')], { delay: fastDelay, offset: 99n }),
      (e: unknown) => e instanceof BrokerStatusError && e.status === Status.WRONG_APPEND_OFFSET,
    );
    assert.equal(n, 3);
  } finally {
    client.close();
    await stub.stop();
  }
});
