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

import { canDecode, decompressor, ZstdDecoder } from '../../../../src/lib/codecs/index.js';
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

  for (const [name, make] of [
    ['ZstdDecoder', () => new ZstdDecoder()],
    ['decompressor(ZSTANDARD)', () => decompressor(CompressionCodec.ZSTANDARD)!],
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
});
