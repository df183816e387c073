// Pooled pieces of direct reads, and their lifetime: a piece stays valid until its `release` is
// called (a consumer that never calls it keeps every chunk intact for as long as it holds it); once
// released, its buffer carries later content. The CLI's Output calls `done` only when the stream
// is finished with a chunk, so a buffer is never reused while its write is under way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { CompressionCodec, type Fragment } from '../../../../../src/lib/protocol/gen/broker/protocol.js';
import { JournalClient } from '../../../../../src/lib/index.js';
import { readFragmentRun, type RunItem } from '../../../../../src/lib/client/direct/parallel-fetch.js';
import { alignedReadLength, pageAlignedBuffer, PIECE_OFFSET, PIECE_SIZE, PiecePool, pieces } from '../../../../../src/lib/client/direct/piece-pool.js';
import { Output } from '../../../../../src/cli/output.js';
import { startJournalStub } from '../../../../../src/testing/stubs.js';
import { bytes, fastDelay, fragment, fragmentBroker } from '../helpers.js';

/** Fragments of 2.5 pooled pieces, so that each has full pieces and a shorter last one. */
const SIZE = 2 * PIECE_SIZE + PIECE_SIZE / 2;

/** A journal a/j of `n` fragments of SIZE bytes, NONE and GZIP alternating, as files under a root. */
function journalFiles(n: number): { root: string; data: Buffer; items: RunItem[] } {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-pool-'));
  mkdirSync(join(root, 'a', 'j'), { recursive: true });
  const data = bytes(n * SIZE, 21);
  const items: RunItem[] = [];
  for (let i = 0; i < n; i++) {
    const gz = i % 2 === 1;
    const body = data.subarray(i * SIZE, (i + 1) * SIZE);
    const name = `f${i}${gz ? '.gz' : '.raw'}`;
    writeFileSync(join(root, 'a', 'j', name), gz ? gzipSync(body) : body);
    const f = fragment('a/j', BigInt(i * SIZE), BigInt((i + 1) * SIZE), gz ? CompressionCodec.GZIP : CompressionCodec.NONE, 'file:///');
    items.push({ fragment: f, url: `file:///a/j/${name}` });
  }
  return { root, data, items };
}

test('a pool hands out views of its buffers, takes back only its own, each once, and keeps small pieces out', () => {
  const pool = new PiecePool();
  const a = pool.get();
  assert.equal(a.length, PIECE_SIZE);
  const b = pool.get(100_000);
  assert.equal(b.length, 100_000);
  assert.equal(b.buffer.byteLength, PIECE_SIZE + PIECE_OFFSET, 'a page of slack before the piece');
  assert.equal(b.byteOffset, PIECE_OFFSET);
  assert.equal(a.byteOffset, PIECE_OFFSET);
  assert.ok(pool.owns(a) && pool.owns(b.subarray(10)));
  assert.throws(() => pool.get(PIECE_SIZE + 1), RangeError);

  const small = pool.get(1000);
  assert.equal(small.length, 1000);
  assert.ok(!pool.owns(small), 'a small piece has a buffer of its own');
  pool.release(small);
  pool.release(Buffer.allocUnsafeSlow(PIECE_SIZE));
  assert.equal(pool.freeCount, 0, 'foreign buffers are not taken');

  pool.release(b.subarray(5, 50));
  pool.release(b); // a second release of the same buffer is ignored
  assert.equal(pool.freeCount, 1);
  const c = pool.get(PIECE_SIZE);
  assert.equal(c.buffer, b.buffer, 'the free buffer is handed out again');
  const d = pool.get();
  assert.notEqual(d.buffer, b.buffer, 'and only once');
  assert.notEqual(d.buffer, a.buffer);
});

test('a buffer that carries several pieces (retain) goes back after the last of them is released', () => {
  const pool = new PiecePool();
  const buf = pool.get();
  const first = buf.subarray(0, 1000);
  const second = buf.subarray(1000, 5000);
  pool.retain(second); // two pieces of one buffer: the get() counts the first
  pool.release(first);
  assert.equal(pool.freeCount, 0, 'one piece is still in use');
  pool.release(second);
  assert.equal(pool.freeCount, 1);
  pool.release(second); // released already: ignored
  pool.retain(second); // free: not counted
  assert.equal(pool.freeCount, 1);
  assert.equal(pool.get().buffer, buf.buffer, 'handed out again');
  pool.retain(Buffer.allocUnsafeSlow(PIECE_SIZE)); // not ours: nothing to count
});

test('a run whose consumer releases each chunk after copying it reads every byte, in reused buffers', async () => {
  const { root, data, items } = journalFiles(4);
  try {
    const copies: Buffer[] = [];
    const carried = new Map<ArrayBufferLike, number>();
    for await (const ev of readFragmentRun(items, { fileRoot: root, concurrency: 2 })) {
      if (ev.content.length === 0) continue;
      copies.push(Buffer.from(ev.content));
      carried.set(ev.content.buffer, (carried.get(ev.content.buffer) ?? 0) + 1);
      ev.release();
      ev.release(); // a second call does nothing
    }
    assert.ok(Buffer.concat(copies).equals(data), 'every byte once, in order');
    assert.ok(
      [...carried.values()].some((n) => n > 1),
      'some buffer carried more than one chunk',
    );
    // From inside a fragment (pieces before the offset are skipped and go back as well).
    const from = BigInt(PIECE_SIZE + 17);
    const tail: Buffer[] = [];
    for await (const ev of readFragmentRun(items, { fileRoot: root, from })) {
      tail.push(Buffer.from(ev.content));
      ev.release();
    }
    assert.ok(Buffer.concat(tail).equals(data.subarray(Number(from))));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('chunks that are never released stay intact, and no two share a buffer, though the pool has free ones', async () => {
  const { root, data, items } = journalFiles(4);
  try {
    // Free buffers left by an earlier read of this process that released its chunks.
    for await (const ev of readFragmentRun(items, { fileRoot: root })) ev.release();
    assert.ok(pieces.freeCount > 0);
    const held: Uint8Array[] = [];
    for await (const ev of readFragmentRun(items, { fileRoot: root })) if (ev.content.length) held.push(ev.content);
    // A later read that releases must not take the held chunks' buffers either.
    for await (const ev of readFragmentRun(items, { fileRoot: root })) ev.release();
    assert.ok(Buffer.concat(held).equals(data), 'held chunks are intact after later reads');
    // No two held chunks overlap in memory (a buffer may carry several, at different places: the
    // native inflate hands out a GZIP fragment's content as pieces of one buffer).
    const byBuffer = new Map<ArrayBufferLike, Uint8Array[]>();
    for (const c of held) byBuffer.set(c.buffer, [...(byBuffer.get(c.buffer) ?? []), c]);
    for (const cs of byBuffer.values()) {
      cs.sort((x, y) => x.byteOffset - y.byteOffset);
      for (let i = 1; i < cs.length; i++) assert.ok(cs[i - 1]!.byteOffset + cs[i - 1]!.length <= cs[i]!.byteOffset, 'two held chunks share memory');
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('over a plain http:// URL, released pieces read the same bytes again', async () => {
  const data = bytes(2 * SIZE, 22);
  const stored = [data.subarray(0, SIZE), gzipSync(data.subarray(SIZE))];
  const server: Server = createServer((req, res) => {
    const body = stored[Number(req.url!.slice(1))]!;
    res.writeHead(200, { 'content-length': body.length }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const items: RunItem[] = [
      { fragment: fragment('a/j', 0n, BigInt(SIZE), CompressionCodec.NONE), url: `${base}/0` },
      { fragment: fragment('a/j', BigInt(SIZE), BigInt(2 * SIZE), CompressionCodec.GZIP), url: `${base}/1` },
    ];
    for (let round = 0; round < 3; round++) {
      const copies: Buffer[] = [];
      for await (const ev of readFragmentRun(items)) {
        copies.push(Buffer.from(ev.content));
        ev.release();
      }
      assert.ok(Buffer.concat(copies).equals(data), `round ${round}`);
    }
  } finally {
    server.close();
  }
});

test('a Reader gives a release with content read directly into pooled buffers, none with what a broker streams', async () => {
  const { root, data, items } = journalFiles(3);
  const frags: Fragment[] = items.map((it) => it.fragment);
  const urls = items.map((it) => it.url!);
  const stub = await startJournalStub(fragmentBroker(data, frags, urls));
  const direct = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
  const proxied = new JournalClient({ address: stub.address }, { delay: fastDelay });
  try {
    const copies: Buffer[] = [];
    let released = 0;
    for await (const c of direct.read({ journal: 'a/j', offset: 0n })) {
      copies.push(Buffer.from(c.content));
      if (c.release) {
        released++;
        c.release();
      }
    }
    assert.ok(Buffer.concat(copies).equals(data));
    assert.ok(released > 0, 'direct content comes with a release');
    // One fragment alone (no listing): the single-fragment path releases alike.
    const one = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
    try {
      const got: Buffer[] = [];
      let n = 0;
      for await (const c of one.read({ journal: 'a/j', offset: 5n, end_offset: frags[0]!.end }, { parallel: 1 })) {
        got.push(Buffer.from(c.content));
        if (c.release) n++;
        c.release?.();
      }
      assert.ok(Buffer.concat(got).equals(data.subarray(5, Number(frags[0]!.end))));
      assert.ok(n > 0);
    } finally {
      one.close();
    }
    const streamed = [];
    for await (const c of proxied.read({ journal: 'a/j', offset: 0n })) if (c.content.length) streamed.push(c);
    assert.ok(Buffer.concat(streamed.map((c) => c.content)).equals(data));
    assert.ok(streamed.every((c) => c.release === undefined));
  } finally {
    direct.close();
    proxied.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

test('Output.write calls done only once the stream is finished with the chunk', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-output-'));
  try {
    const path = join(dir, 'out.bin');
    const out = new Output(path);
    const buf = Buffer.alloc(64 * 1024);
    const expect: Buffer[] = [];
    let written = 0;
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 40; i++) {
      buf.fill(i + 1);
      expect.push(Buffer.from(buf));
      const upTo = (i + 1) * buf.length;
      // The chunk is in the file by the time `done` runs; only then is its buffer rewritten.
      let resolve!: () => void;
      pending.push(new Promise<void>((r) => (resolve = r)));
      let called = 0;
      await out.write(buf, () => {
        called++;
        assert.ok(statSync(path).size >= upTo, `chunk ${i} is written out before done`);
        written++;
        resolve();
      });
      await pending[i];
      assert.equal(called, 1);
    }
    await out.close();
    assert.equal(written, 40);
    assert.ok(readFileSync(path).equals(Buffer.concat(expect)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a local NONE fragment ahead of the head reads only a few pieces ahead, the head reads on', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-ahead-'));
  try {
    mkdirSync(join(root, 'a', 'j'), { recursive: true });
    const len = 8 * PIECE_SIZE;
    const data = bytes(2 * len, 23);
    const items: RunItem[] = [0, 1].map((i) => {
      writeFileSync(join(root, 'a', 'j', `f${i}.raw`), data.subarray(i * len, (i + 1) * len));
      return { fragment: fragment('a/j', BigInt(i * len), BigInt((i + 1) * len), CompressionCodec.NONE, 'file:///'), url: `file:///a/j/f${i}.raw` };
    });
    // The consumer holds on to the first piece until the fetches have read what they may: the
    // head the rest of its fragment (7 pieces), the one ahead 4 pieces (without the limit: 8).
    let max = 0;
    let reached!: () => void;
    const settled = new Promise<void>((r) => (reached = r));
    const onBuffered = (b: number) => {
      max = Math.max(max, b);
      if (b >= 11 * PIECE_SIZE) reached();
    };
    const got: Buffer[] = [];
    let first = true;
    for await (const ev of readFragmentRun(items, { fileRoot: root, concurrency: 2, onBuffered })) {
      if (first && ev.content.length > 0) {
        first = false;
        await settled;
        // Give the fragment ahead the time to read on, were it allowed to.
        await new Promise((r) => setTimeout(r, 100));
        assert.ok(max <= 12 * PIECE_SIZE, `held at most 12 pieces, saw ${max / PIECE_SIZE}`);
      }
      got.push(Buffer.from(ev.content));
      ev.release();
    }
    assert.ok(Buffer.concat(got).equals(data));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('pieces start PAGE - 16 bytes into their buffer, and a read inside a page stops at the next page boundary', () => {
  // glibc gives a buffer of this size memory 16 bytes past a page: the piece then starts on a page.
  assert.equal(PIECE_OFFSET, 4096 - 16);
  const big = pageAlignedBuffer(3 * PIECE_SIZE);
  assert.equal(big.length, 3 * PIECE_SIZE);
  assert.equal(big.byteOffset, PIECE_OFFSET);
  assert.equal(big.buffer.byteLength, 3 * PIECE_SIZE + PIECE_OFFSET);
  assert.equal(pieces.owns(big), false, 'not a pooled buffer');
  // From a page boundary: whole pieces, and the tail as it is.
  assert.equal(alignedReadLength(0, 10 * PIECE_SIZE), PIECE_SIZE);
  assert.equal(alignedReadLength(3 * PIECE_SIZE, 10 * PIECE_SIZE), PIECE_SIZE);
  assert.equal(alignedReadLength(8192, 100), 100);
  // From inside a page: up to the next boundary, then whole pieces again.
  assert.equal(alignedReadLength(17, 10 * PIECE_SIZE), PIECE_SIZE - 17);
  assert.equal((17 + alignedReadLength(17, 10 * PIECE_SIZE)) % 4096, 0);
  assert.equal(alignedReadLength(PIECE_SIZE + 4095, 10 * PIECE_SIZE), PIECE_SIZE - 4095);
  assert.equal(alignedReadLength(17, 1000), 1000, 'the last bytes of a file in one read');
});
