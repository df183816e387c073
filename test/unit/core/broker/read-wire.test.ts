// The hand-encoded Read content chunks are byte for byte what the generated encoder writes, for
// offsets and lengths around every varint width, and the Read serializer passes them through.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { READ_CHUNK } from '../../../../src/core/broker/read.js';
import { encodeContent, encodeContentInto, recycleContent, serializeReadResponse } from '../../../../src/core/broker/read-wire.js';
import { ReadResponse, Status } from '../../../../src/lib/protocol/gen/broker/protocol.js';

function generated(offset: bigint, content: Buffer): Buffer {
  return Buffer.from(ReadResponse.encode(ReadResponse.fromPartial({ offset, content })).finish());
}

function content(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

const OFFSETS = [0n, 1n, 127n, 128n, 16_383n, 16_384n, 2_097_151n, 2_097_152n, 1n << 32n, (1n << 35n) - 1n, 1n << 35n, BigInt(Number.MAX_SAFE_INTEGER), BigInt(Number.MAX_SAFE_INTEGER) + 1n, (1n << 63n) - 1n];
const LENGTHS = [1, 127, 128, 16_383, 16_384, READ_CHUNK, 200_000];

describe('read content encoding', () => {
  it('encodeContent matches the generated encoder', () => {
    for (const o of OFFSETS) {
      for (const n of LENGTHS) {
        const c = content(n, n + Number(o % 251n));
        assert.deepEqual(encodeContent(o, c), generated(o, c), `offset ${o}, length ${n}`);
      }
    }
  });

  it('encodeContent of a view into a larger buffer encodes only the view', () => {
    const big = content(1000, 7);
    const view = big.subarray(100, 300);
    assert.deepEqual(encodeContent(5000n, view), generated(5000n, Buffer.from(view)));
  });

  it('encodeContentInto matches the generated encoder and asks for exactly the length', () => {
    for (const o of OFFSETS) {
      for (const n of LENGTHS) {
        const c = content(n, 3);
        const asked: number[] = [];
        const msg = encodeContentInto(o, n, (dst, at, len) => {
          asked.push(len);
          c.copy(dst, at);
          return len;
        });
        assert.deepEqual(asked, [n]);
        assert.deepEqual(msg, generated(o, c), `offset ${o}, length ${n}`);
      }
    }
  });

  it('encodeContentInto encodes a short fill with its own (shorter) length prefix', () => {
    // 200 bytes asked for (a 2-byte length varint), 100 given (1 byte): the prefix must shrink.
    const c = content(100, 9);
    const msg = encodeContentInto(1234n, 200, (dst, at) => {
      c.copy(dst, at);
      return 100;
    });
    assert.deepEqual(msg, generated(1234n, c));
    const big = encodeContentInto(BigInt(Number.MAX_SAFE_INTEGER) + 10n, 200, (dst, at) => {
      c.copy(dst, at);
      return 100;
    });
    assert.deepEqual(big, generated(BigInt(Number.MAX_SAFE_INTEGER) + 10n, c));
  });

  it('encodeContentInto gives undefined when nothing was filled', () => {
    assert.equal(
      encodeContentInto(10n, 50, () => 0),
      undefined,
    );
    assert.equal(
      encodeContentInto(1n << 60n, 50, () => 0),
      undefined,
    );
  });

  it('the chunks decode to their offset and content', () => {
    const c = content(READ_CHUNK, 1);
    const r = ReadResponse.decode(encodeContent(123_456_789n, c));
    assert.equal(r.offset, 123_456_789n);
    assert.deepEqual(Buffer.from(r.content), c);
    assert.equal(r.status, Status.OK);
    assert.equal(r.header, undefined);
    assert.equal(r.fragment, undefined);
  });

  it('an upstream-sized chunk stays within 32 KiB encoded', () => {
    // A large offset (9 varint bytes) and the largest chunk: still under 32 KiB plus the
    // 5-byte gRPC frame prefix.
    assert.ok(encodeContent((1n << 62n) + 1n, content(READ_CHUNK, 0)).length + 5 <= 32 * 1024);
  });

  it('serializeReadResponse passes encoded chunks through and encodes other responses', () => {
    const chunk = encodeContent(42n, content(10, 0));
    assert.equal(serializeReadResponse(chunk), chunk);
    const meta = ReadResponse.fromPartial({
      status: Status.OFFSET_NOT_YET_AVAILABLE,
      header: { process_id: { zone: 'z', suffix: 's' }, route: { members: [], primary: -1, endpoints: [] }, etcd: { cluster_id: 1n, member_id: 2n, revision: 3n, raft_term: 4n } },
      offset: 99n,
      write_head: 100n,
      fragment_url: 'file:///x',
    });
    assert.deepEqual(serializeReadResponse(meta), Buffer.from(ReadResponse.encode(meta).finish()));
  });
});

describe('read content buffers', () => {
  it('a message given back lends its memory to the next one, once', () => {
    const a = encodeContent(10n, content(100, 1));
    recycleContent(a);
    const b = encodeContent(20n, content(200, 2));
    assert.equal(b.buffer, a.buffer, 'the memory of a is reused');
    // a given back again (a bug) must not free b's memory: c gets memory of its own.
    recycleContent(a);
    const c = encodeContent(30n, content(300, 3));
    assert.notEqual(c.buffer, b.buffer);
    assert.deepEqual(b, generated(20n, content(200, 2)));
    assert.deepEqual(c, generated(30n, content(300, 3)));
    recycleContent(b);
    recycleContent(c);
  });

  it('buffers not from the pool are never taken into it', () => {
    const foreign = Buffer.alloc(32 * 1024);
    recycleContent(foreign);
    const big = encodeContent(1n, content(100_000, 4)); // larger than a pooled buffer
    recycleContent(big);
    for (let i = 0; i < 100; i++) {
      const m = encodeContent(BigInt(i), content(10, i));
      assert.notEqual(m.buffer, foreign.buffer);
      assert.notEqual(m.buffer, big.buffer);
    }
  });

  it('a short fill gives its buffer back and encodes what was read', () => {
    const c = content(100, 5);
    const m = encodeContentInto(77n, 1000, (dst, at) => {
      c.copy(dst, at);
      return 100;
    })!;
    assert.deepEqual(m, generated(77n, c));
    assert.throws(() =>
      encodeContentInto(78n, 1000, () => {
        throw new Error('closed');
      }),
    /closed/);
  });
});
