// Tripwire of the Read path's buffer recycling (read-wire.ts): a content message's buffer is
// reused for another message as soon as grpc-js calls the write's callback. That is sound only
// while grpc-js calls it after it is done with the bytes (today it frames each message into a
// buffer of its own, and calls back once HTTP/2 took that). Here every callback overwrites its
// message at once, as a reuse would, while many messages are still queued behind a client that
// has not read them yet; the client must still receive every byte as written. If a grpc-js
// upgrade calls back earlier, or stops copying, the content comes out scribbled and this fails.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { credentials, type ServerWritableStream } from '@grpc/grpc-js';

import { Metrics } from '../../../../src/core/broker/metrics.js';
import { encodeContentInto, recycleContent } from '../../../../src/core/broker/read-wire.js';
import { startServer, type ServiceServer } from '../../../../src/core/broker/server.js';
import { JournalClient, ReadRequest, type JournalServer, type ReadResponse } from '../../../../src/lib/protocol/gen/broker/protocol.js';

const CHUNK = 32 * 1024 - 16;
const CHUNKS = 200;
const byteAt = (offset: number) => (offset * 7 + (offset >>> 13)) & 0xff;

describe('Read message buffers recycled on the write callback', () => {
  let server: ServiceServer;
  before(async () => {
    const journal = {
      read(call: ServerWritableStream<ReadRequest, Buffer>) {
        for (let i = 0; i < CHUNKS; i++) {
          const offset = i * CHUNK;
          const msg = encodeContentInto(BigInt(offset), CHUNK, (dst, at, n) => {
            for (let k = 0; k < n; k++) dst[at + k] = byteAt(offset + k);
            return n;
          })!;
          // All written at once: most wait in grpc-js's queue behind the client's window.
          call.write(msg, () => {
            msg.fill(0xee);
            recycleContent(msg);
          });
        }
        call.end();
      },
    } as unknown as JournalServer;
    server = await startServer({ host: '127.0.0.1', port: 0, journal, metrics: new Metrics(), ready: () => true, maxRecvBytes: 4 << 20 });
  });
  after(() => server.close());

  it('every byte arrives as written although each buffer is overwritten in its callback', async () => {
    const client = new JournalClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
    try {
      const got = await new Promise<ReadResponse[]>((resolve, reject) => {
        const out: ReadResponse[] = [];
        const call = client.read(ReadRequest.fromPartial({ journal: 'a/b', offset: 0n }));
        call.on('data', (r: ReadResponse) => {
          out.push(r);
          // Read slowly at first, so that the server's writes queue up.
          if (out.length < 20) {
            call.pause();
            setTimeout(() => call.resume(), 5);
          }
        });
        call.on('error', reject);
        call.on('end', () => resolve(out));
      });
      assert.equal(got.length, CHUNKS);
      for (const [i, r] of got.entries()) {
        const offset = i * CHUNK;
        assert.equal(r.offset, BigInt(offset));
        const c = Buffer.from(r.content);
        assert.equal(c.length, CHUNK);
        for (let k = 0; k < c.length; k++) {
          if (c[k] !== byteAt(offset + k)) assert.fail(`message ${i} byte ${k}: ${c[k]} instead of ${byteAt(offset + k)}: grpc-js read a buffer after its write callback`);
        }
      }
    } finally {
      client.close();
    }
  });
});
