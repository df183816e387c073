import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';

import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import {
  CoverSet,
  codecExtension,
  codecFromExtension,
  fragmentContentName,
  fragmentContentPath,
  fragmentLength,
  isZeroSum,
  parseFragmentPath,
  sumFromDigest,
  sumFromHex,
  sumToHex,
  zeroSum,
} from '../../../../src/lib/protocol/fragment.js';
import { CompressionCodec, type Fragment } from '../../../../src/lib/protocol/gen/broker/protocol.js';

const HEX = '0102030405060708090a0b0c0d0e0f1011121314';

function frag(begin: number, end: number, extra: Partial<Fragment> = {}): Fragment {
  return {
    journal: 'acme/a',
    begin: BigInt(begin),
    end: BigInt(end),
    sum: zeroSum(),
    compression_codec: CompressionCodec.NONE,
    backing_store: '',
    mod_time: 0n,
    path_postfix: '',
    ...extra,
  };
}

const ranges = (cs: CoverSet): [number, number][] => cs.members().map((f) => [Number(f.begin), Number(f.end)]);

describe('SHA1 sums', () => {
  it('splits a digest big-endian and round-trips through hex', () => {
    const sum = sumFromHex(HEX);
    assert.deepEqual(sum, { part1: 0x0102030405060708n, part2: 0x090a0b0c0d0e0f10n, part3: 0x11121314 });
    assert.equal(sumToHex(sum), HEX);
    const digest = createHash('sha1').update('hello').digest();
    assert.equal(sumToHex(sumFromDigest(digest)), digest.toString('hex'));
    assert.equal(sumToHex(sumFromHex('FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF')), 'f'.repeat(40));
  });
  it('knows the zero sum', () => {
    assert.equal(isZeroSum(zeroSum()), true);
    assert.equal(isZeroSum(undefined), true);
    assert.equal(isZeroSum(sumFromHex(HEX)), false);
    assert.equal(sumToHex(undefined), '0'.repeat(40));
  });
  it('rejects bad digests', () => {
    assert.throws(() => sumFromDigest(new Uint8Array(19)), ValidationError);
    assert.throws(() => sumFromHex('abc'), /must be 40 hex digits/);
    assert.throws(() => sumFromHex('g'.repeat(40)), ValidationError);
  });
});

describe('codecs', () => {
  it('maps codecs to extensions', () => {
    assert.equal(codecExtension(CompressionCodec.NONE), '.raw');
    assert.equal(codecExtension(CompressionCodec.GZIP), '.gz');
    assert.equal(codecExtension(CompressionCodec.ZSTANDARD), '.zst');
    assert.equal(codecExtension(CompressionCodec.SNAPPY), '.sz');
    assert.equal(codecExtension(CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION), '');
    assert.throws(() => codecExtension(CompressionCodec.INVALID), ValidationError);
  });
  it('maps extensions to codecs, case-insensitively', () => {
    const table: [string, CompressionCodec][] = [
      ['.raw', CompressionCodec.NONE],
      ['.gz', CompressionCodec.GZIP],
      ['.GZIP', CompressionCodec.GZIP],
      ['.zst', CompressionCodec.ZSTANDARD],
      ['.ZStandard', CompressionCodec.ZSTANDARD],
      ['.sz', CompressionCodec.SNAPPY],
      ['.snappy', CompressionCodec.SNAPPY],
      ['', CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION],
      ['.gzod', CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION],
    ];
    for (const [ext, codec] of table) assert.equal(codecFromExtension(ext), codec, ext);
    assert.throws(() => codecFromExtension('.bz2'), /unknown compression extension ".bz2"/);
  });
});

describe('fragment names and paths', () => {
  const f = frag(123, 456, { sum: sumFromHex(HEX), compression_codec: CompressionCodec.GZIP });
  it('builds the content name', () => {
    assert.equal(fragmentContentName(f), `000000000000007b-00000000000001c8-${HEX}.gz`);
    assert.equal(fragmentLength(f), 333n);
  });
  it('joins journal, postfix and name', () => {
    assert.equal(fragmentContentPath(f), `acme/a/000000000000007b-00000000000001c8-${HEX}.gz`);
    assert.equal(
      fragmentContentPath({ ...f, path_postfix: 'date=2019-11-19' }),
      `acme/a/date=2019-11-19/000000000000007b-00000000000001c8-${HEX}.gz`,
    );
  });
  it('round-trips every codec through parseFragmentPath', () => {
    for (const codec of [
      CompressionCodec.NONE,
      CompressionCodec.GZIP,
      CompressionCodec.ZSTANDARD,
      CompressionCodec.SNAPPY,
      CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION,
    ]) {
      for (const postfix of ['', 'date=2019-11-19', 'a/b']) {
        const g = { ...f, compression_codec: codec, path_postfix: postfix };
        const rel = fragmentContentPath(g).slice('acme/a/'.length);
        assert.deepEqual(parseFragmentPath('acme/a', rel), g, rel);
      }
    }
  });
  it('writes GZIP_OFFLOAD_DECOMPRESSION without an extension and also parses .gzod', () => {
    const g = { ...f, compression_codec: CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION };
    assert.equal(fragmentContentName(g), `000000000000007b-00000000000001c8-${HEX}`);
    const parsed = parseFragmentPath('acme/a', `000000000000007b-00000000000001c8-${HEX}.gzod`);
    assert.equal(parsed.compression_codec, CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION);
    assert.equal(parsed.begin, 123n);
    assert.equal(parseFragmentPath('acme/a', `0-1-${HEX}.GZ`).compression_codec, CompressionCodec.GZIP);
    // Offsets parse as hex int64, like strconv.ParseInt: extra leading zeros are fine.
    assert.equal(parseFragmentPath('acme/a', `00000000000000000001-2-${HEX}.raw`).begin, 1n);
  });
  it('rejects unparseable names', () => {
    const bad: [string, RegExp][] = [
      [`7b-1c8-${HEX}.bz2`, /unknown compression extension ".bz2"/],
      [`7b-1c8.gz`, /must have the form <begin>-<end>-<sha1>/],
      [`7b-1c8-${HEX}-x.gz`, /must have the form/],
      [`zz-1c8-${HEX}.gz`, /begin "zz" is not a hex offset/],
      [`7b-1c8-abc.gz`, /sum "abc" must be 40 hex digits/],
      [`1c8-7b-${HEX}.gz`, /begin 456 is after end 123/],
      [`8000000000000000-8000000000000001-${HEX}.gz`, /overflows int64/],
      [`/abs/7b-1c8-${HEX}.gz`, /must not begin with "\/"/],
    ];
    for (const [rel, re] of bad) {
      assert.throws(
        () => parseFragmentPath('acme/a', rel),
        (e: unknown) => e instanceof ValidationError && re.test(e.message) && e.message.includes(JSON.stringify(rel)),
        rel,
      );
    }
  });
});

describe('CoverSet', () => {
  it('ignores empty fragments', () => {
    const cs = new CoverSet();
    assert.equal(cs.add(frag(5, 5)), false);
    assert.equal(cs.size, 0);
  });
  it('appends increasing fragments and keeps partial overlaps', () => {
    const cs = new CoverSet([frag(0, 10), frag(10, 20), frag(15, 30)]);
    assert.deepEqual(ranges(cs), [[0, 10], [10, 20], [15, 30]]);
  });
  it('replaces the last member when the new one extends it from an earlier or equal begin', () => {
    const cs = new CoverSet([frag(0, 10), frag(10, 20)]);
    assert.equal(cs.add(frag(10, 25)), true);
    assert.deepEqual(ranges(cs), [[0, 10], [10, 25]]);
    assert.equal(cs.add(frag(5, 30)), true);
    assert.deepEqual(ranges(cs), [[0, 10], [5, 30]]);
  });
  it('rejects fragments strictly contained by a member', () => {
    const cs = new CoverSet([frag(0, 100)]);
    assert.equal(cs.add(frag(0, 50)), false);
    assert.equal(cs.add(frag(50, 100)), false);
    assert.equal(cs.add(frag(10, 20)), false);
    assert.deepEqual(ranges(cs), [[0, 100]]);
  });
  it('replaces an identical range: the later fragment wins, sums ignored', () => {
    const first = frag(0, 10, { sum: sumFromHex(HEX), backing_store: 's3://a/' });
    const second = frag(0, 10, { sum: zeroSum(), backing_store: 's3://b/' });
    const cs = new CoverSet([first, frag(10, 20)]);
    assert.equal(cs.add(second), true);
    assert.equal(cs.size, 2);
    assert.equal(cs.members()[0]!.backing_store, 's3://b/');
  });
  it('inserts a containing fragment and drops the members it contains', () => {
    const cs = new CoverSet([frag(0, 10), frag(10, 20), frag(20, 30), frag(30, 40)]);
    assert.equal(cs.add(frag(5, 30)), true);
    assert.deepEqual(ranges(cs), [[0, 10], [5, 30], [30, 40]]);
    assert.equal(cs.add(frag(0, 35)), true);
    assert.deepEqual(ranges(cs), [[0, 35], [30, 40]]);
  });
  it('keeps order when inserting in the middle', () => {
    const cs = new CoverSet([frag(0, 10), frag(20, 30)]);
    assert.equal(cs.add(frag(10, 20)), true);
    assert.deepEqual(ranges(cs), [[0, 10], [10, 20], [20, 30]]);
    assert.equal(cs.beginOffset(), 0n);
    assert.equal(cs.endOffset(), 30n);
  });
  it('reproduces the upstream fast-path quirk', () => {
    // The fast path only compares with the last member, so [0,10) survives under [0,30).
    const cs = new CoverSet([frag(0, 10), frag(10, 20)]);
    cs.add(frag(0, 30));
    assert.deepEqual(ranges(cs), [[0, 10], [0, 30]]);
  });
  it('finds the longest overlapping fragment', () => {
    const cs = new CoverSet([frag(0, 10), frag(5, 20), frag(18, 30), frag(40, 50)]);
    assert.deepEqual(ranges(new CoverSet([cs.longestOverlapping(3n)!])), [[0, 10]]);
    assert.equal(cs.longestOverlapping(7n)!.end, 20n);
    assert.equal(cs.longestOverlapping(18n)!.end, 30n);
    assert.equal(cs.longestOverlapping(10n)!.end, 20n);
    assert.equal(cs.longestOverlapping(35n), undefined);
    assert.deepEqual(cs.longestOverlappingIndex(35n), { index: 3, found: false });
    assert.equal(cs.longestOverlapping(50n), undefined);
    assert.equal(cs.longestOverlapping(45n)!.begin, 40n);
  });
});
