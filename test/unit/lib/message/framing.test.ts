// Unit tests of src/lib/append/framing.ts: splitting `journals append` input into records
// (`lines`, `fixed`) and extracting partition keys.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FIXED_HEADER_LEN, FIXED_MAGIC, keyOfRecord, RecordSplitter } from '../../../../src/lib/message/framing.js';
import { GazctlError } from '../../../../src/lib/protocol/errors.js';

const s = (bufs: Buffer[]) => bufs.map((x) => x.toString('latin1'));

function frame(payload: string | Buffer): Buffer {
  const p = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const h = Buffer.alloc(FIXED_HEADER_LEN);
  FIXED_MAGIC.copy(h, 0);
  h.writeUInt32LE(p.length, 4);
  return Buffer.concat([h, p]);
}

describe('RecordSplitter: lines', () => {
  it('splits on \\n and keeps the newline in the record', () => {
    const sp = new RecordSplitter('lines');
    assert.deepEqual(s(sp.push(Buffer.from('a\nbb\n\nccc\n'))), ['a\n', 'bb\n', '\n', 'ccc\n']);
    assert.equal(sp.pending, 0);
    assert.equal(sp.offset, 10n);
  });

  it('carries a partial line into the next chunk', () => {
    const sp = new RecordSplitter('lines');
    assert.deepEqual(s(sp.push(Buffer.from('one\ntw'))), ['one\n']);
    assert.equal(sp.pending, 2);
    assert.deepEqual(s(sp.push(Buffer.from('o'))), []);
    assert.deepEqual(s(sp.push(Buffer.from('\nthree\r\n'))), ['two\n', 'three\r\n']);
    assert.equal(sp.pending, 0);
    assert.equal(sp.offset, 15n);
  });

  it('byte by byte gives the same records', () => {
    const input = Buffer.from('alpha\nbeta\n\ngamma delta\n');
    const sp = new RecordSplitter('lines');
    const out: Buffer[] = [];
    for (const byte of input) out.push(...sp.push(Buffer.from([byte])));
    assert.deepEqual(s(out), ['alpha\n', 'beta\n', '\n', 'gamma delta\n']);
  });

  it('reports a dangling partial line as pending', () => {
    const sp = new RecordSplitter('lines');
    sp.push(Buffer.from('done\nnot done'));
    assert.equal(sp.pending, 8);
    assert.equal(sp.offset, 5n);
  });

  it('pushBulk returns whole lines only, carrying the rest', () => {
    const sp = new RecordSplitter('lines');
    assert.equal(sp.pushBulk(Buffer.from('no newline yet')), undefined);
    assert.equal(sp.pushBulk(Buffer.from(' ok\nsecond\nthi'))!.toString(), 'no newline yet ok\nsecond\n');
    assert.equal(sp.pending, 3);
    assert.equal(sp.pushBulk(Buffer.from('rd\n'))!.toString(), 'third\n');
    assert.equal(sp.pending, 0);
    assert.equal(sp.offset, 31n);
  });
});

describe('RecordSplitter: fixed', () => {
  it('splits frames (magic 66 33 93 36, LE uint32 length, payload), header included', () => {
    const input = Buffer.concat([frame('hello'), frame(''), frame('x'.repeat(300))]);
    const sp = new RecordSplitter('fixed');
    const recs = sp.push(input);
    assert.equal(recs.length, 3);
    assert.deepEqual(recs[0], frame('hello'));
    assert.deepEqual(recs[1], frame(''));
    assert.deepEqual(recs[2], frame('x'.repeat(300)));
    assert.equal(sp.offset, BigInt(input.length));
    assert.equal(sp.pending, 0);
  });

  it('reassembles frames split anywhere across chunks', () => {
    const input = Buffer.concat([frame('first'), frame('second record'), frame('3')]);
    for (let cut = 1; cut < input.length; cut++) {
      const sp = new RecordSplitter('fixed');
      const recs = [...sp.push(input.subarray(0, cut)), ...sp.push(input.subarray(cut))];
      assert.deepEqual(
        recs.map((r) => r.subarray(FIXED_HEADER_LEN).toString()),
        ['first', 'second record', '3'],
        `cut at ${cut}`,
      );
      assert.equal(sp.pending, 0);
    }
  });

  it('pushEnds gives the same records as push, as end positions in one buffer', () => {
    const input = Buffer.concat([frame('first'), frame(''), frame('second record'), frame('3')]);
    for (let cut = 1; cut < input.length; cut++) {
      const a = new RecordSplitter('fixed');
      const b = new RecordSplitter('fixed');
      const ends: number[] = [99];
      for (const part of [input.subarray(0, cut), input.subarray(cut)]) {
        const want = a.push(part);
        const buf = b.pushEnds(part, ends);
        let pos = 0;
        const got = ends.map((e) => {
          const r = buf.subarray(pos, e);
          pos = e;
          return r;
        });
        assert.deepEqual(got, want, `cut at ${cut}`);
        assert.equal(b.offset, a.offset);
        assert.equal(b.pending, a.pending);
      }
    }
  });

  it('keeps an incomplete frame pending', () => {
    const sp = new RecordSplitter('fixed');
    const f = frame('abcdef');
    assert.deepEqual(sp.push(f.subarray(0, 10)), []);
    assert.equal(sp.pending, 10);
  });

  it('a bad magic word is a de-synchronisation error naming the input offset', () => {
    const sp = new RecordSplitter('fixed');
    const bad = Buffer.concat([frame('ok'), Buffer.from([0x66, 0x33, 0x93, 0x37, 1, 0, 0, 0, 0x41])]);
    assert.throws(
      () => sp.push(bad),
      (err: unknown) => err instanceof GazctlError && /magic/.test(err.message) && /offset 10\b/.test(err.message),
    );
  });
});

describe('keyOfRecord', () => {
  it('lines: the line without \\n or \\r\\n', () => {
    assert.equal(keyOfRecord(Buffer.from('user-1\n'), 'lines', false).toString(), 'user-1');
    assert.equal(keyOfRecord(Buffer.from('user-2\r\n'), 'lines', false).toString(), 'user-2');
    assert.equal(keyOfRecord(Buffer.from('\n'), 'lines', false).length, 0);
    // Only one line ending is stripped; inner \r stays.
    assert.equal(keyOfRecord(Buffer.from('a\rb\n'), 'lines', false).toString(), 'a\rb');
  });

  it('lines with --base64: decoded standard padded base64', () => {
    assert.deepEqual(keyOfRecord(Buffer.from('AP+A\n'), 'lines', true), Buffer.from([0x00, 0xff, 0x80]));
    assert.equal(keyOfRecord(Buffer.from('a2V5LTE=\r\n'), 'lines', true).toString(), 'key-1');
    assert.equal(keyOfRecord(Buffer.from('\n'), 'lines', true).length, 0);
  });

  for (const bad of ['not base64!\n', 'a2V5LTE\n', 'a2V5-TE=\n', 'a2V5_TE=\n']) {
    it(`--base64 rejects ${JSON.stringify(bad)}`, () => {
      assert.throws(() => keyOfRecord(Buffer.from(bad), 'lines', true), (err: unknown) => err instanceof GazctlError && /base64/.test(err.message));
    });
  }

  it('fixed: the payload of the key frame', () => {
    assert.equal(keyOfRecord(frame('acme/p-1'), 'fixed', false).toString(), 'acme/p-1');
    assert.equal(keyOfRecord(frame(''), 'fixed', false).length, 0);
  });
});

describe('RecordSplitter.pushBulkParts', () => {
  it('returns the same whole lines as pushBulk, in parts, carrying the rest', () => {
    const sp = new RecordSplitter('lines');
    assert.deepEqual(sp.pushBulkParts(Buffer.from('no newline yet')), []);
    assert.deepEqual(sp.pushBulkParts(Buffer.from(' ok\nsecond\nthi')).map(String), ['no newline yet ok\n', 'second\n']);
    assert.deepEqual(sp.pushBulkParts(Buffer.from('rd\n')).map(String), ['third\n']);
    assert.deepEqual(sp.pushBulkParts(Buffer.from('a\nb')).map(String), ['a\n']);
    assert.equal(sp.pending, 1);
  });
});
