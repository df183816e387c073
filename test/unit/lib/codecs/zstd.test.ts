// zstd decoding against frames made by the reference `zstd` CLI (committed under
// test/fixtures/zstd/, so the CLI is not needed to run this):
//   small.zst  `zstd -19` of SMALL (one frame, with a content checksum)
//   big.zst    `zstd -3 --no-check` of big() (one frame, several blocks)
//   multi.zst  `zstd -1` of SMALL, then `zstd -1` of big(), concatenated (two frames)
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

import { canDecode, compressBuffer, decompressor, setPortableCodecs, ZstdDecoder, zstdDecoder, ZstdNativeDecoder } from '../../../../src/lib/codecs/index.js';
import { createRequire } from 'node:module';
import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';

function fixtureDir(): string {
  for (let d = dirname(fileURLToPath(import.meta.url)); d !== dirname(d); d = dirname(d)) {
    if (existsSync(join(d, 'package.json')) && existsSync(join(d, 'test', 'fixtures'))) return join(d, 'test', 'fixtures', 'zstd');
  }
  throw new Error('test/fixtures not found above ' + import.meta.url);
}
const fixture = (name: string) => readFileSync(join(fixtureDir(), name));

const SMALL = 'hello, zstd fragment\n';
function big(): string {
  let s = '';
  for (let i = 0; i < 8000; i++) s += `${i.toString(16).padStart(8, '0')} gazette fragment line ${(i * 7) % 97}\n`;
  return s;
}
const sha1 = (b: Buffer | string) => createHash('sha1').update(b).digest('hex');

/** Feed `input` through `stream` in chunks of `chunk` bytes; the decoded bytes. */
async function decode(stream: NodeJS.ReadWriteStream, input: Buffer, chunk = 4096): Promise<Buffer> {
  const parts: Buffer[] = [];
  const pieces: Buffer[] = [];
  for (let i = 0; i < input.length; i += chunk) pieces.push(input.subarray(i, i + chunk));
  await pipeline(Readable.from(pieces), stream, async (src: AsyncIterable<Buffer | string>) => {
    for await (const c of src) parts.push(Buffer.from(c));
  });
  return Buffer.concat(parts);
}

describe('zstd codec', () => {
  it('is decodable', () => {
    assert.equal(canDecode(CompressionCodec.ZSTANDARD), true);
    assert.ok(decompressor(CompressionCodec.ZSTANDARD));
  });

  it('big() is the content the fixtures were made from', () => {
    assert.equal(sha1(big()), 'e25dd4fe00b65f43850d1263968bd768fc1f9f4a');
    assert.equal(sha1(SMALL), 'cfa90e42963137d8a524c53228b4137664df34ff');
  });

  const libzstd = createRequire(import.meta.url)('@mongodb-js/zstd') as { decompress(b: Buffer): Promise<Buffer> };
  for (const [name, make] of [
    ['ZstdDecoder', () => new ZstdDecoder()],
    ['decompressor(ZSTANDARD)', () => decompressor(CompressionCodec.ZSTANDARD)!],
    // Every frame past 1000 bytes of possible content goes to fzstd: both paths in one stream.
    ['ZstdNativeDecoder (frames over 1000 bytes streamed)', () => new ZstdNativeDecoder((f) => libzstd.decompress(f), 1000)],
  ] as const) {
    it(`${name} decodes a one-frame file with a checksum`, async () => {
      assert.equal((await decode(make(), fixture('small.zst'))).toString(), SMALL);
      // One byte at a time: frame headers and block headers split across chunks.
      assert.equal((await decode(make(), fixture('small.zst'), 1)).toString(), SMALL);
    });

    it(`${name} decodes a frame of several blocks, in any chunking`, async () => {
      const want = big();
      for (const chunk of [1 << 20, 4096, 777]) {
        const got = await decode(make(), fixture('big.zst'), chunk);
        assert.equal(got.length, want.length);
        assert.equal(sha1(got), sha1(want), `chunk ${chunk}`);
      }
    });

    it(`${name} decodes concatenated frames`, async () => {
      const got = await decode(make(), fixture('multi.zst'), 1000);
      assert.equal(sha1(got), sha1(SMALL + big()));
    });

    it(`${name} decodes empty input to nothing`, async () => {
      assert.equal((await decode(make(), Buffer.alloc(0))).length, 0);
    });

    it(`${name} rejects a truncated frame`, async () => {
      const data = fixture('big.zst');
      await assert.rejects(decode(make(), data.subarray(0, data.length - 100)), /zstd|unexpected|end/i);
    });

    it(`${name} rejects bytes that are not zstd`, async () => {
      await assert.rejects(decode(make(), Buffer.from('this is not a zstd frame at all')), /zstd|invalid|magic/i);
    });
  }

  it('decompressor(ZSTANDARD) is libzstd frame by frame where it loads, fzstd otherwise', () => {
    assert.ok(zstdDecoder() instanceof ZstdNativeDecoder);
    setPortableCodecs(true);
    try {
      assert.ok(zstdDecoder() instanceof ZstdDecoder);
    } finally {
      setPortableCodecs(false);
    }
  });

  it('the native decoder skips skippable frames and decodes frames around them, in any chunking', async () => {
    const skip = Buffer.concat([Buffer.from([0x53, 0x2a, 0x4d, 0x18, 5, 0, 0, 0]), Buffer.from('12345')]);
    const data = Buffer.concat([skip, fixture('small.zst'), skip, fixture('big.zst'), skip]);
    for (const chunk of [1, 5, 4096, 1 << 20]) {
      assert.equal(sha1(await decode(decompressor(CompressionCodec.ZSTANDARD)!, data, chunk)), sha1(SMALL + big()), `chunk ${chunk}`);
    }
  });

  it('the native decoder decodes our multi-frame output, frames split across reads', async () => {
    const input = Buffer.from(big().repeat(60)); // ~3 MiB
    const { ZstdCompressor } = await import('../../../../src/lib/codecs/index.js');
    const parts: Buffer[] = [];
    await pipeline(Readable.from([input]), new ZstdCompressor(256 * 1024), async (src: AsyncIterable<Buffer>) => {
      for await (const c of src) parts.push(c);
    });
    const stored = Buffer.concat(parts);
    for (const chunk of [777, 65_536, 1 << 20]) {
      assert.equal(sha1(await decode(decompressor(CompressionCodec.ZSTANDARD)!, stored, chunk)), sha1(input), `chunk ${chunk}`);
    }
  });

  it('the native decoder fails on a wrong content checksum and on a reserved block type', async () => {
    const small = Buffer.from(fixture('small.zst'));
    small[small.length - 1] ^= 0xff; // the checksum
    await assert.rejects(decode(decompressor(CompressionCodec.ZSTANDARD)!, small), /checksum/i);
    // Our frames: magic, descriptor 0x00, window byte, then the first block header.
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, Buffer.from(big()));
    assert.equal(stored[4], 0x00);
    stored[6] |= 0x06; // block type 3
    await assert.rejects(decode(decompressor(CompressionCodec.ZSTANDARD)!, stored), /reserved block type/);
  });
});
