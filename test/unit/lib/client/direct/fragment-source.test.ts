// Pull sources of fragment content: large positioned reads of uncompressed files, one-call
// inflates of small GZIP objects (from a file or a signed HTTP URL), streams for the rest, and
// exact detection of objects holding more or fewer bytes than their fragment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { CompressionCodec } from '../../../../../src/lib/protocol/gen/broker/protocol.js';
import { PIECE_SIZE } from '../../../../../src/lib/client/direct/piece-pool.js';
import { openFragmentSource, READ_CHUNK, READS_IN_FLIGHT, type FragmentSource } from '../../../../../src/lib/client/direct/fragment-fetch.js';
import { readFragmentRun, type RunItem } from '../../../../../src/lib/client/direct/parallel-fetch.js';
import { bytes, fragment } from '../helpers.js';
import { nativeInflate } from '../../../../../src/lib/client/direct/native-inflate.js';

async function drain(src: FragmentSource): Promise<Buffer[]> {
  const out: Buffer[] = [];
  try {
    for (let b = await src.next(); b !== null; b = await src.next()) out.push(b);
  } finally {
    src.close();
  }
  return out;
}

function withRoot(fn: (root: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const root = mkdtempSync(join(tmpdir(), 'gazctl-source-'));
    mkdirSync(join(root, 'a', 'j'), { recursive: true });
    try {
      await fn(root);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  };
}

test(
  'an uncompressed file is read in READ_CHUNK pieces from the skipped offset, the first one ending at a page boundary',
  withRoot(async (root) => {
    const data = bytes(2 * READ_CHUNK + 1234, 3);
    writeFileSync(join(root, 'a', 'j', 'f.raw'), data);
    const src = await openFragmentSource({ url: 'file:///a/j/f.raw', what: 'f' }, CompressionCodec.NONE, {
      fileRoot: root,
      length: BigInt(data.length),
      skip: 1000n,
    });
    assert.equal(src.skipped, 1000n);
    const pieces = await drain(src);
    // 1000 bytes into the file's first page: the first read stops at a page boundary (so that every
    // later one starts at one), then whole pieces, then the rest.
    assert.deepEqual(
      pieces.map((p) => p.length),
      [READ_CHUNK - 1000, READ_CHUNK, 1234],
    );
    assert.ok(Buffer.concat(pieces).equals(data.subarray(1000)));
  }),
);

test(
  'a file holding more bytes than its fragment yields them, so the run reports it; a missing file names the path',
  withRoot(async (root) => {
    const data = bytes(5000, 1);
    writeFileSync(join(root, 'a', 'j', 'long.raw'), data);
    const src = await openFragmentSource({ url: 'file:///a/j/long.raw', what: 'f' }, CompressionCodec.NONE, { fileRoot: root, length: 4000n });
    const pieces = await drain(src);
    assert.deepEqual(
      pieces.map((p) => p.length),
      [4000, 1, 999],
      'the expected bytes, one probe byte past them, then the rest',
    );
    assert.ok(Buffer.concat(pieces).equals(data));

    const f = fragment('a/j', 0n, 4000n, CompressionCodec.NONE, 'file:///');
    const items: RunItem[] = [{ fragment: f, url: 'file:///a/j/long.raw' }];
    await assert.rejects(
      (async () => {
        for await (const _ of readFragmentRun(items, { fileRoot: root })) void _;
      })(),
      /holds more than its 4000 bytes/,
    );
    await assert.rejects(
      openFragmentSource({ url: 'file:///a/j/missing.raw', what: 'f' }, CompressionCodec.NONE, { fileRoot: root, length: 1n }),
      /reading fragment file:\/\/\/a\/j\/missing\.raw: ENOENT/,
    );
  }),
);

test(
  'an uncompressed file shorter than its fragment: every byte it holds, in order, then the end (reads in flight dropped)',
  withRoot(async (root) => {
    for (const size of [0, 1, READ_CHUNK - 1, READ_CHUNK, READ_CHUNK + 1, 3 * READ_CHUNK + 17]) {
      const data = bytes(size, 8);
      writeFileSync(join(root, 'a', 'j', 'short.raw'), data);
      const src = await openFragmentSource({ url: 'file:///a/j/short.raw', what: 'f' }, CompressionCodec.NONE, {
        fileRoot: root,
        length: BigInt(size + 5 * READ_CHUNK),
      });
      const got = await drain(src);
      assert.ok(Buffer.concat(got).equals(data), `${size} bytes`);
      assert.ok(got.every((p) => p.length > 0 && p.length <= READ_CHUNK));
    }
  }),
);

test(
  'closing an uncompressed file source with reads in flight gives their buffers back once they settle',
  withRoot(async (root) => {
    const data = bytes(6 * READ_CHUNK, 9);
    writeFileSync(join(root, 'a', 'j', 'f6.raw'), data);
    const { pieces } = await import('../../../../../src/lib/client/direct/piece-pool.js');
    const src = await openFragmentSource({ url: 'file:///a/j/f6.raw', what: 'f' }, CompressionCodec.NONE, { fileRoot: root, length: BigInt(data.length) });
    const first = await src.next();
    assert.ok(first && first.equals(data.subarray(0, READ_CHUNK)));
    // An empty pool (so that a buffer coming back is seen), then the close.
    const held: Buffer[] = [];
    while (pieces.freeCount > 0) held.push(pieces.get());
    pieces.release(first);
    assert.equal(pieces.freeCount, 1);
    src.close(); // READS_IN_FLIGHT reads ahead are in flight
    assert.equal(await src.next(), null);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(pieces.freeCount, 1 + READS_IN_FLIGHT, 'the buffers of the reads in flight are free again');
    for (const b of held) pieces.release(b);
  }),
);

test(
  'a small GZIP file is inflated in one go into pieces of at most PIECE_SIZE, multi-member included; a bigger one is streamed',
  withRoot(async (root) => {
    const a = bytes(PIECE_SIZE + 300_000, 5);
    const b = bytes(200_000, 6);
    writeFileSync(join(root, 'a', 'j', 'f.gz'), Buffer.concat([gzipSync(a), gzipSync(b)]));
    const total = a.length + b.length;
    const whole = await drain(
      await openFragmentSource({ url: 'file:///a/j/f.gz', what: 'f' }, CompressionCodec.GZIP, { fileRoot: root, length: BigInt(total) }),
    );
    // The native inflate writes the whole content into one buffer and hands it out in pieces of
    // PIECE_SIZE; a gunzip stream (module not built) in pieces of at most PIECE_SIZE.
    if (nativeInflate()) assert.deepEqual(whole.map((p) => p.length), [PIECE_SIZE, total - PIECE_SIZE]);
    else assert.ok(whole.every((p) => p.length > 0 && p.length <= PIECE_SIZE));
    assert.ok(Buffer.concat(whole).equals(Buffer.concat([a, b])));
    // Content beyond the caller's limit for a one-call inflate goes through a gunzip stream.
    const streamed = await drain(
      await openFragmentSource({ url: 'file:///a/j/f.gz', what: 'f' }, CompressionCodec.GZIP, { fileRoot: root, length: BigInt(total), wholeMax: 100_000 }),
    );
    assert.ok(Buffer.concat(streamed).equals(Buffer.concat([a, b])));
    // Corrupt compressed bytes fail the read.
    writeFileSync(join(root, 'a', 'j', 'bad.gz'), Buffer.from('not gzip at all'));
    const bad = await openFragmentSource({ url: 'file:///a/j/bad.gz', what: 'f' }, CompressionCodec.GZIP, { fileRoot: root, length: 10n });
    await assert.rejects(drain(bad), /incorrect header check|invalid|unknown compression/i);
  }),
);

test('a GZIP object behind a signed HTTP URL is fetched whole and inflated in one go', async () => {
  const content = bytes(400_000, 7);
  const stored = gzipSync(content);
  let accept = '';
  const server: Server = createServer((req, res) => {
    accept = String(req.headers['accept-encoding']);
    if (req.url === '/missing') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-length': stored.length, 'content-type': 'application/octet-stream' }).end(stored);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const pieces = await drain(await openFragmentSource({ url: `${base}/a/j/f.gz`, what: 'f' }, CompressionCodec.GZIP, { length: BigInt(content.length) }));
    assert.equal(accept, 'gzip');
    assert.equal(pieces.length, 1);
    assert.ok(pieces[0]!.equals(content));
    await assert.rejects(
      openFragmentSource({ url: `${base}/missing`, what: 'f' }, CompressionCodec.GZIP, { length: 10n }),
      /fetching fragment http:\/\/127\.0\.0\.1:\d+\/missing: HTTP 404/,
    );
  } finally {
    server.close();
  }
});
