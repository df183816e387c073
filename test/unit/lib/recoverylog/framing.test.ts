import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { RecordedOp } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { decodeFrames, encodeOpFrame, RecoveryLogError, type ContentChunk, type FrameEvent } from '../../../../src/lib/recoverylog/framing.js';
import { crc32c, crc32cPortable, nativeCrc32c } from '../../../../src/lib/recoverylog/crc32c.js';

const LOG = 'recovery/logs/a';

function op(p: Partial<RecordedOp>): RecordedOp {
  return { ...RecordedOp.fromPartial({}), ...p };
}

async function* chunks(data: Uint8Array, size: number, start = 0n): AsyncGenerator<ContentChunk> {
  for (let i = 0; i < data.length; i += size) yield { offset: start + BigInt(i), content: data.slice(i, i + size) };
}

async function all(it: AsyncIterable<FrameEvent>): Promise<FrameEvent[]> {
  const out: FrameEvent[] = [];
  for await (const e of it) out.push(e.kind === 'data' ? { ...e, bytes: e.bytes.slice() } : e.kind === 'op' ? { ...e, payload: e.payload.slice() } : e);
  return out;
}

function cat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

describe('encodeOpFrame', () => {
  it('writes the magic word, the little-endian length and the protobuf, never the meta-fields', () => {
    const o = op({ seq_no: 1n, checksum: 0x01020304, author: 0xaabbccdd, create: { path: '/a' }, first_offset: 99n, last_offset: 120n, log: 'x/y' });
    const f = encodeOpFrame(o);
    // seq_no=1 (08 01), checksum fixed32 (15 04 03 02 01), author fixed32 (1d dd cc bb aa), create {path "/a"} (22 04 0a 02 2f 61)
    const payload = '0801' + '1504030201' + '1dddccbbaa' + '22040a022f61';
    assert.equal(Buffer.from(f).toString('hex'), '66339336' + '12000000' + payload);
    assert.deepEqual(RecordedOp.decode(f.subarray(8)), { ...o, first_offset: 0n, last_offset: 0n, log: '' });
  });

  it('appends a write op\'s data and checks its length', () => {
    const o = op({ seq_no: 2n, author: 1, write: { fnode: 1n, offset: 0n, length: 3n } });
    const f = encodeOpFrame(o, Uint8Array.of(7, 8, 9));
    assert.deepEqual([...f.subarray(f.length - 3)], [7, 8, 9]);
    assert.throws(() => encodeOpFrame(o, Uint8Array.of(1)), RecoveryLogError);
    assert.throws(() => encodeOpFrame(op({ seq_no: 1n }), Uint8Array.of(1)), RecoveryLogError);
  });
});

describe('decodeFrames', () => {
  const a = op({ seq_no: 1n, author: 5, create: { path: '/f' } });
  const w = op({ seq_no: 2n, author: 5, write: { fnode: 1n, offset: 0n, length: 10n } });
  const n = op({ seq_no: 3n, author: 5 });
  const data = Uint8Array.from({ length: 10 }, (_, i) => 100 + i);
  const fa = encodeOpFrame(a);
  const fw = encodeOpFrame(w, data);
  const fn = encodeOpFrame(n);
  const log = cat(fa, fw, fn);

  it('decodes ops with offsets and data, split at every chunk size', async () => {
    for (let size = 1; size <= log.length; size++) {
      const evs = await all(decodeFrames(LOG, 1000n, chunks(log, size, 1000n)));
      const ops = evs.filter((e) => e.kind === 'op');
      assert.deepEqual(
        ops.map((e) => [e.op.seq_no, e.op.first_offset, e.op.last_offset, e.op.log]),
        [
          [1n, 1000n, 1000n + BigInt(fa.length), LOG],
          [2n, 1000n + BigInt(fa.length), 1000n + BigInt(fa.length + fw.length), LOG],
          [3n, 1000n + BigInt(fa.length + fw.length), 1000n + BigInt(log.length), LOG],
        ],
        `chunk size ${size}`,
      );
      // The payload is the protobuf exactly as written (the checksum runs over it).
      assert.deepEqual(ops[1]!.payload, fw.subarray(8, fw.length - 10));
      const got = Buffer.concat(evs.filter((e) => e.kind === 'data').map((e) => e.bytes));
      assert.deepEqual(new Uint8Array(got), data);
      // Data follows its op before the next op.
      const kinds = evs.map((e) => e.kind).filter((k, i, arr) => k !== arr[i - 1]);
      assert.deepEqual(kinds, ['op', 'data', 'op'], `chunk size ${size}`);
    }
  });

  it('ends cleanly at a frame boundary or on a lone newline, and fails inside a frame', async () => {
    assert.equal((await all(decodeFrames(LOG, 0n, chunks(cat(log, Uint8Array.of(0x0a)), 5)))).filter((e) => e.kind === 'op').length, 3);
    for (const cut of [3, 8, fa.length + 5, fa.length + fw.length - 2, log.length - 1]) {
      await assert.rejects(all(decodeFrames(LOG, 0n, chunks(log.subarray(0, cut), 4))), (e: Error) => e instanceof RecoveryLogError && e.message.startsWith(`${LOG}: unexpected EOF`));
    }
    await assert.rejects(all(decodeFrames(LOG, 0n, chunks(cat(log, Uint8Array.of(0x0a, 0x0a)), 5))), /unexpected EOF/);
  });

  it('skips garbage to the next magic word and reports the range', async () => {
    const garbage = Uint8Array.from({ length: 37 }, (_, i) => i);
    for (const size of [1, 4, 9, 1000]) {
      const evs = await all(decodeFrames(LOG, 0n, chunks(cat(fa, garbage, fn), size)));
      assert.deepEqual(evs.filter((e) => e.kind === 'op').map((e) => [e.op.seq_no, e.op.first_offset]), [
        [1n, 0n],
        [3n, BigInt(fa.length + garbage.length)],
      ]);
      const ranges = evs.flatMap((e) => (e.kind === 'desync' ? [[e.from, e.to]] : []));
      assert.equal(ranges[0]![0], BigInt(fa.length));
      assert.equal(ranges[ranges.length - 1]![1], BigInt(fa.length + garbage.length));
      for (let i = 1; i < ranges.length; i++) assert.equal(ranges[i]![0], ranges[i - 1]![1], 'contiguous ranges');
    }
  });

  it('reports a jump in the content and resumes there', async () => {
    async function* src(): AsyncGenerator<ContentChunk> {
      yield { offset: 0n, content: fa.slice(0, 5) }; // a partial frame, then the content jumps
      yield { offset: 500n, content: fn };
    }
    const evs = await all(decodeFrames(LOG, 0n, src()));
    assert.deepEqual(evs.map((e) => e.kind), ['jump', 'op']);
    assert.deepEqual(evs[0], { kind: 'jump', from: 5n, to: 500n });
    assert.equal((evs[1] as { op: RecordedOp }).op.first_offset, 500n);
  });

  it('names the journal and offset of an undecodable op', async () => {
    const bad = cat(Uint8Array.of(0x66, 0x33, 0x93, 0x36, 2, 0, 0, 0), Uint8Array.of(0x0a, 0x05));
    await assert.rejects(all(decodeFrames(LOG, 10n, chunks(bad, 100, 10n))), (e: Error) => e instanceof RecoveryLogError && e.message.includes(`${LOG}: offset 10`));
  });
});

describe('crc32c', () => {
  it('continues a checksum, natively and portably alike', () => {
    const data = Buffer.from('123456789');
    assert.equal(crc32c(data), 0xe3069283);
    assert.equal(crc32cPortable(data), 0xe3069283);
    assert.equal(crc32c(data.subarray(4), crc32c(data.subarray(0, 4))), 0xe3069283);
    const big = Buffer.alloc(100_000, 7);
    assert.equal(crc32c(big, 12345), crc32cPortable(big, 12345));
    assert.equal(typeof nativeCrc32c(), 'boolean');
  });
});

describe('crc32c native module', () => {
  it('is loaded at the first checksum, not when the module loads (every command start-up loads it)', () => {
    // A fresh process: this test file has computed checksums already.
    const url = new URL('../../../../src/lib/recoverylog/crc32c.js', import.meta.url).href;
    const script = `
      import { createRequire } from 'node:module';
      const cache = createRequire(import.meta.url).cache;
      const loaded = () => Object.keys(cache).some((f) => /[\\/]@node-rs[\\/]crc32/.test(f));
      const m = await import(${JSON.stringify(url)});
      const before = loaded();
      m.crc32c(Buffer.from('123456789'));
      console.log(JSON.stringify({ before, after: loaded(), native: m.nativeCrc32c() }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const { before, after, native } = JSON.parse(r.stdout) as { before: boolean; after: boolean; native: boolean };
    assert.equal(before, false);
    // Where the package has a binary for this platform, the first checksum loaded it.
    assert.equal(after, native);
  });
});
