// The broker core's reading of a persisted fragment from its store (src/core/broker/read.ts):
// every codec's content from any offset; a reader that stops early closes the stored stream; a
// stored stream that fails fails the read instead of leaving it waiting.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';

import { openStored } from '../../../../src/core/broker/read.js';
import { fragmentContentPath } from '../../../../src/lib/protocol/fragment.js';
import { CompressionCodec, Fragment } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore, type FragmentStore } from '../../../../src/lib/stores/index.js';

const J = 'core/stored';
const CONTENT = Buffer.from(Array.from({ length: 300_000 }, (_, i) => `line ${i}\n`).join(''));

function fragment(codec: CompressionCodec): Fragment {
  const sha = createHash('sha1').update(CONTENT).digest();
  return Fragment.fromPartial({
    journal: J,
    begin: 1000n,
    end: 1000n + BigInt(CONTENT.length),
    sum: { part1: sha.readBigUInt64BE(0), part2: sha.readBigUInt64BE(8), part3: sha.readUInt32BE(16) },
    compression_codec: codec,
    backing_store: 'file:///',
  });
}

describe('a persisted fragment read by the broker core', () => {
  let root = '';
  /** The stored streams handed out, and whether each was closed. */
  const opened: { path: string; closed: boolean }[] = [];
  let failNext = false;
  const broker = {
    openStore: (url: string): FragmentStore => {
      const real = new FileStore(url, { root });
      return Object.assign(Object.create(real) as FragmentStore, {
        open: async (path: string): Promise<Readable> => {
          if (failNext) {
            failNext = false;
            // A store stream that gives a few bytes, then fails (a connection reset, an I/O error).
            const s = new PassThrough();
            s.write(gzipSync(CONTENT).subarray(0, 100));
            setTimeout(() => s.destroy(new Error('connection reset by the store')), 10);
            return s;
          }
          const stream = await real.open(path);
          const rec = { path, closed: false };
          opened.push(rec);
          stream.once('close', () => (rec.closed = true));
          return stream;
        },
      });
    },
  };

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'gazctl-stored-'));
    for (const [codec, body] of [
      [CompressionCodec.NONE, CONTENT],
      [CompressionCodec.GZIP, gzipSync(CONTENT)],
    ] as const) {
      const f = join(root, fragmentContentPath(fragment(codec)));
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, body);
    }
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  for (const codec of [CompressionCodec.NONE, CompressionCodec.GZIP]) {
    it(`${CompressionCodec[codec]}: the content from an offset inside it`, async () => {
      const parts: Buffer[] = [];
      for await (const c of await openStored(broker, fragment(codec), 1000n + 12_345n)) parts.push(c);
      assert.ok(Buffer.concat(parts).equals(CONTENT.subarray(12_345)));
    });

    it(`${CompressionCodec[codec]}: a reader that stops after the first chunk closes the stored stream`, async () => {
      opened.length = 0;
      for await (const c of await openStored(broker, fragment(codec), 1000n)) {
        assert.ok(c.length > 0);
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(opened.length, 1);
      assert.equal(opened[0]!.closed, true, 'the stored stream is closed');
    });
  }

  it('GZIP: a stored stream that fails fails the read', async () => {
    failNext = true;
    const read = (async () => {
      for await (const _c of await openStored(broker, fragment(CompressionCodec.GZIP), 1000n)) {
        // (the first bytes may or may not inflate to a chunk)
      }
    })();
    const outcome = await Promise.race([read.then(() => 'ended', (e: Error) => e.message), new Promise((r) => setTimeout(() => r('still waiting after 2 s'), 2000))]);
    assert.equal(outcome, 'connection reset by the store');
  });
});
