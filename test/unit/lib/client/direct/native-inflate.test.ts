// The native inflate of whole GZIP objects (src/native/gzip-inflate.c through native-inflate.ts and
// gzip-object.ts): it must be built on the test machines (scripts/setup.sh installs libdeflate-dev),
// give byte for byte what zlib.gunzipSync gives for every shape, leave to zlib exactly what it does
// not take on itself, and fail a corrupt object with the error a plain gunzip stream gives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { gunzipSync, gzipSync } from 'node:zlib';
import { createObjectInflate } from '../../../../../src/lib/client/direct/gzip-object.js';
import { nativeInflate, nativeInflateMissing } from '../../../../../src/lib/client/direct/native-inflate.js';
import { PIECE_OFFSET, PIECE_SIZE, PiecePool, pieces } from '../../../../../src/lib/client/direct/piece-pool.js';
import { assertFailsAsGunzip, corruptObjects, gzipMember, gzipShapes, headerShapes, inflateAll, textLines } from './gzip-shapes.js';

const SHAPES: [string, Buffer][] = [...gzipShapes(), ...headerShapes()];

test('the native inflate is built and loads here', () => {
  assert.equal(nativeInflateMissing(), '', 'scripts/setup.sh builds dist/native/gzip-inflate.node on the test machines');
  assert.match(nativeInflate()!.libdeflate, /^\d+\.\d+/);
});

test('the module inflates plain objects itself and answers -1 for what it leaves to zlib', async () => {
  const m = nativeInflate()!;
  const content = textLines(3 * PIECE_SIZE + 77, 3);
  const out = Buffer.alloc(content.length + 100);
  assert.equal(await m.inflate(gzipSync(content), out), content.length);
  assert.ok(out.subarray(0, content.length).equals(content));
  // Several members, padding, header fields: its own.
  const two = Buffer.concat([gzipSync(content.subarray(0, 1000)), gzipMember(content.subarray(1000), { name: 'n', extra: Buffer.from('xy') }), Buffer.alloc(9)]);
  assert.equal(await m.inflate(two, out), content.length);
  assert.ok(out.subarray(0, content.length).equals(content));
  // Left to zlib: no room, an empty object, not gzip, a header CRC, a bad trailer, garbage after a member.
  assert.equal(await m.inflate(gzipSync(content), Buffer.alloc(content.length - 1)), -1, 'content longer than the buffer');
  assert.equal(await m.inflate(Buffer.alloc(0), out), -1);
  assert.equal(await m.inflate(Buffer.from('not gzip at all'), out), -1);
  assert.equal(await m.inflate(gzipMember(content, { hcrc: true }), out), -1);
  const badCrc = gzipSync(content);
  badCrc[badCrc.length - 8]! ^= 1;
  assert.equal(await m.inflate(badCrc, out), -1);
  assert.equal(await m.inflate(Buffer.concat([gzipSync(content), Buffer.from('garbage!')]), out), -1);
  assert.throws(() => m.inflate('text' as unknown as Buffer, out), TypeError);
});

for (const [name, stored] of SHAPES) {
  test(`native object inflate is byte for byte gunzipSync: ${name}`, async () => {
    const want = gunzipSync(stored);
    // The content length as a fragment gives it; more (a fragment that says more than its object
    // holds); less (zlib takes the object over).
    for (const length of [want.length, want.length + PIECE_SIZE + 1, want.length - 1]) {
      if (length <= 0) continue;
      const got = await inflateAll(createObjectInflate(length), stored);
      assert.equal(got.error, undefined, got.error?.message);
      assert.ok(Buffer.concat(got.chunks).equals(want), `length ${length}: ${want.length} bytes`);
      assert.ok(got.chunks.every((c) => c.length > 0 && c.length <= PIECE_SIZE));
      // What the module inflates itself lies in pooled buffers from 64 KiB up (smaller pieces are
      // made on their own); what it leaves to zlib (too little room, a header CRC) comes in a
      // gunzip stream's own buffers.
      const own = (await nativeInflate()!.inflate(stored, Buffer.alloc(length))) >= 0;
      if (want.length >= 64 * 1024 && own) assert.ok(got.chunks.every((c) => pieces.owns(c)), 'every piece lies in a pooled buffer');
      for (const c of got.chunks) pieces.release(c);
    }
  });
}

for (const [name, stored] of corruptObjects()) {
  test(`native object inflate fails a corrupt object as a plain gunzip stream does: ${name}`, () =>
    assertFailsAsGunzip(createObjectInflate(3 * PIECE_SIZE), stored),
  );
}

test('a byte flipped anywhere in the deflate data never passes unnoticed', async () => {
  const content = textLines(PIECE_SIZE + 4321, 50);
  const good = gzipSync(content);
  for (let i = 0; i < 40; i++) {
    const at = 10 + Math.floor(((good.length - 18) * i) / 40);
    const bad = Buffer.from(good);
    bad[at]! ^= 0x55;
    const got = await inflateAll(createObjectInflate(content.length), bad);
    const out = Buffer.concat(got.chunks);
    for (const c of got.chunks) pieces.release(c);
    // The inflate fails (libdeflate leaves the object to zlib, whose stream may hand out content
    // before it finds the damage at the member's end, as before), or the flip changed nothing.
    if (!got.error) assert.ok(out.equals(content), `flip at ${at} passed with other content`);
  }
});

test('whole-content buffers: page-aligned views, given back with the last one, reused for the next object', async () => {
  const pool = new PiecePool();
  const a = pool.getWhole(3 * PIECE_SIZE + 5);
  assert.equal(a.byteOffset, PIECE_OFFSET);
  assert.equal(a.buffer.byteLength, 4 * PIECE_SIZE + PIECE_OFFSET, 'rounded up to whole pieces');
  const views = [a.subarray(0, PIECE_SIZE), a.subarray(PIECE_SIZE)];
  pool.retain(a);
  pool.release(views[0]!);
  assert.equal(pool.freeWholeCount, 0, 'one view is still out');
  pool.release(views[1]!);
  assert.equal(pool.freeWholeCount, 1);
  pool.release(views[1]!);
  assert.equal(pool.freeWholeCount, 1, 'a free buffer is not taken twice');
  const b = pool.getWhole(2 * PIECE_SIZE + 1);
  assert.equal(b.buffer, a.buffer, 'the free buffer is big enough');
  assert.equal(pool.freeWholeCount, 0);
  const c = pool.getWhole(5 * PIECE_SIZE);
  assert.notEqual(c.buffer, a.buffer);
  assert.equal(pool.get().buffer.byteLength, PIECE_SIZE + PIECE_OFFSET, 'pieces never come from whole buffers');
  // Free whole buffers are kept up to 64 MiB: seven of 8 MiB (each a page longer).
  const many = Array.from({ length: 12 }, () => pool.getWhole(8 << 20));
  for (const m of many) pool.release(m);
  assert.equal(pool.freeWholeCount, 7);
});

test('destroyed while the thread pool inflates: nothing comes out, and the buffer goes back once the work is done', async () => {
  const stored = gzipSync(textLines(6 * PIECE_SIZE, 44));
  while (pieces.freeWholeCount > 0) pieces.getWhole(PIECE_SIZE + 1); // earlier tests' free buffers, out of the way
  const freeBefore = pieces.freeWholeCount;
  const inf = createObjectInflate(6 * PIECE_SIZE);
  let seen = 0;
  let failed: Error | undefined;
  inf.on('data', () => seen++);
  inf.on('error', (e) => (failed = e));
  inf.end(stored);
  inf.destroy();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(seen, 0);
  assert.equal(failed, undefined);
  assert.equal(pieces.freeWholeCount, freeBefore + 1);
});

test('GAZCTL_NATIVE_INFLATE=0 turns it off: objects go through zlib', () => {
  const mod = new URL('../../../../../src/lib/client/direct/native-inflate.js', import.meta.url).href;
  const script = `import(${JSON.stringify(mod)}).then((m) => console.log(JSON.stringify({ on: m.nativeInflate() !== undefined, why: m.nativeInflateMissing() })))`;
  const run = (flag: string) => JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, GAZCTL_NATIVE_INFLATE: flag }, encoding: 'utf8' })) as { on: boolean; why: string };
  assert.deepEqual(run('0'), { on: false, why: 'turned off by GAZCTL_NATIVE_INFLATE=0' });
  assert.deepEqual(run('1'), { on: true, why: '' });
});
