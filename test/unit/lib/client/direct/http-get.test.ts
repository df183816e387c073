// The lean GET of plain http:// fragment URLs: bodies in PIECE-sized buffers the socket filled (or
// one buffer of a whole GZIP object), node:http's errors, the fallback to node:http for answers
// it does not handle, and truncated bodies, aborts and early closes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { CompressionCodec } from '../../../../../src/lib/protocol/gen/broker/protocol.js';
import { openFragmentSource, type FragmentSource } from '../../../../../src/lib/client/direct/fragment-fetch.js';
import { PIECE, RawGet } from '../../../../../src/lib/client/direct/http-get.js';
import { bytes } from '../helpers.js';

async function drain(src: FragmentSource): Promise<Buffer[]> {
  const out: Buffer[] = [];
  try {
    for (let b = await src.next(); b !== null; b = await src.next()) out.push(b);
  } finally {
    src.close();
  }
  return out;
}

/** An HTTP server for the test; `handle` answers every request. */
async function withHttp(handle: (req: IncomingMessage, res: ServerResponse) => void, fn: (base: string, seen: IncomingMessage[]) => Promise<void>): Promise<void> {
  const seen: IncomingMessage[] = [];
  const server = createHttpServer((req, res) => {
    seen.push(req);
    handle(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

/** A TCP server that answers each connection with `reply` (raw bytes), then does `after`. */
async function withRaw(reply: Buffer, after: 'end' | 'hold', fn: (base: string) => Promise<void>): Promise<void> {
  const sockets: Socket[] = [];
  const server = createNetServer((s) => {
    sockets.push(s);
    s.once('data', () => {
      if (after === 'end') s.end(reply);
      else s.write(reply);
    });
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
  }
}

test('a NONE object over http:// arrives in PIECE-sized pieces, byte for byte, with the request as node:http would send it', async () => {
  const content = bytes(2 * PIECE + 12_345, 11);
  await withHttp(
    (_req, res) => res.writeHead(200, { 'content-length': content.length }).end(content),
    async (base, seen) => {
      const url = `${base}/a/j/f.raw?X-Amz-Signature=abc%2Fdef&x=1`;
      const pieces = await drain(await openFragmentSource({ url, what: 'f' }, CompressionCodec.NONE, { length: BigInt(content.length) }));
      assert.ok(Buffer.concat(pieces).equals(content));
      assert.deepEqual(
        pieces.map((p) => p.length),
        [PIECE, PIECE, 12_345],
      );
      assert.equal(seen.length, 1);
      assert.equal(seen[0]!.url, '/a/j/f.raw?X-Amz-Signature=abc%2Fdef&x=1', 'path and query exactly as signed');
      assert.equal(seen[0]!.headers.host, new URL(base).host);
      assert.equal(seen[0]!.headers['accept-encoding'], 'identity');
    },
  );
});

test('an empty body and a one-byte body', async () => {
  for (const content of [Buffer.alloc(0), Buffer.from('x')]) {
    await withHttp(
      (_req, res) => res.writeHead(200, { 'content-length': content.length }).end(content),
      async (base) => {
        const pieces = await drain(await openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: BigInt(content.length) }));
        assert.ok(Buffer.concat(pieces).equals(content));
      },
    );
  }
});

test('a GZIP object over http:// is read into one buffer and inflated; an error status reads as node:http reports it', async () => {
  const content = bytes(3 * PIECE, 12);
  const stored = Buffer.concat([gzipSync(content.subarray(0, PIECE)), gzipSync(content.subarray(PIECE))]);
  await withHttp(
    (req, res) => {
      if (req.url === '/missing') res.writeHead(404).end('no such key');
      else res.writeHead(200, { 'content-length': stored.length }).end(stored);
    },
    async (base, seen) => {
      const pieces = await drain(await openFragmentSource({ url: `${base}/f.gz`, what: 'f' }, CompressionCodec.GZIP, { length: BigInt(content.length) }));
      assert.ok(Buffer.concat(pieces).equals(content));
      assert.equal(seen[0]!.headers['accept-encoding'], 'gzip');
      const g = await RawGet.open(new URL(`${base}/f.gz`), { accept: 'gzip', encodings: [''], wholeMax: stored.length });
      assert.ok(g);
      assert.ok((await g.whole()).equals(stored), 'the stored bytes in one buffer');
      g.close();
      await assert.rejects(
        openFragmentSource({ url: `${base}/missing`, what: 'f' }, CompressionCodec.NONE, { length: 10n }),
        /^DirectReadError: fetching fragment http:\/\/127\.0\.0\.1:\d+\/missing: HTTP 404 Not Found$/,
      );
    },
  );
});

test('answers it does not handle (chunked, gzip-encoded NONE) are fetched again through node:http and read the same', async () => {
  const content = bytes(PIECE + 777, 13);
  await withHttp(
    (req, res) => {
      if (req.url === '/chunked') {
        res.writeHead(200); // no content-length: chunked
        res.write(content.subarray(0, 1000));
        res.end(content.subarray(1000));
      } else {
        const z = gzipSync(content);
        res.writeHead(200, { 'content-length': z.length, 'content-encoding': 'gzip' }).end(z);
      }
    },
    async (base, seen) => {
      for (const path of ['/chunked', '/encoded']) {
        const before = seen.length;
        const pieces = await drain(await openFragmentSource({ url: `${base}${path}`, what: 'f' }, CompressionCodec.NONE, { length: BigInt(content.length) }));
        assert.ok(Buffer.concat(pieces).equals(content), path);
        assert.equal(seen.length - before, 2, `${path}: asked once here, then once through node:http`);
      }
    },
  );
});

test('a body cut short, a connection closed before any answer, and garbage fail with the URL named', async () => {
  const cut = Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n', 'latin1'), bytes(1200, 14)]);
  await withRaw(cut, 'end', async (base) => {
    const src = await openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 5000n });
    await assert.rejects(drain(src), /fetching fragment http:\/\/127\.0\.0\.1:\d+\/f: connection closed after 1200 of 5000 bytes/);
  });
  await withRaw(Buffer.alloc(0), 'end', async (base) => {
    await assert.rejects(
      openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 5000n }),
      /fetching fragment http:\/\/127\.0\.0\.1:\d+\/f: connection closed before the response/,
    );
  });
  await withRaw(Buffer.from('SSH-2.0-OpenSSH\r\n\r\n', 'latin1'), 'end', async (base) => {
    await assert.rejects(openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 5000n }), /fetching fragment .*: malformed HTTP response/);
  });
  const huge = Buffer.from(`HTTP/1.1 200 OK\r\n${'X-Pad: 0123456789abcdef\r\n'.repeat(4000)}`, 'latin1');
  await withRaw(huge, 'hold', async (base) => {
    await assert.rejects(openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 5000n }), /fetching fragment .*: response head is too large/);
  });
  const long = Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n', 'latin1'), Buffer.from('abcdef')]);
  await withRaw(long, 'end', async (base) => {
    await assert.rejects(openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 3n }), /more bytes than the announced 3/);
  });
});

test('an abort ends a read waiting for its body, and one waiting for the answer', async () => {
  const part = Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n', 'latin1'), bytes(10, 15)]);
  await withRaw(part, 'hold', async (base) => {
    const ac = new AbortController();
    const src = await openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 100_000n, signal: ac.signal });
    const reading = drain(src);
    setImmediate(() => ac.abort());
    await assert.rejects(reading, /fetching fragment .*: aborted/);
  });
  await withRaw(Buffer.alloc(0), 'hold', async (base) => {
    const ac = new AbortController();
    const opening = openFragmentSource({ url: `${base}/f`, what: 'f' }, CompressionCodec.NONE, { length: 1n, signal: ac.signal });
    setTimeout(() => ac.abort(), 20);
    await assert.rejects(opening, /fetching fragment .*: aborted/);
  });
});

test('a consumer that stops early drops the connection (the server sees it reset)', async () => {
  const size = 64 * PIECE;
  let failed!: (err: Error) => void;
  const reset = new Promise<Error>((r) => (failed = r));
  const server = createNetServer((s) => {
    s.on('error', failed);
    s.once('data', () => s.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\n\r\n`, 'latin1'), Buffer.alloc(size, 7)])));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/f`;
    const src = await openFragmentSource({ url, what: 'f' }, CompressionCodec.NONE, { length: BigInt(size) });
    const first = await src.next();
    assert.ok(first && first.length > 0 && first.every((b) => b === 7));
    src.close();
    assert.equal(await src.next(), null);
    assert.match((await reset).message, /ECONNRESET/, 'closed with unread bytes: reset');
  } finally {
    server.close();
  }
});
