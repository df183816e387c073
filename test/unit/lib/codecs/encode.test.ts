// Compressing streams: every codec round-trips through our decoders, gzip and zstd output also
// through the system `gzip` and `zstd` tools, and the snappy block codec through odd inputs;
// snappy and zstd both with the native packages and with the portable fallbacks (forced with
// setPortableCodecs), and each side's output read by the other.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';

import {
  codecBackends,
  compressBuffer,
  compressesFor,
  compressor,
  canEncode,
  decodeSnappyBlock,
  decompressor,
  encodeSnappyBlock,
  setPortableCodecs,
  SNAPPY_STREAM_IDENTIFIER,
  storedZstdFrame,
  ZstdCompressor,
  ZstdDecoder,
} from '../../../../src/lib/codecs/index.js';
import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';

const sha1 = (b: Buffer | string) => createHash('sha1').update(b).digest('hex');
const MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);

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

/** Runs `fn` with the portable codecs (`true`) or the native ones. */
async function withBackend<T>(portable: boolean, fn: () => Promise<T>): Promise<T> {
  setPortableCodecs(portable);
  try {
    return await fn();
  } finally {
    setPortableCodecs(false);
  }
}

for (const backend of ['native', 'portable'] as const) {
  describe(`${backend} codecs`, () => {
    before(() => setPortableCodecs(backend === 'portable'));
    after(() => setPortableCodecs(false));

    it(`the ${backend} implementations are in use (the native ones load on this platform)`, () => {
      assert.deepEqual(codecBackends(), { snappy: backend, zstdCompress: backend, crc32c: backend });
    });

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

      it(`GZIP, SNAPPY${backend === 'native' ? ' and ZSTANDARD' : ''} shrink text; compressesFor says which do`, async () => {
        const input = text(300 * 1024);
        for (const codec of [CompressionCodec.GZIP, CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD]) {
          const out = await compressBuffer(codec, input);
          const shrinks = backend === 'native' || codec !== CompressionCodec.ZSTANDARD;
          assert.equal(compressesFor(codec), shrinks, CompressionCodec[codec]);
          if (shrinks) assert.ok(out.length < input.length / 2, `${CompressionCodec[codec]}: ${out.length} of ${input.length}`);
          else assert.ok(out.length > input.length, `${CompressionCodec[codec]} stores: ${out.length} of ${input.length}`);
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
        for (const codec of [CompressionCodec.NONE, CompressionCodec.GZIP, CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD]) {
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
        it(`zstd -dc reads ZSTANDARD of ${what}`, async () => {
          const input = make();
          const stored = await compressBuffer(CompressionCodec.ZSTANDARD, input);
          execFileSync('zstd', ['-q', '-t'], { input: stored });
          const back = execFileSync('zstd', ['-q', '-dc'], { input: stored, maxBuffer: 64 << 20 });
          assert.equal(sha1(back), sha1(input));
        });
      }
    });

    describe('zstd frames', () => {
      it('ZstdDecoder (fzstd) reads them directly', async () => {
        const input = Buffer.concat([text(200000), Buffer.alloc(150000, 1)]);
        const stored = await compressBuffer(CompressionCodec.ZSTANDARD, input);
        assert.equal(sha1(await through(new ZstdDecoder(), stored)), sha1(input));
      });

      it('cuts the input into frames of frameBytes, which zstd and fzstd read as one content', async () => {
        const input = Buffer.concat([text(250_000), randomBytes(30_000), text(70_001)]);
        const stored = await through(new ZstdCompressor(100_000), input, 33_333);
        // 350,001 bytes in frames of 100,000: four frames (the magic could recur inside random
        // stored bytes, which would only add to the count).
        let frames = 0;
        for (let at = stored.indexOf(MAGIC); at >= 0; at = stored.indexOf(MAGIC, at + 4)) frames++;
        assert.ok(frames >= 4, `${frames} frames`);
        assert.equal(stored.indexOf(MAGIC), 0);
        execFileSync('zstd', ['-q', '-t'], { input: stored });
        assert.equal(sha1(execFileSync('zstd', ['-q', '-dc'], { input: stored, maxBuffer: 64 << 20 })), sha1(input));
        assert.equal(sha1(await through(new ZstdDecoder(), stored)), sha1(input));
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

      it('writes chunks of at most 64 KiB of content, compressed ones as type 0x00', async () => {
        const out = await compressBuffer(CompressionCodec.SNAPPY, text(200_000));
        const types: number[] = [];
        for (let at = 10; at < out.length; ) {
          types.push(out[at]!);
          at += 4 + out.readUIntLE(at + 1, 3);
        }
        assert.deepEqual(types, [0, 0, 0, 0]); // 65536 * 3 + 3392
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
        assert.equal(block[1], ((20000 >>> 7) & 0x7f) | 0x80);
        assert.equal(block[2], 20000 >>> 14);
      });
    });

    describe('snappy decoder', () => {
      it('refuses a block whose header claims more than the chunk limit, before decoding it', () => {
        // varint 2^24 then nothing: a corrupt header must not become a 16 MiB allocation.
        assert.throws(() => decodeSnappyBlock(Buffer.from([0x80, 0x80, 0x80, 0x08]), 65536), /exceeds 65536/);
      });

      it('refuses a corrupt block with a SnappyError', () => {
        const block = encodeSnappyBlock(text(5000));
        assert.throws(() => decodeSnappyBlock(block.subarray(0, block.length - 7)), /snappy: /);
      });

      it('decodes the same in any chunking of its input (chunks split inside headers and bodies)', async () => {
        const input = Buffer.concat([text(150_000), randomBytes(70_000), text(1000)]);
        const stored = await compressBuffer(CompressionCodec.SNAPPY, input);
        for (const size of [3, 4, 5, 7, 4096, 65_539, 1 << 20]) {
          assert.equal(sha1(await through(decompressor(CompressionCodec.SNAPPY)!, stored, size)), sha1(input), `reads of ${size} bytes`);
        }
      });

      it('refuses a data chunk whose checksum does not match', async () => {
        const out = await compressBuffer(CompressionCodec.SNAPPY, text(3000));
        out[14] ^= 1; // first byte of the masked CRC-32C
        await assert.rejects(decodeWith(CompressionCodec.SNAPPY, out), /checksum mismatch/);
      });
    });
  });
}

describe('GAZCTL_NATIVE_CODECS=0', () => {
  it('makes a process use the portable implementations, which still write and read every codec', () => {
    const lib = new URL('../../../../src/lib/codecs/index.js', import.meta.url).href;
    const script = `
      const m = await import(${JSON.stringify(lib)});
      const { Readable } = await import('node:stream');
      const input = Buffer.from('gazette '.repeat(50000));
      const out = {};
      for (const codec of [${CompressionCodec.SNAPPY}, ${CompressionCodec.ZSTANDARD}]) {
        const stored = await m.compressBuffer(codec, input);
        const parts = [];
        for await (const c of Readable.from([stored]).pipe(m.decompressor(codec))) parts.push(c);
        out[codec] = Buffer.concat(parts).equals(input);
      }
      console.log(JSON.stringify({ backends: m.codecBackends(), roundTrips: out }));`;
    const run = (env: NodeJS.ProcessEnv) =>
      JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' }));
    assert.deepEqual(run({ GAZCTL_NATIVE_CODECS: '0' }), {
      backends: { snappy: 'portable', zstdCompress: 'portable', crc32c: 'portable' },
      roundTrips: { [CompressionCodec.SNAPPY]: true, [CompressionCodec.ZSTANDARD]: true },
    });
    assert.deepEqual(run({ GAZCTL_NATIVE_CODECS: '' }).backends, { snappy: 'native', zstdCompress: 'native', crc32c: 'native' });
  });
});

describe('native and portable codecs read each other', () => {
  const input = Buffer.concat([text(300_000), randomBytes(20_000), Buffer.alloc(90_000, 4), text(12_345)]);
  for (const codec of [CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD]) {
    for (const [writer, reader] of [
      [false, true],
      [true, false],
    ] as const) {
      it(`${CompressionCodec[codec]} written ${writer ? 'portably' : 'natively'} decodes ${reader ? 'portably' : 'natively'}`, async () => {
        const stored = await withBackend(writer, () => compressBuffer(codec, input));
        const back = await withBackend(reader, () => decodeWith(codec, stored));
        assert.equal(sha1(back), sha1(input));
      });
    }
  }

  it('the portable zstd frame is stored blocks of at most 128 KiB with a valid header', () => {
    const data = text(300_000);
    const frame = storedZstdFrame(data);
    // header 6 bytes, then 128 KiB + 128 KiB + the rest, each with a 3-byte block header
    assert.equal(frame.length, 6 + 3 * 3 + data.length);
    assert.equal(frame.readUIntLE(6, 3), (128 * 1024) << 3); // raw, not last
    assert.equal(frame.readUIntLE(6 + 3 + 128 * 1024, 3), (128 * 1024) << 3);
    assert.equal(frame.readUIntLE(6 + 6 + 256 * 1024, 3), ((300_000 - 256 * 1024) << 3) | 1); // raw, last
    assert.deepEqual(storedZstdFrame(Buffer.alloc(0)), Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38, 0x01, 0x00, 0x00]));
    assert.equal(sha1(execFileSync('zstd', ['-q', '-dc'], { input: frame, maxBuffer: 64 << 20 })), sha1(data));
  });
});
