// The gunzip stream that inflates into pooled pieces relies on fields of Node's zlib streams
// (pooled-gunzip.ts). These tests fail when a Node upgrade changes them: the pooled path must be
// taken, its output must be byte for byte what zlib.gunzipSync gives over many shapes of gzip
// objects, a corrupt object must fail where a plain gunzip stream fails (after the same bytes,
// with the same error), and every pooled buffer must come back once its pieces are released.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createGunzip, gzipSync, gunzipSync } from 'node:zlib';
import { createPooledGunzip, createPooledInflateRaw, pooledGunzipWorks, zlibAllocationSkipped } from '../../../../src/lib/client/pooled-gunzip.js';
import { PIECE_SIZE, pieces } from '../../../../src/lib/client/piece-pool.js';
import { corruptGzip, gzipShapes, inflateAll, textLines, type Outcome } from './gzip-shapes.js';

const SHAPES = gzipShapes();

test('the pooled path is taken on this Node, and its pieces are pooled buffers', async () => {
  const { gunzip, pooled } = createPooledGunzip();
  assert.equal(pooled, true, "this Node's zlib streams no longer have the fields pooled-gunzip.ts relies on");
  const content = textLines(3 * PIECE_SIZE + 1000, 1);
  const got = await inflateAll(gunzip, gzipSync(content));
  assert.equal(got.error, undefined);
  assert.ok(Buffer.concat(got.chunks).equals(content));
  assert.ok(
    got.chunks.every((c) => pieces.owns(c)),
    'every piece lies in a pooled buffer',
  );
  assert.deepEqual(
    got.chunks.map((c) => c.length),
    [PIECE_SIZE, PIECE_SIZE, PIECE_SIZE, 1000],
  );
  assert.equal(new Set(got.chunks.map((c) => c.buffer)).size, 4, 'one buffer per piece');
  assert.ok(pooledGunzipWorks(), 'the check at the first output passed');
  for (const c of got.chunks) pieces.release(c);
});

for (const [name, stored] of SHAPES) {
  test(`pooled inflate is byte for byte gunzipSync: ${name}`, async () => {
    const want = gunzipSync(stored);
    const { gunzip, pooled } = createPooledGunzip();
    assert.ok(pooled);
    const got = await inflateAll(gunzip, stored);
    assert.equal(got.error, undefined);
    assert.ok(Buffer.concat(got.chunks).equals(want), `${want.length} bytes`);
    assert.ok(got.chunks.every((c) => c.length > 0 && c.length <= PIECE_SIZE));
    // The same pieces as a plain gunzip stream of the same chunk size cuts.
    const plain = await inflateAll(createGunzip({ chunkSize: PIECE_SIZE }), stored);
    assert.deepEqual(
      got.chunks.map((c) => c.length),
      plain.chunks.map((c) => c.length),
    );
    for (const c of got.chunks) pieces.release(c);
  });
}

test('pieces released while later ones inflate never carry later content; every buffer comes back', async () => {
  const content = textLines(12 * PIECE_SIZE, 12);
  const stored = gzipSync(content);
  for (let round = 0; round < 3; round++) {
    const { gunzip } = createPooledGunzip();
    const copies: Buffer[] = [];
    const held: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      gunzip.on('data', (c: Buffer) => {
        // Every other piece is copied and released at once (its buffer may be reused for the
        // next piece); the rest are held to the end, and must stay intact meanwhile.
        if (copies.length % 2 === 0) {
          copies.push(Buffer.from(c));
          pieces.release(c);
        } else {
          copies.push(c);
          held.push(c);
        }
      });
      gunzip.on('error', reject);
      gunzip.on('end', resolve);
      gunzip.end(stored);
    });
    assert.ok(Buffer.concat(copies).equals(content), `round ${round}`);
    for (const c of held) pieces.release(c);
    assert.ok(pieces.freeCount >= 2, 'released buffers are free again');
  }
});

for (const [name, stored] of corruptGzip().cases) {
  test(`a corrupt object fails where a plain gunzip stream fails: ${name}`, async () => {
    const plain = await inflateAll(createGunzip({ chunkSize: PIECE_SIZE }), stored);
    const { gunzip, pooled } = createPooledGunzip();
    assert.ok(pooled);
    const got = await inflateAll(gunzip, stored);
    assert.ok(Buffer.concat(got.chunks).equals(Buffer.concat(plain.chunks)), 'the same bytes before the failure');
    assert.equal(got.error?.message, plain.error?.message);
    assert.equal((got.error as NodeJS.ErrnoException | undefined)?.code, (plain.error as NodeJS.ErrnoException | undefined)?.code);
    for (const c of got.chunks) pieces.release(c);
  });
}

test('a stream destroyed while inflating keeps the buffer zlib may still be writing', async () => {
  const stored = gzipSync(textLines(16 * PIECE_SIZE, 31));
  const { gunzip } = createPooledGunzip();
  const seen: Buffer[] = [];
  await new Promise<void>((resolve) => {
    gunzip.once('close', () => resolve());
    gunzip.on('data', (c: Buffer) => {
      seen.push(c);
      if (seen.length === 2) gunzip.destroy();
    });
    gunzip.end(stored);
  });
  // The pieces seen are intact. Once they are released, the buffers behind them may go back,
  // except the one zlib was writing into when the stream was destroyed (its write may still be
  // under way on the thread pool): the next buffers handed out are never that one.
  const want = gunzipSync(stored);
  assert.ok(Buffer.concat(seen).equals(want.subarray(0, seen[0]!.length + seen[1]!.length)));
  const current = (gunzip as unknown as { _outBuffer: Buffer })._outBuffer;
  assert.ok(pieces.owns(current));
  for (const c of seen) pieces.release(c);
  const taken = Array.from({ length: 20 }, () => pieces.get());
  assert.ok(!taken.some((b) => b.buffer === current.buffer), 'the buffer under way stays out of the pool');
  assert.ok(taken.some((b) => b.buffer === seen[0]!.buffer), 'a buffer zlib had moved on from is free again');
  for (const b of taken) pieces.release(b);
});

/** Calls of Buffer.allocUnsafe for `size` bytes or more while `fn` runs. */
async function bigAllocations(fn: () => Promise<unknown>, size = PIECE_SIZE): Promise<number> {
  const real = Buffer.allocUnsafe;
  let n = 0;
  Buffer.allocUnsafe = ((len: number) => {
    if (len >= size) n++;
    return real(len);
  }) as typeof Buffer.allocUnsafe;
  try {
    await fn();
  } finally {
    Buffer.allocUnsafe = real;
  }
  return n;
}

test("zlib's own output buffers are skipped on this Node: no fresh PIECE_SIZE buffer per piece", async () => {
  assert.equal(zlibAllocationSkipped(), true, "this Node's lib/zlib.js no longer allocates its output as pooled-gunzip.ts expects");
  const content = textLines(6 * PIECE_SIZE + 99, 50);
  const stored = gzipSync(content);
  const cases: [string, () => NodeJS.ReadWriteStream, Buffer][] = [
    ['gunzip', () => createPooledGunzip().gunzip, stored],
    ['raw inflate', () => createPooledInflateRaw().inflate, stored.subarray(10, stored.length - 8)],
  ];
  for (const [name, make, input] of cases) {
    let got: Outcome | undefined;
    const n = await bigAllocations(async () => {
      got = await inflateAll(make(), input);
    });
    assert.equal(n, 0, `${name}: no allocation of a chunk by zlib`);
    assert.equal(got!.error, undefined);
    assert.ok(Buffer.concat(got!.chunks).equals(content), name);
    assert.ok(got!.chunks.every((c) => pieces.owns(c)));
    for (const c of got!.chunks) pieces.release(c);
  }
});

test('with GAZCTL_ZLIB_SKIP_ALLOCATION=0 zlib allocates its chunks as usual, and the output is the same', async () => {
  const { execFileSync } = await import('node:child_process');
  const mod = new URL('../../../../src/lib/client/pooled-gunzip.js', import.meta.url).href;
  const script = `import(${JSON.stringify(mod)}).then(async (m) => {
    const zlib = await import('node:zlib');
    const content = Buffer.alloc(5 * 2097152 + 7, 'gazette ');
    const real = Buffer.allocUnsafe;
    let big = 0;
    Buffer.allocUnsafe = (n) => { if (n >= 2097152) big++; return real(n); };
    const { gunzip, pooled } = m.createPooledGunzip();
    const out = [];
    gunzip.on('data', (c) => out.push(Buffer.from(c)));
    gunzip.on('end', () => console.log(JSON.stringify({ skipped: m.zlibAllocationSkipped(), pooled, big, same: Buffer.concat(out).equals(content) })));
    gunzip.end(zlib.gzipSync(content));
  });`;
  const run = (flag: string) =>
    JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, GAZCTL_ZLIB_SKIP_ALLOCATION: flag }, encoding: 'utf8' })) as { skipped: boolean; pooled: boolean; big: number; same: boolean };
  const off = run('0');
  assert.deepEqual({ ...off, big: off.big > 0 }, { skipped: false, pooled: true, big: true, same: true });
  assert.deepEqual(run('1'), { skipped: true, pooled: true, big: 0, same: true });
});
