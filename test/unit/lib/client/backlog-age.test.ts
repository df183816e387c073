// The backlog age of a source journal (src/lib/client/backlog-age.ts): the publish time from the
// UUID of the message at the read-through offset, the bound from its fragment's modification
// time when the message has none, and what the table shows for each.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { formatBacklogAge, oldestUnread, publishedAtMs } from '../../../../src/lib/client/backlog-age.js';
import { buildUUID, clockFromTime, formatUUID, MessageFlags, newProducerID } from '../../../../src/lib/message/uuid.js';
import { formatGoDuration } from '../../../../src/lib/protocol/duration.js';
import type { JournalClient } from '../../../../src/lib/client/journal-client.js';

const T = Date.UTC(2026, 11, 6, 9, 0, 0);
const uuidAt = (ms: number) => formatUUID(buildUUID(newProducerID(), clockFromTime(ms), MessageFlags.OUTSIDE_TXN));

/** A read that yields `chunks` (a metadata step with the fragment first), recording the request. */
function fakeJournals(chunks: Buffer[], modTime: bigint, seen: { offset?: bigint }[] = []): Pick<JournalClient, 'read'> {
  return {
    read: ((req: { offset: bigint }) => {
      seen.push({ offset: req.offset });
      const fragment = { journal: 'j', begin: 0n, end: 1000n, mod_time: modTime } as never;
      return {
        fragment: undefined,
        async *[Symbol.asyncIterator]() {
          yield { offset: req.offset, content: new Uint8Array(0), fragment, writeHead: 1000n };
          for (const c of chunks) yield { offset: req.offset, content: c };
        },
      };
    }) as never,
  };
}

describe('backlog age', () => {
  it('publishedAtMs: the UUID field of an NDJSON message, as Go decodes it, or the first CSV field; nothing for other lines', () => {
    assert.equal(publishedAtMs(JSON.stringify({ UUID: uuidAt(T), key: 'a' })), T);
    assert.equal(publishedAtMs(JSON.stringify({ uuid: uuidAt(T + 1500) })), T + 1500, 'keys match case-insensitively');
    assert.equal(publishedAtMs('{"key":"a","value":1}'), undefined, 'no UUID');
    assert.equal(publishedAtMs(JSON.stringify({ UUID: '00000000-0000-0000-0000-000000000000' })), undefined, 'zero clock');
    assert.equal(publishedAtMs(JSON.stringify({ UUID: '9b2f3c1e-5a4d-4c3b-8a2f-1e0d9c8b7a6f' })), undefined, 'a version 4 UUID has no clock');
    assert.equal(publishedAtMs('a,b,c'), undefined);
    // CSV framing: the UUID is the first field (as attach-uuids writes it), quoted or not.
    assert.equal(publishedAtMs(`${uuidAt(T + 2000)},a,b\r`), T + 2000);
    assert.equal(publishedAtMs(`"${uuidAt(T + 3000)}",a`), T + 3000);
    assert.equal(publishedAtMs(Buffer.from([0x0a, 0x03, 0xff])), undefined);
  });

  it('oldestUnread: nothing unread at the write head, without a read', async () => {
    const seen: { offset?: bigint }[] = [];
    assert.deepEqual(await oldestUnread(fakeJournals([], 0n, seen), 'j', 1000n, 1000n), { kind: 'none' });
    assert.equal(seen.length, 0);
  });

  it('oldestUnread: the first line at the read-through offset, even when it spans chunks', async () => {
    const line = JSON.stringify({ UUID: uuidAt(T), key: 'a', value: 1 }) + '\n' + JSON.stringify({ UUID: uuidAt(T + 9000) }) + '\n';
    const b = Buffer.from(line);
    const seen: { offset?: bigint }[] = [];
    const o = await oldestUnread(fakeJournals([b.subarray(0, 10), b.subarray(10, 30), b.subarray(30)], 0n, seen), 'j', 400n, 1000n);
    assert.deepEqual(o, { kind: 'published', atMs: T });
    assert.deepEqual(seen, [{ offset: 400n }]);
  });

  it('oldestUnread: without a UUID, a bound from the persisted fragment; unknown in a spool', async () => {
    const plain = Buffer.from('{"key":"a","value":1}\n');
    assert.deepEqual(await oldestUnread(fakeJournals([plain], BigInt(T / 1000)), 'j', 0n, 1000n), { kind: 'persisted-by', atMs: T });
    const o = await oldestUnread(fakeJournals([plain], 0n), 'j', 0n, 1000n);
    assert.equal(o.kind, 'unknown');
  });

  it('formatBacklogAge: whole seconds as a Go duration, >= for a bound, - when unknown, 0s ahead of the clock', () => {
    assert.equal(formatBacklogAge({ kind: 'none' }, T, formatGoDuration), '0s');
    assert.equal(formatBacklogAge({ kind: 'published', atMs: T - 90_500 }, T, formatGoDuration), '1m30s');
    assert.equal(formatBacklogAge({ kind: 'persisted-by', atMs: T - 7_200_000 }, T, formatGoDuration), '>=2h0m0s');
    assert.equal(formatBacklogAge({ kind: 'unknown', why: 'x' }, T, formatGoDuration), '-');
    assert.equal(formatBacklogAge({ kind: 'published', atMs: T + 5000 }, T, formatGoDuration), '0s');
  });
});
