import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { status as GrpcStatus, type ServerWritableStream } from '@grpc/grpc-js';
import { CompressionCodec, Status, type ReadRequest, type ReadResponse } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { BrokerStatusError } from '../../../../src/lib/protocol/errors.js';
import { JournalClient, canDecode, maskedCrc32c, type ReadChunk } from '../../../../src/lib/index.js';
import { startJournalStub, type StubServer } from '../../../../src/testing/stubs.js';
import { bytes, contentResponse, fastDelay, fragment, metaResponse, statusResponse } from './helpers.js';

type ReadCall = ServerWritableStream<ReadRequest, ReadResponse>;

/** Serves `data` as one fragment [0, len) in chunks; non-blocking reads end at the head. */
function serve(data: Buffer, chunk = 1000) {
  return (call: ReadCall, opts: { failAfter?: number } = {}) => {
    const req = call.request;
    let off = Number(req.offset);
    const frag = fragment(req.journal, 0n, BigInt(data.length));
    if (off >= data.length) {
      call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: BigInt(data.length), write_head: BigInt(data.length) }));
      call.end();
      return;
    }
    call.write(metaResponse(BigInt(off), frag, BigInt(data.length), { first: true }));
    let sent = 0;
    while (off < data.length) {
      if (opts.failAfter !== undefined && sent === opts.failAfter) {
        call.emit('error', { code: GrpcStatus.UNAVAILABLE, details: 'broker went away' });
        return;
      }
      const n = Math.min(chunk, data.length - off);
      call.write(contentResponse(BigInt(off), data.subarray(off, off + n)));
      off += n;
      sent++;
    }
    call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { header: undefined, offset: BigInt(off), write_head: BigInt(data.length) }));
    call.end();
  };
}

function readRequests(stub: StubServer): ReadRequest[] {
  return stub.requests.filter((r) => r.method === 'read').map((r) => r.request as ReadRequest);
}

async function collect(it: AsyncIterable<ReadChunk>): Promise<{ data: Buffer; chunks: ReadChunk[] }> {
  const chunks: ReadChunk[] = [];
  for await (const c of it) chunks.push(c);
  return { data: Buffer.concat(chunks.map((c) => c.content)), chunks };
}

test('reader resumes at the tracked offset after the stream breaks: no byte missed or repeated', async () => {
  const data = bytes(10_000);
  const s = serve(data);
  let n = 0;
  const stub = await startJournalStub({ read: (call) => s(call, n++ === 0 ? { failAfter: 2 } : {}) });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    const retries: unknown[] = [];
    const reader = client.read({ journal: 'a/j', offset: 0n }, { onRetry: (i) => retries.push(i.error) });
    const { data: got, chunks } = await collect(reader);
    assert.equal(got.length, data.length);
    assert.ok(got.equals(data));
    assert.equal(reader.offset, 10_000n);
    assert.equal(reader.writeHead, 10_000n);
    assert.deepEqual(
      readRequests(stub).map((r) => r.offset),
      [0n, 2000n],
    );
    // Content chunks are contiguous.
    let expect = 0n;
    for (const c of chunks) {
      assert.equal(c.offset, expect);
      expect += BigInt(c.content.length);
    }
    assert.equal(retries.length, 1);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('reader adopts an offset jump announced by the broker', async () => {
  const stub = await startJournalStub({
    read: (call) => {
      const off = call.request.offset;
      if (off >= 1500n) {
        call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: 1500n, write_head: 1500n }));
        call.end();
        return;
      }
      // Bytes [0, 1000) were deleted: the read jumps to 1000.
      call.write(metaResponse(1000n, fragment('a/j', 1000n, 1500n), 1500n, { first: true }));
      call.write(contentResponse(1000n, Buffer.alloc(500, 7)));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    const reader = client.read({ journal: 'a/j', offset: 0n });
    const { data, chunks } = await collect(reader);
    assert.equal(data.length, 500);
    assert.equal(chunks[0]!.offset, 1000n);
    assert.equal(chunks[0]!.fragment!.begin, 1000n);
    assert.equal(chunks[0]!.writeHead, 1500n);
    assert.equal(chunks[1]!.offset, 1000n);
    assert.equal(reader.offset, 1500n);
    assert.equal(reader.jumps, 1);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('OFFSET_NOT_YET_AVAILABLE ends a non-blocking read; a write-head read records the head', async () => {
  const stub = await startJournalStub({
    read: (call) => {
      call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: 4242n, write_head: 4242n }));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const reader = client.read({ journal: 'a/j', offset: -1n });
    const { chunks } = await collect(reader);
    assert.equal(chunks.length, 0);
    assert.equal(reader.offset, 4242n);
    assert.equal(reader.writeHead, 4242n);
    assert.equal(stub.requests.length, 1);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('a non-blocking read that ends below the write head says so through onUnavailable; one that ends at the head does not', async () => {
  // The broker holds nothing at 0 (e.g. it joined the route before the journal's content was
  // persisted), yet its write head is at 5000; a second journal ends where it should.
  const stub = await startJournalStub({
    read: (call) => {
      const head = call.request.journal === 'a/gap' ? 5000n : call.request.offset;
      call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: call.request.offset, write_head: head }));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const seen: { journal: string; offset: bigint; writeHead: bigint }[] = [];
    for (const journal of ['a/gap', 'a/end']) {
      const reader = client.read({ journal, offset: 0n }, { onUnavailable: (info) => seen.push(info) });
      const { chunks } = await collect(reader);
      assert.equal(chunks.length, 0);
      assert.equal(reader.offset, 0n, 'the read stops where it is, not at the head');
    }
    assert.deepEqual(seen, [{ journal: 'a/gap', offset: 0n, writeHead: 5000n }]);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('SUSPENDED surfaces as a BrokerStatusError', async () => {
  const stub = await startJournalStub({
    read: (call) => {
      call.write(statusResponse(Status.SUSPENDED));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    await assert.rejects(collect(client.read({ journal: 'a/j' })), (e: unknown) => {
      assert.ok(e instanceof BrokerStatusError);
      assert.equal(e.status, Status.SUSPENDED);
      assert.match(e.message, /reading a\/j: SUSPENDED/);
      return true;
    });
    assert.equal(stub.requests.length, 1);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('JOURNAL_NOT_FOUND is retried for the first attempts, then surfaces', async () => {
  const stub = await startJournalStub({
    read: (call) => {
      call.write(statusResponse(Status.JOURNAL_NOT_FOUND));
      call.end();
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    await assert.rejects(collect(client.read({ journal: 'a/j' })), (e: unknown) => e instanceof BrokerStatusError && e.status === Status.JOURNAL_NOT_FOUND);
    assert.equal(stub.requests.length, 5);
  } finally {
    client.close();
    await stub.stop();
  }

  // A journal that appears on the third attempt is read normally.
  const data = bytes(300);
  const s = serve(data);
  let n = 0;
  const stub2 = await startJournalStub({
    read: (call) => {
      if (n++ < 2) {
        call.write(statusResponse(Status.JOURNAL_NOT_FOUND));
        call.end();
      } else s(call);
    },
  });
  const client2 = new JournalClient({ address: stub2.address }, { delay: fastDelay });
  try {
    const { data: got } = await collect(client2.read({ journal: 'a/j' }));
    assert.ok(got.equals(data));
  } finally {
    client2.close();
    await stub2.stop();
  }
});

test('terminal statuses and non-transient gRPC errors are thrown, not retried', async () => {
  const stub = await startJournalStub({
    read: (call) => {
      if (call.request.journal === 'bad/status') {
        call.write(statusResponse(Status.NOT_ALLOWED));
        call.end();
      } else call.emit('error', { code: GrpcStatus.INVALID_ARGUMENT, details: 'journal: not a valid token' });
    },
  });
  const client = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    await assert.rejects(collect(client.read({ journal: 'bad/status' })), (e: unknown) => e instanceof BrokerStatusError && e.status === Status.NOT_ALLOWED);
    await assert.rejects(collect(client.read({ journal: 'bad/arg' })), /reading bad\/arg: INVALID_ARGUMENT: journal: not a valid token/);
    assert.equal(stub.requests.length, 2);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('abort ends a blocking read cleanly at the next unread offset', async () => {
  const stub = await startJournalStub({
    read: (call) => {
      call.write(metaResponse(0n, fragment('a/j', 0n, 100n), 100n, { first: true }));
      call.write(contentResponse(0n, Buffer.alloc(100, 1)));
      // ...then block, as a broker does at the write head.
    },
  });
  const client = new JournalClient({ address: stub.address });
  const ac = new AbortController();
  try {
    const reader = client.read({ journal: 'a/j', block: true }, { signal: ac.signal });
    let got = 0;
    for await (const c of reader) {
      got += c.content.length;
      if (got === 100) setTimeout(() => ac.abort(), 20);
    }
    assert.equal(got, 100);
    assert.equal(reader.offset, 100n);
    assert.equal((stub.requests[0]!.request as ReadRequest).block, true);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('NOT_JOURNAL_BROKER re-routes a do_not_proxy read to a route member', async () => {
  const data = bytes(2000);
  const member = await startJournalStub({ read: serve(data) });
  const other = await startJournalStub({
    read: (call) => {
      call.write(
        statusResponse(Status.NOT_JOURNAL_BROKER, {
          header: {
            process_id: { zone: 'z', suffix: 'other' },
            route: { members: [{ zone: 'z', suffix: 'member' }], primary: 0, endpoints: [member.address] },
            etcd: { cluster_id: 1n, member_id: 1n, revision: 5n, raft_term: 1n },
          },
        }),
      );
      call.end();
    },
  });
  const client = new JournalClient({ address: other.address, cacheSize: 16 }, { delay: fastDelay });
  try {
    const { data: got } = await collect(client.read({ journal: 'a/j' }));
    assert.ok(got.equals(data));
    const r0 = other.requests[0]!.request as ReadRequest;
    assert.equal(r0.do_not_proxy, true);
    const r1 = member.requests[0]!.request as ReadRequest;
    assert.equal(r1.do_not_proxy, true);
    assert.equal(r1.offset, 0n);
  } finally {
    client.close();
    await member.stop();
    await other.stop();
  }
});

/** A broker that hands out a fragment URL for [0, len) and then reports the head. */
function urlServer(len: number, url: string, codec: CompressionCodec, onProxied?: (call: ReadCall) => void) {
  return (call: ReadCall) => {
    const req = call.request;
    if (req.offset >= BigInt(len)) {
      call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: BigInt(len), write_head: BigInt(len) }));
      call.end();
      return;
    }
    const frag = fragment(req.journal, 0n, BigInt(len), codec, 'file:///');
    call.write(metaResponse(req.offset, frag, BigInt(len), { first: true, url }));
    if (!req.do_not_proxy && onProxied) {
      onProxied(call);
      return;
    }
    call.end();
  };
}

test('direct fragment read from a file:// root: gzip multi-member, skipping to the offset', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-frag-'));
  const data = bytes(300_000, 3);
  mkdirSync(join(root, 'a', 'j'), { recursive: true });
  // Brokers compress in batches, each a separate gzip member.
  const gz = Buffer.concat([gzipSync(data.subarray(0, 100_000)), gzipSync(data.subarray(100_000, 250_000)), gzipSync(data.subarray(250_000))]);
  writeFileSync(join(root, 'a', 'j', 'frag.gz'), gz);
  const stub = await startJournalStub({ read: urlServer(data.length, 'file:///a/j/frag.gz', CompressionCodec.GZIP) });
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
  try {
    const reader = client.read({ journal: 'a/j', offset: 12_345n });
    const { data: got, chunks } = await collect(reader);
    assert.ok(got.equals(data.subarray(12_345)));
    assert.equal(reader.offset, 300_000n);
    assert.equal(chunks.find((c) => c.content.length > 0)!.offset, 12_345n);
    const reqs = readRequests(stub);
    assert.deepEqual(
      reqs.map((r) => [r.offset, r.do_not_proxy]),
      [
        [12_345n, true],
        [300_000n, true],
      ],
    );
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

test('direct read of an uncompressed fragment honours end_offset', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-frag-'));
  const data = bytes(5000, 9);
  writeFileSync(join(root, 'frag.raw'), data);
  const stub = await startJournalStub({ read: urlServer(data.length, 'file:///frag.raw', CompressionCodec.NONE) });
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root });
  try {
    const reader = client.read({ journal: 'a/j', offset: 100n, end_offset: 4000n });
    const { data: got } = await collect(reader);
    assert.ok(got.equals(data.subarray(100, 4000)));
    assert.equal(reader.offset, 4000n);
    assert.equal(readRequests(stub).length, 1);
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

test('a truncated fragment file is an error, retried then read through the broker', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-frag-'));
  const data = bytes(5000, 5);
  writeFileSync(join(root, 'frag.raw'), data.subarray(0, 4000)); // short
  const stub = await startJournalStub({
    read: urlServer(data.length, 'file:///frag.raw', CompressionCodec.NONE, (call) => {
      const off = Number(call.request.offset);
      call.write(contentResponse(BigInt(off), data.subarray(off)));
      call.end();
    }),
  });
  const errors: string[] = [];
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
  try {
    const reader = client.read({ journal: 'a/j' }, { onRetry: (i) => errors.push(String((i.error as Error).message)) });
    const { data: got } = await collect(reader);
    assert.ok(got.equals(data), 'no byte missed or repeated');
    assert.match(errors[0]!, /unexpected EOF reading fragment file:\/\/\/frag\.raw: ended at 4000, expected 5000/);
    // The first attempt delivered [0, 4000) directly; later attempts resume at 4000, and once
    // direct reads keep failing the broker streams the rest.
    const reqs = readRequests(stub);
    assert.equal(reqs[1]!.offset, 4000n);
    assert.ok(reqs.some((r) => r.offset === 4000n && r.do_not_proxy === false));
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

// A hand-made Snappy framed stream: a compressed chunk with an overlapping back-reference, then
// an uncompressed chunk.
function snappyFramed(): { framed: Buffer; plain: Buffer } {
  const part1 = Buffer.from('abcd'.repeat(5)); // 20 bytes
  const block = Buffer.from([20, (3 << 2) | 0, 0x61, 0x62, 0x63, 0x64, (15 << 2) | 2, 4, 0]);
  const part2 = Buffer.from('tail bytes');
  const chunk = (type: number, body: Buffer) => {
    const h = Buffer.alloc(4);
    h[0] = type;
    h.writeUIntLE(body.length, 1, 3);
    return Buffer.concat([h, body]);
  };
  const crc = (b: Buffer) => {
    const c = Buffer.alloc(4);
    c.writeUInt32LE(maskedCrc32c(b));
    return c;
  };
  const framed = Buffer.concat([
    chunk(0xff, Buffer.from('sNaPpY')),
    chunk(0x00, Buffer.concat([crc(part1), block])),
    chunk(0xfe, Buffer.alloc(3)), // padding
    chunk(0x01, Buffer.concat([crc(part2), part2])),
  ]);
  return { framed, plain: Buffer.concat([part1, part2]) };
}

test('direct read of a SNAPPY (framed) fragment', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-frag-'));
  const { framed, plain } = snappyFramed();
  writeFileSync(join(root, 'frag.sz'), framed);
  const stub = await startJournalStub({ read: urlServer(plain.length, 'file:///frag.sz', CompressionCodec.SNAPPY) });
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root });
  try {
    const { data: got } = await collect(client.read({ journal: 'a/j', offset: 2n }));
    assert.equal(got.toString(), plain.subarray(2).toString());
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

test('a fragment this client cannot decode is read through the broker instead', async () => {
  const data = bytes(3000, 1);
  // Node 20 has no zstd decoder; where one exists, use a URL scheme with no handler instead.
  const zstdMissing = !canDecode(CompressionCodec.ZSTANDARD);
  const url = zstdMissing ? 'file:///frag.zst' : 'ftp://store/frag.zst';
  const stub = await startJournalStub({
    read: urlServer(data.length, url, CompressionCodec.ZSTANDARD, (call) => {
      const off = Number(call.request.offset);
      call.write(contentResponse(BigInt(off), data.subarray(off, 1000)));
      call.write(contentResponse(1000n, data.subarray(1000)));
      call.end();
    }),
  });
  const notes: string[] = [];
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: tmpdir() });
  try {
    const { data: got } = await collect(client.read({ journal: 'a/j', offset: 10n }, { onRetry: (i) => notes.push((i.error as Error).message) }));
    assert.ok(got.equals(data.subarray(10)));
    assert.deepEqual(
      readRequests(stub).map((r) => [r.offset, r.do_not_proxy]),
      [
        [10n, true],
        [10n, false],
        [3000n, true],
      ],
    );
    if (zstdMissing) assert.match(notes[0]!, /cannot decompress ZSTANDARD fragments: this Node\.js .* has no zstd decoder/);
    else assert.match(notes[0]!, /cannot read fragment URL scheme ftp:/);
  } finally {
    client.close();
    await stub.stop();
  }
});

test('stopping iteration early cancels the Read RPC', async () => {
  let cancelled!: () => void;
  const wasCancelled = new Promise<void>((r) => (cancelled = r));
  const stub = await startJournalStub({
    read: (call) => {
      call.on('cancelled', () => cancelled());
      call.write(metaResponse(0n, fragment('a/j', 0n, 10n), 10n, { first: true }));
      call.write(contentResponse(0n, Buffer.alloc(10, 1)));
      // Blocks at the head.
    },
  });
  const client = new JournalClient({ address: stub.address });
  try {
    const reader = client.read({ journal: 'a/j', block: true });
    for await (const c of reader) if (c.content.length) break;
    await Promise.race([wasCancelled, new Promise((_, rej) => setTimeout(() => rej(new Error('RPC was not cancelled')), 2000))]);
    assert.equal(reader.offset, 10n);
  } finally {
    client.close();
    await stub.stop();
  }
});
