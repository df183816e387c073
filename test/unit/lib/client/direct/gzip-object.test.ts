// The whole-object GZIP inflate of direct reads (gzip-object.ts) where the native inflate does not
// take the object: no content length given, or the module turned off. It is Node's own gunzip
// stream, so it must give what zlib.gunzipSync gives, in pieces of at most PIECE_SIZE bytes.
// (The native path has its own tests: native-inflate.test.ts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { gunzipSync, gzipSync } from 'node:zlib';
import { createObjectInflate, gzipInflatePath } from '../../../../../src/lib/client/direct/gzip-object.js';
import { PIECE_SIZE, pieces } from '../../../../../src/lib/client/direct/piece-pool.js';
import { gzipShapes, headerShapes, inflateAll, textLines } from './gzip-shapes.js';

const SHAPES: [string, Buffer][] = [...gzipShapes(), ...headerShapes()];

for (const [name, stored] of SHAPES) {
  test(`zlib object inflate is byte for byte gunzipSync: ${name}`, async () => {
    const want = gunzipSync(stored);
    const got = await inflateAll(createObjectInflate(), stored);
    assert.equal(got.error, undefined, got.error?.message);
    assert.ok(Buffer.concat(got.chunks).equals(want), `${want.length} bytes`);
    assert.ok(got.chunks.every((c) => c.length > 0 && c.length <= PIECE_SIZE));
    for (const c of got.chunks) pieces.release(c); // not pooled: a no-op, as the contract says
  });
}

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
  const closed = new Promise<void>((r) => (inf as unknown as NodeJS.EventEmitter).once('close', () => r()));
  inf.end(stored);
  await closed;
  await new Promise((r) => setImmediate(r));
  assert.equal(after, 0);
  assert.equal(failed, undefined);
  assert.ok(Buffer.concat(seen).equals(gunzipSync(stored).subarray(0, seen[0]!.length + seen[1]!.length)));
});

test('which path inflates is named for the debug log, and GAZCTL_NATIVE_INFLATE=0 gives a gunzip stream', () => {
  assert.match(gzipInflatePath(), /^libdeflate \d+\.\d+.* \(native module\)$/);
  const mod = new URL('../../../../../src/lib/client/direct/gzip-object.js', import.meta.url).href;
  const script = `import(${JSON.stringify(mod)}).then(async (m) => {
    const zlib = await import('node:zlib');
    const inf = m.createObjectInflate(5);
    const out = [];
    inf.on('data', (c) => out.push(c));
    inf.on('end', () => console.log(JSON.stringify({ gunzip: inf instanceof zlib.Gunzip, ok: Buffer.concat(out).toString() === 'hello', path: m.gzipInflatePath() })));
    inf.end(zlib.gzipSync('hello'));
  });`;
  const run = (flag: string) =>
    JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, GAZCTL_NATIVE_INFLATE: flag }, encoding: 'utf8' })) as { gunzip: boolean; ok: boolean; path: string };
  assert.deepEqual(run('0'), { gunzip: true, ok: true, path: 'zlib gunzip stream (turned off by GAZCTL_NATIVE_INFLATE=0)' });
  const on = run('1');
  assert.deepEqual({ gunzip: on.gunzip, ok: on.ok }, { gunzip: false, ok: true });
  assert.match(on.path, /^libdeflate /);
});
