// Fragment files read on worker threads (read-workers.ts, read-worker.cts): the content must be
// what the main thread's sources give, byte for byte, over every GZIP shape the whole-object
// inflate is tested with; a corrupt object must fail with the error a plain gunzip stream gives;
// pieces go back to the workers when released, and a reader that never releases them is served
// all the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGunzip, gunzipSync, gzipSync } from 'node:zlib';
import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { openFragmentSource, type FragmentSource } from '../../../../src/lib/client/fragment-fetch.js';
import { readFragmentRun, type RunItem } from '../../../../src/lib/client/parallel-fetch.js';
import { PIECE_SIZE, pieces } from '../../../../src/lib/client/piece-pool.js';
import { readWorkersAvailable, startReadWorkers } from '../../../../src/lib/client/read-workers.js';
import { corruptObjects, headerShapes, inflateAll, textLines } from './gzip-shapes.js';
import { bytes, fragment } from './helpers.js';

const root = mkdtempSync(join(tmpdir(), 'gazctl-read-workers-'));
test.after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;

/** Writes `stored` as a fragment file: its file:// URL under `root`. */
function file(stored: Buffer, ext: string): string {
  const name = `f${files++}.${ext}`;
  writeFileSync(join(root, name), stored);
  return `file:///${name}`;
}

/** Reads a source to its end: the pieces (kept or released as asked), or the error. */
async function drain(src: FragmentSource, release = true): Promise<{ bytes: Buffer; pieces: Buffer[]; error?: Error }> {
  const got: Buffer[] = [];
  const kept: Buffer[] = [];
  try {
    for (let b = await src.next(); b !== null; b = await src.next()) {
      assert.ok(b.length > 0 && b.length <= PIECE_SIZE, `a piece of ${b.length} bytes`);
      got.push(Buffer.from(b));
      if (release) pieces.release(b);
      else kept.push(b);
    }
  } catch (e) {
    return { bytes: Buffer.concat(got), pieces: kept, error: e as Error };
  } finally {
    src.close();
  }
  return { bytes: Buffer.concat(got), pieces: kept };
}

function open(url: string, codec: CompressionCodec, length: number, o: { skip?: bigint; workers?: boolean } = {}): Promise<FragmentSource> {
  return openFragmentSource({ url, what: url }, codec, { fileRoot: root, length: BigInt(length), skip: o.skip, workers: o.workers ?? true });
}

test('workers are available here (the CLI reads file:// fragments on them)', () => {
  assert.equal(readWorkersAvailable(), true);
  startReadWorkers();
});

test('a NONE file: the whole content, from an offset, and short or long files as the main thread reads them', async () => {
  const data = bytes(5 * PIECE_SIZE + 12_345, 3);
  const url = file(data, 'raw');
  const whole = await drain(await open(url, CompressionCodec.NONE, data.length));
  assert.equal(whole.error, undefined);
  assert.ok(whole.bytes.equals(data));

  const from = await open(url, CompressionCodec.NONE, data.length, { skip: 3n * BigInt(PIECE_SIZE) + 7n });
  assert.equal(from.skipped, 3n * BigInt(PIECE_SIZE) + 7n, 'a NONE file is read from the offset, not before it');
  assert.ok((await drain(from)).bytes.equals(data.subarray(3 * PIECE_SIZE + 7)));

  // Told to expect fewer or more bytes than the file holds, each source hands out what the file
  // holds (readFragmentRun then fails the read with the sizes).
  for (const length of [data.length - 1000, data.length + 1000, 0]) {
    const w = await drain(await open(url, CompressionCodec.NONE, length));
    const m = await drain(await open(url, CompressionCodec.NONE, length, { workers: false }));
    assert.ok(w.bytes.equals(m.bytes), `expecting ${length}: ${w.bytes.length} bytes, the main thread ${m.bytes.length}`);
  }
  const empty = file(Buffer.alloc(0), 'raw');
  assert.equal((await drain(await open(empty, CompressionCodec.NONE, 0))).bytes.length, 0);
});

for (const [name, stored] of headerShapes()) {
  test(`a GZIP file read on a worker is byte for byte gunzipSync: ${name}`, async () => {
    const want = gunzipSync(stored);
    const got = await drain(await open(file(stored, 'gz'), CompressionCodec.GZIP, want.length));
    assert.equal(got.error, undefined, got.error?.message);
    assert.ok(got.bytes.equals(want), `${got.bytes.length} bytes, want ${want.length}`);
  });
}

for (const [name, stored] of corruptObjects()) {
  test(`a corrupt GZIP file fails on a worker as a plain gunzip stream fails: ${name}`, async () => {
    const plain = await inflateAll(createGunzip({ chunkSize: PIECE_SIZE }), stored);
    assert.ok(plain.error, 'the case is corrupt');
    const got = await drain(await open(file(stored, 'gz'), CompressionCodec.GZIP, 3 * PIECE_SIZE));
    assert.equal(got.error?.message, plain.error.message);
    assert.equal((got.error as NodeJS.ErrnoException | undefined)?.code, (plain.error as NodeJS.ErrnoException).code);
    assert.equal((got.error as NodeJS.ErrnoException | undefined)?.errno, (plain.error as NodeJS.ErrnoException).errno);
    // What came out before the failure is content of the object, in order.
    const p = Buffer.concat(plain.chunks);
    const short = got.bytes.length <= p.length ? got.bytes : p;
    const long = got.bytes.length <= p.length ? p : got.bytes;
    assert.ok(long.subarray(0, short.length).equals(short), `${got.bytes.length} bytes before the failure, a plain gunzip ${p.length}`);
  });
}

test('a missing file fails with the file system error, as on the main thread', async () => {
  const w = await drain(await open('file:///no-such-fragment.raw', CompressionCodec.NONE, 10));
  assert.match(w.error?.message ?? '', /^ENOENT: no such file or directory, open '.*no-such-fragment\.raw'$/);
  assert.equal((w.error as NodeJS.ErrnoException).code, 'ENOENT');
  const g = await drain(await open('file:///no-such-fragment.gz', CompressionCodec.GZIP, 10));
  assert.equal((g.error as NodeJS.ErrnoException).code, 'ENOENT');
});

test('a GZIP object larger than a whole-object inflate takes is read on the main thread', async () => {
  const content = textLines(3 * PIECE_SIZE, 31);
  const url = file(gzipSync(content), 'gz');
  const src = await openFragmentSource({ url, what: url }, CompressionCodec.GZIP, { fileRoot: root, length: BigInt(content.length), wholeMax: PIECE_SIZE, workers: true });
  assert.ok((await drain(src)).bytes.equals(content));
});

test('a reader that never releases its pieces is served all the same, in memory of their own', async () => {
  const data = bytes(40 * PIECE_SIZE, 5); // more pieces than the workers have slots
  const got = await drain(await open(file(data, 'raw'), CompressionCodec.NONE, data.length), false);
  assert.ok(got.bytes.equals(data));
  // Every piece stays as it was handed out, though none went back.
  assert.ok(Buffer.concat(got.pieces).equals(data));
  for (const p of got.pieces) pieces.release(p);
  // And the slots are back for the next read.
  const again = bytes(3 * PIECE_SIZE, 6);
  assert.ok((await drain(await open(file(again, 'raw'), CompressionCodec.NONE, again.length))).bytes.equals(again));
});

test('a source closed part way: later reads are whole, and the closed one hands out nothing more', async () => {
  const data = bytes(12 * PIECE_SIZE, 7);
  const url = file(data, 'raw');
  for (let i = 0; i < 20; i++) {
    const src = await open(url, CompressionCodec.NONE, data.length);
    const first = await src.next();
    assert.ok(first && first.equals(data.subarray(0, first.length)));
    pieces.release(first);
    src.close();
    assert.equal(await src.next(), null);
  }
  assert.ok((await drain(await open(url, CompressionCodec.NONE, data.length))).bytes.equals(data));
});

test('a run of NONE and GZIP fragments read on workers is the content, in order, with few pieces waiting', async () => {
  const items: RunItem[] = [];
  const parts: Buffer[] = [];
  let at = 0n;
  for (let i = 0; i < 24; i++) {
    const content = i % 3 === 2 ? bytes(PIECE_SIZE + i * 1000, i) : textLines(3 * PIECE_SIZE + i * 777, i);
    const gz = i % 2 === 1;
    const f = fragment('a/journal', at, at + BigInt(content.length), gz ? CompressionCodec.GZIP : CompressionCodec.NONE);
    items.push({ fragment: f, url: file(gz ? gzipSync(content) : content, gz ? 'gz' : 'raw') });
    parts.push(content);
    at = f.end;
  }
  const want = Buffer.concat(parts);
  for (const from of [0n, BigInt(PIECE_SIZE) + 3n]) {
    const got: Buffer[] = [];
    let most = 0;
    // `from` lies in the first fragment (a NONE one: read from there).
    const run = readFragmentRun(items, { fileRoot: root, workers: true, from, budgetBytes: 4 * PIECE_SIZE, onBuffered: (n) => (most = Math.max(most, n)) });
    for await (const ev of run) {
      got.push(Buffer.from(ev.content));
      ev.release();
    }
    assert.ok(Buffer.concat(got).equals(want.subarray(Number(from))));
    assert.ok(most <= 2 * 4 * PIECE_SIZE + 3 * PIECE_SIZE, `${most} bytes waited at most`);
  }
});

test('a process whose reads are done exits, with its workers idle', () => {
  const data = join(root, 'exit.raw');
  writeFileSync(data, bytes(3 * PIECE_SIZE, 9));
  const module = new URL('../../../../src/lib/client/fragment-fetch.js', import.meta.url).href;
  const script = `
    const { openFragmentSource } = await import(${JSON.stringify(module)});
    const src = await openFragmentSource({ url: 'file:///exit.raw', what: 'x' }, 1, { fileRoot: ${JSON.stringify(root)}, length: ${3 * PIECE_SIZE}n, workers: true });
    let n = 0;
    for (let b = await src.next(); b; b = await src.next()) n += b.length;
    console.log(n);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.signal, null, 'the process ended by itself');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), String(3 * PIECE_SIZE));
});
