// Compressing streams: every codec round-trips through our decoders, gzip and zstd output also
// through the system `gzip` and `zstd` tools, and the snappy block encoder through odd inputs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, it } from 'node:test';

import {
  compressBuffer,
  compressor,
  canEncode,
  decodeSnappyBlock,
  decompressor,
  encodeSnappyBlock,
  SNAPPY_STREAM_IDENTIFIER,
  xxh64,
  ZstdDecoder,
} from '../../../../src/lib/codecs/index.js';
import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';

const sha1 = (b: Buffer | string) => createHash('sha1').update(b).digest('hex');

function text(n: number): Buffer {
  let s = '';
  for (let i = 0; s.length < n; i++) s += `${i.toString(16).padStart(8, '0')} gazette fragment line ${(i * 7) % 97}\n`;
  return Buffer.from(s.slice(0, n));
}

/** Inputs that exercise block boundaries, runs, incompressible bytes and emptiness. */
const INPUTS: [string, () => Buffer][] = [
  ['empty', () => Buffer.alloc(0)],
  ['one byte', () => Buffer.from('x')],
  ['short text', () => Buffer.from('hello, fragment\n')],
  ['text of 300 KiB', () => text(300 * 1024)],
  ['random 200 KiB', () => randomBytes(200 * 1024)],
  ['a run of 400 KiB', () => Buffer.alloc(400 * 1024, 0x61)],
  ['exactly 64 KiB', () => text(65536)],
  ['exactly 128 KiB', () => text(128 * 1024)],
  ['mixed', () => Buffer.concat([text(70000), randomBytes(5000), Buffer.alloc(140000, 7), text(3)])],
];

const CODECS = [
  CompressionCodec.NONE,
  CompressionCodec.GZIP,
  CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION,
  CompressionCodec.SNAPPY,
  CompressionCodec.ZSTANDARD,
];

/** Feed `input` through `stream` in `chunk`-byte writes; the output bytes. */
async function through(stream: NodeJS.ReadWriteStream, input: Buffer, chunk = 10007): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for (let i = 0; i < input.length; i += chunk) pieces.push(input.subarray(i, i + chunk));
  const out: Buffer[] = [];
  await pipeline(Readable.from(pieces), stream, async (src: AsyncIterable<Buffer | string>) => {
    for await (const c of src) out.push(Buffer.from(c));
  });
  return Buffer.concat(out);
}

async function decodeWith(codec: CompressionCodec, stored: Buffer): Promise<Buffer> {
  const d = codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION ? decompressor(CompressionCodec.GZIP) : decompressor(codec);
  return d ? through(d, stored) : stored;
}

describe('compressor', () => {
  for (const codec of CODECS) {
    const name = CompressionCodec[codec];
    it(`${name} is encodable`, () => assert.equal(canEncode(codec), true));
    for (const [what, make] of INPUTS) {
      it(`${name} round-trips ${what} through our decoder`, async () => {
        const input = make();
        const stored = await through(compressor(codec), input);
        const back = await decodeWith(codec, stored);
        assert.equal(back.length, input.length);
        assert.equal(sha1(back), sha1(input));
      });
    }
  }

  it('NONE stores the bytes as they are', async () => {
    const input = text(5000);
    assert.deepEqual(await compressBuffer(CompressionCodec.NONE, input), input);
  });

  it('GZIP, SNAPPY and ZSTANDARD shrink text', async () => {
    const input = text(300 * 1024);
    for (const codec of [CompressionCodec.GZIP, CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD]) {
      const out = await compressBuffer(codec, input);
      assert.ok(out.length < input.length / 2, `${CompressionCodec[codec]}: ${out.length} of ${input.length}`);
    }
  });

  it('compressBuffer takes an iterable of chunks', async () => {
    const input = text(100000);
    const out = await compressBuffer(CompressionCodec.SNAPPY, [input.subarray(0, 3), input.subarray(3)]);
    assert.equal(sha1(await decodeWith(CompressionCodec.SNAPPY, out)), sha1(input));
  });

  it('compressBuffer rejects with the error of an input that fails part way', async () => {
    async function* failing() {
      yield text(1000);
      throw new Error('input went away');
    }
    for (const codec of [CompressionCodec.NONE, CompressionCodec.GZIP, CompressionCodec.ZSTANDARD]) {
      await assert.rejects(compressBuffer(codec, failing()), /input went away/, CompressionCodec[codec]);
    }
  });
});

describe('system tools read our output', () => {
  for (const [what, make] of INPUTS) {
    it(`gzip -dc reads GZIP of ${what}`, async () => {
      const input = make();
      const stored = await compressBuffer(CompressionCodec.GZIP, input);
      const back = execFileSync('gzip', ['-dc'], { input: stored, maxBuffer: 64 << 20 });
      assert.equal(sha1(back), sha1(input));
    });
    it(`zstd -dc reads ZSTANDARD of ${what} (checksum verified)`, async () => {
      const input = make();
      const stored = await compressBuffer(CompressionCodec.ZSTANDARD, input);
      // `zstd -t` fails on a wrong content checksum; -dc then gives the content.
      execFileSync('zstd', ['-q', '-t'], { input: stored });
      const back = execFileSync('zstd', ['-q', '-dc'], { input: stored, maxBuffer: 64 << 20 });
      assert.equal(sha1(back), sha1(input));
    });
  }

  it('zstd -t rejects a frame whose content checksum is wrong', async () => {
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, text(1000));
    stored[stored.length - 1] ^= 0xff;
    assert.throws(() => execFileSync('zstd', ['-q', '-t'], { input: stored, stdio: ['pipe', 'pipe', 'pipe'] }));
  });
});

describe('zstd frame writer', () => {
  it('ZstdDecoder (fzstd) reads it directly', async () => {
    const input = Buffer.concat([text(200000), Buffer.alloc(150000, 1)]);
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, input);
    assert.equal(sha1(await through(new ZstdDecoder(), stored)), sha1(input));
  });

  it('stores incompressible blocks raw', async () => {
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, randomBytes(1000));
    // header (6) + one raw block (3 + 1000) + checksum (4)
    assert.equal(stored.length, 1013);
    assert.equal(stored[6]! & 0x07, 0x01, 'last block, type raw');
  });

  it('writes compressed blocks for text, with long matches, long literals and far offsets', async () => {
    const far = randomBytes(100_000);
    const input = Buffer.concat([text(50_000), randomBytes(40_000), far.subarray(0, 5000), randomBytes(90_000), far.subarray(0, 5000), Buffer.alloc(300, 5), text(2000)]);
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, input);
    assert.ok(stored.length < input.length, `${stored.length} of ${input.length}`);
    assert.equal(sha1(await through(new ZstdDecoder(), stored)), sha1(input));
    execFileSync('zstd', ['-q', '-t'], { input: stored });
    assert.equal(sha1(execFileSync('zstd', ['-q', '-dc'], { input: stored, maxBuffer: 64 << 20 })), sha1(input));
  });

  it('round-trips inputs with every range of literal and match lengths (seeded)', async () => {
    let seed = 12345;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const parts: Buffer[] = [];
    for (let k = 0; k < 400; k++) {
      const kind = rnd(3);
      const len = [1, 3, 17, 70, 300, 5000, 40000][rnd(7)]!;
      if (kind === 0) parts.push(randomBytes(len));
      else if (kind === 1) parts.push(Buffer.from(Array.from({ length: len }, () => 97 + rnd(3))));
      else if (parts.length) parts.push(parts[rnd(parts.length)]!.subarray(0, len));
    }
    const input = Buffer.concat(parts);
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, input);
    assert.equal(sha1(await through(new ZstdDecoder(), stored)), sha1(input));
    assert.equal(sha1(execFileSync('zstd', ['-q', '-dc'], { input: stored, maxBuffer: 256 << 20 })), sha1(input));
  });

  it('turns a run into an RLE block', async () => {
    const stored = await compressBuffer(CompressionCodec.ZSTANDARD, Buffer.alloc(100000, 9));
    // header (6) + one RLE block (3 + 1) + checksum (4)
    assert.equal(stored.length, 14);
  });
});

describe('xxh64', () => {
  // Reference values of XXH64 with seed 0.
  it('matches known digests', () => {
    assert.equal(xxh64(Buffer.alloc(0)).toString(16), 'ef46db3751d8e999');
    assert.equal(xxh64(Buffer.from('a')).toString(16), 'd24ec4f1a98c6e5b');
    assert.equal(xxh64(Buffer.from('abc')).toString(16), '44bc2cf5ad770999');
  });

  it('agrees with the checksum the zstd CLI writes, for lengths across the 32-byte stripes', () => {
    for (const n of [31, 32, 33, 39, 63, 64, 100, 1000, 70001]) {
      const input = randomBytes(n);
      const frame = execFileSync('zstd', ['-q', '-c', '--check'], { input });
      const want = frame.readUInt32LE(frame.length - 4);
      assert.equal(Number(xxh64(input) & 0xffffffffn), want, `length ${n}`);
    }
  });
});

describe('snappy encoder', () => {
  it('opens the stream with the stream identifier', async () => {
    const out = await compressBuffer(CompressionCodec.SNAPPY, Buffer.from('abc'));
    assert.deepEqual(out.subarray(0, 10), SNAPPY_STREAM_IDENTIFIER);
  });

  it('writes an empty stream as the identifier alone', async () => {
    assert.deepEqual(await compressBuffer(CompressionCodec.SNAPPY, Buffer.alloc(0)), SNAPPY_STREAM_IDENTIFIER);
  });

  it('stores incompressible chunks uncompressed', async () => {
    const out = await compressBuffer(CompressionCodec.SNAPPY, randomBytes(1000));
    assert.equal(out[10], 0x01);
    assert.equal(out.length, 10 + 4 + 4 + 1000);
  });

  for (const [what, make] of [
    ['long matches', () => Buffer.alloc(70000, 3)],
    ['near copies (copy-1)', () => Buffer.from('abcdefgh'.repeat(20) + 'xyz' + 'abcdefgh'.repeat(3))],
    ['long literals', () => randomBytes(70000)],
    ['overlapping patterns', () => Buffer.from('ab'.repeat(1000) + 'abc'.repeat(1000))],
    ['text', () => text(65536)],
  ] as const) {
    it(`block round-trips ${what}`, () => {
      const input = make();
      assert.deepEqual(decodeSnappyBlock(encodeSnappyBlock(input)), input);
    });
  }

  it('block length varint covers sizes past 2^14', () => {
    const input = text(20000);
    const block = encodeSnappyBlock(input);
    assert.equal(block[0], (20000 & 0x7f) | 0x80);
    assert.equal(block[1], (20000 >>> 7) & 0x7f | 0x80);
    assert.equal(block[2], 20000 >>> 14);
  });
});
