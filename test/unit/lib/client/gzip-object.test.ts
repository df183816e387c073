// The whole-object GZIP inflate of direct reads (gzip-object.ts): the gzip framing read here, the
// deflate data by pooled raw inflate streams, the content checked with the native CRC-32. Its
// output must be byte for byte what zlib.gunzipSync gives, over the same shapes as the pooled
// gunzip stream and over every header field; a corrupt object must fail with the error a plain
// gunzip stream gives, after content of the object only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createGunzip, crc32 as zlibCrc32, gzipSync, gunzipSync } from 'node:zlib';
import { fastCrc32 } from '../../../../src/lib/client/crc32.js';
import { createObjectInflate, plainHeaderEnd, type ObjectInflate } from '../../../../src/lib/client/gzip-object.js';
import { PIECE_SIZE, pieces } from '../../../../src/lib/client/piece-pool.js';
import { assertFailsAsGunzip, corruptObjects, gzipMember as member, gzipShapes, headerShapes, inflateAll, textLines } from './gzip-shapes.js';

const SHAPES: [string, Buffer][] = [...gzipShapes(), ...headerShapes()];

test('the native CRC-32 loads here, and is the gzip CRC-32 continued across pieces', () => {
  const crc = fastCrc32();
  assert.ok(crc, '@node-rs/crc32 must load on this platform (the direct reads check GZIP content with it)');
  const data = textLines(3_000_000, 1);
  for (const cuts of [[0], [1, 2, 3], [PIECE_SIZE, 2 * PIECE_SIZE - 1], [17, 1_000_003, 2_500_000]]) {
    let c = 0;
    let from = 0;
    for (const at of [...cuts, data.length]) {
      c = crc(data.subarray(from, at), c);
      from = at;
    }
    assert.equal(c, zlibCrc32(data), `cut at ${cuts.join(', ')}`);
  }
});

test('plain member headers are read here; anything else is left to zlib', () => {
  const plain = gzipSync(Buffer.from('abc'));
  assert.equal(plainHeaderEnd(plain, 0), 10);
  assert.equal(plainHeaderEnd(member(Buffer.from('abc'), { name: 'nm', comment: 'c' }), 0), 10 + 3 + 2);
  assert.equal(plainHeaderEnd(member(Buffer.from('abc'), { extra: Buffer.from('xyz') }), 0), 10 + 2 + 3);
  assert.equal(plainHeaderEnd(member(Buffer.from('abc'), { hcrc: true }), 0), undefined);
  assert.equal(plainHeaderEnd(plain.subarray(0, 9), 0), undefined, 'a short header');
  assert.equal(plainHeaderEnd(Buffer.from('not gzip at all'), 0), undefined);
  const badMethod = Buffer.from(plain);
  badMethod[2] = 7;
  assert.equal(plainHeaderEnd(badMethod, 0), undefined);
  const reserved = Buffer.from(plain);
  reserved[3] = 0x20;
  assert.equal(plainHeaderEnd(reserved, 0), undefined);
  assert.equal(plainHeaderEnd(member(Buffer.from('abc'), { name: 'unterminated' }).subarray(0, 15), 0), undefined);
  assert.equal(plainHeaderEnd(member(Buffer.from('abc'), { extra: Buffer.alloc(100) }).subarray(0, 50), 0), undefined, 'an extra field past the end');
});

for (const [name, stored] of SHAPES) {
  test(`object inflate is byte for byte gunzipSync: ${name}`, async () => {
    const want = gunzipSync(stored);
    const got = await inflateAll(createObjectInflate(), stored);
    assert.equal(got.error, undefined, got.error?.message);
    assert.ok(Buffer.concat(got.chunks).equals(want), `${want.length} bytes`);
    assert.ok(got.chunks.every((c) => c.length > 0 && c.length <= PIECE_SIZE));
    assert.ok(got.chunks.every((c) => pieces.owns(c)), 'every piece lies in a pooled buffer');
    for (const c of got.chunks) pieces.release(c);
  });
}

for (const [name, stored] of corruptObjects()) {
  test(`a corrupt object fails as a plain gunzip stream fails: ${name}`, () => assertFailsAsGunzip(createObjectInflate(), stored));
}

test('a bad checksum fails after the member content, never with a wrong byte accepted', async () => {
  const content = textLines(PIECE_SIZE + 5000, 40);
  const stored = gzipSync(content);
  stored.writeUInt32LE((stored.readUInt32LE(stored.length - 8) + 1) >>> 0, stored.length - 8);
  const got = await inflateAll(createObjectInflate(), stored);
  assert.equal(got.error?.message, 'incorrect data check');
  assert.ok(Buffer.concat(got.chunks).equals(content.subarray(0, Buffer.concat(got.chunks).length)));
  for (const c of got.chunks) pieces.release(c);
});

test('destroyed while inflating: nothing more comes out, and no error', async () => {
  const stored = Buffer.concat([gzipSync(textLines(6 * PIECE_SIZE, 41)), gzipSync(textLines(6 * PIECE_SIZE, 42))]);
  const inf = createObjectInflate();
  const seen: Buffer[] = [];
  let after = 0;
  let failed: Error | undefined;
  inf.on('error', (e) => (failed = e));
  inf.on('data', (c) => {
    if (seen.length === 2) after++;
    else {
      seen.push(c);
      if (seen.length === 2) inf.destroy();
    }
  });
  inf.end(stored);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(after, 0);
  assert.equal(failed, undefined);
  assert.ok(Buffer.concat(seen).equals(gunzipSync(stored).subarray(0, seen[0]!.length + seen[1]!.length)));
  for (const c of seen) pieces.release(c);
});

test('without the native CRC-32 (GAZCTL_NATIVE_CRC32=0) the inflate is a pooled gunzip stream', async () => {
  const { execFileSync } = await import('node:child_process');
  const mod = new URL('../../../../src/lib/client/gzip-object.js', import.meta.url).href;
  const script = `import(${JSON.stringify(mod)}).then(async (m) => {
    const zlib = await import('node:zlib');
    const inf = m.createObjectInflate();
    const out = [];
    inf.on('data', (c) => out.push(c));
    inf.on('end', () => console.log(JSON.stringify({ gunzip: inf instanceof zlib.Gunzip, ok: Buffer.concat(out).toString() === 'hello' })));
    inf.end(zlib.gzipSync('hello'));
  });`;
  const run = (flag: string) => JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, GAZCTL_NATIVE_CRC32: flag }, encoding: 'utf8' })) as { gunzip: boolean; ok: boolean };
  assert.deepEqual(run('0'), { gunzip: true, ok: true });
  assert.deepEqual(run('1'), { gunzip: false, ok: true });
});
