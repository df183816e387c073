// Parallel direct reads: a run of fragments fetched several at once comes out in offset order,
// holds a bounded number of decompressed bytes, and a failure mid-way stops the run exactly at
// the failure point; the Reader then goes on through the broker with no byte repeated or lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';

import { CompressionCodec, type Fragment, type ReadRequest } from '../../../../../src/lib/protocol/gen/broker/protocol.js';
import { JournalClient, type ReadChunk } from '../../../../../src/lib/index.js';
import { FragmentRunError, readFragmentRun, type RunItem, type RunEvent } from '../../../../../src/lib/client/direct/parallel-fetch.js';
import { startJournalStub } from '../../../../../src/testing/stubs.js';
import { bytes, fastDelay, fragment, fragmentBroker } from '../helpers.js';

/** A gate: `wait()` resolves once `open()` is called. */
function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { wait: () => p, open };
}

/** Stored bytes served as a stream of `piece`-sized chunks, after `before` resolves. */
function pieces(data: Buffer, piece: number, before?: () => Promise<void>): Readable {
  return Readable.from(
    (async function* () {
      if (before) await before();
      for (let i = 0; i < data.length; i += piece) yield data.subarray(i, i + piece);
    })(),
  );
}

async function drain(it: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

function contentOf(events: RunEvent[]): Buffer {
  return Buffer.concat(events.map((e) => e.content));
}

/** Splits `data` into fragments of `size` bytes of journal a/j. */
function split(data: Buffer, size: number, codec = CompressionCodec.NONE): Fragment[] {
  const out: Fragment[] = [];
  for (let b = 0; b < data.length; b += size) out.push(fragment('a/j', BigInt(b), BigInt(Math.min(b + size, data.length)), codec, 'file:///'));
  return out;
}

const slice = (data: Buffer, f: Fragment) => data.subarray(Number(f.begin), Number(f.end));

test('a run comes out in offset order even when later fragments arrive first, with at most N open', async () => {
  const data = bytes(60_000, 4);
  const frags = split(data, 10_000);
  let open = 0;
  let maxOpen = 0;
  const finished: number[] = [];
  // Fragment 0 delivers only once fragment 2 has been read to its end.
  const twoDone = gate();
  const items: RunItem[] = frags.map((f, i) => ({
    fragment: f,
    open: async () => {
      open++;
      maxOpen = Math.max(maxOpen, open);
      const s = pieces(slice(data, f), 1000, i === 0 ? twoDone.wait : undefined);
      s.once('end', () => {
        finished.push(i);
        if (i === 2) twoDone.open();
      });
      s.once('close', () => open--);
      return s;
    },
  }));
  const events = await drain(readFragmentRun(items, { concurrency: 3, from: 1234n }));
  assert.ok(contentOf(events).equals(data.subarray(1234)));
  let at = 1234n;
  for (const e of events) {
    assert.equal(e.offset, at, 'contiguous offsets');
    at += BigInt(e.content.length);
  }
  assert.deepEqual(
    events.filter((e) => e.content.length === 0).map((e) => e.index),
    [0, 1, 2, 3, 4, 5],
    'each fragment announced once, in order',
  );
  assert.ok(finished.indexOf(2) < finished.indexOf(0), `fragment 2 was fetched before fragment 0 finished: ${finished}`);
  assert.equal(maxOpen, 3, 'at most 3 fragments open at once');
});

test('fragments ahead of the head stop reading at the byte budget', async () => {
  const data = bytes(80_000, 8);
  const frags = split(data, 20_000);
  let max = 0;
  const items: RunItem[] = frags.map((f) => ({ fragment: f, open: async () => pieces(slice(data, f), 500) }));
  const it = readFragmentRun(items, { concurrency: 4, budgetBytes: 4000, onBuffered: (b) => (max = Math.max(max, b)) });
  const got: Buffer[] = [];
  for await (const e of it) {
    got.push(Buffer.from(e.content));
    // A slow writer: let every fetch run as far as it may before taking the next piece.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  }
  assert.ok(Buffer.concat(got).equals(data));
  // The head may hold up to the budget, the others together up to the budget, plus one piece each.
  assert.ok(max <= 2 * 4000 + 4 * 500, `at most twice the budget plus a piece per fragment held, saw ${max}`);
  assert.ok(max >= 4000, `the fetches ahead did fill the budget (saw ${max})`);
});

test('a failure mid-way stops the run at the failure point; the bytes before come once', async () => {
  const data = bytes(50_000, 2);
  const frags = split(data, 10_000);
  const items: RunItem[] = frags.map((f, i) => ({
    fragment: f,
    open: async () =>
      i === 2
        ? Readable.from(
            (async function* () {
              yield slice(data, f).subarray(0, 3000);
              throw new Error('connection reset');
            })(),
          )
        : pieces(slice(data, f), 1000),
  }));
  const events: RunEvent[] = [];
  await assert.rejects(
    (async () => {
      for await (const e of readFragmentRun(items, { concurrency: 4 })) events.push(e);
    })(),
    (err: unknown) => {
      assert.ok(err instanceof FragmentRunError);
      assert.equal(err.index, 2);
      assert.equal(err.offset, 23_000n);
      assert.match(err.message, /connection reset/);
      return true;
    },
  );
  assert.ok(contentOf(events).equals(data.subarray(0, 23_000)));
});

test('a short or long fragment is an error naming it; stopAt ends the run inside a fragment', async () => {
  const data = bytes(30_000, 6);
  const frags = split(data, 10_000);
  const short: RunItem[] = frags.map((f, i) => ({ fragment: f, open: async () => pieces(slice(data, f).subarray(0, i === 1 ? 9000 : undefined), 700) }));
  await assert.rejects(drain(readFragmentRun(short)), /unexpected EOF reading fragment a\/j \[10000, 20000\): ended at 19000, expected 20000/);
  const long: RunItem[] = frags.map((f, i) => ({ fragment: f, open: async () => pieces(i === 0 ? data.subarray(0, 10_001) : slice(data, f), 700) }));
  await assert.rejects(drain(readFragmentRun(long)), /holds more than its 10000 bytes/);
  const ok: RunItem[] = frags.map((f) => ({ fragment: f, open: async () => pieces(slice(data, f), 700) }));
  const events = await drain(readFragmentRun(ok, { from: 500n, stopAt: 15_555n }));
  assert.ok(contentOf(events).equals(data.subarray(500, 15_555)));
});

// ---- the Reader over a stub broker --------------------------------------------------------------

async function collect(it: AsyncIterable<ReadChunk>): Promise<{ data: Buffer; chunks: ReadChunk[] }> {
  const chunks: ReadChunk[] = [];
  for await (const c of it) chunks.push(c);
  return { data: Buffer.concat(chunks.map((c) => c.content)), chunks };
}

function writeFragments(root: string, data: Buffer, frags: Fragment[]): string[] {
  mkdirSync(join(root, 'a', 'j'), { recursive: true });
  return frags.map((f, i) => {
    const body = slice(data, f);
    const gz = i % 2 === 1;
    f.compression_codec = gz ? CompressionCodec.GZIP : CompressionCodec.NONE;
    const name = `f${i}${gz ? '.gz' : '.raw'}`;
    writeFileSync(join(root, 'a', 'j', name), gz ? gzipSync(body) : body);
    return `file:///a/j/${name}`;
  });
}

test('the Reader fetches the listed run of persisted fragments in one go, GZIP and NONE mixed', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-run-'));
  const data = bytes(70_000, 5);
  const frags = split(data, 10_000);
  const urls = writeFragments(root, data, frags);
  const stub = await startJournalStub(fragmentBroker(data, frags, urls));
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
  try {
    const reader = client.read({ journal: 'a/j', offset: 777n });
    const { data: got, chunks } = await collect(reader);
    assert.ok(got.equals(data.subarray(777)), 'every byte once, in order');
    assert.equal(reader.offset, 70_000n);
    // One Read hands out the first URL; the listing gives the rest; one more Read finds the head.
    const reads = stub.requests.filter((r) => r.method === 'read').map((r) => (r.request as ReadRequest).offset);
    assert.deepEqual(reads, [777n, 70_000n]);
    assert.equal(stub.requests.filter((r) => r.method === 'listFragments').length, 1);
    // Each fragment is announced before its content.
    assert.deepEqual(
      chunks.filter((c) => c.fragment).map((c) => c.fragment!.begin),
      frags.map((f) => f.begin),
    );
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

test('a fragment failing mid-run is read through the broker; no byte repeated or lost', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-run-'));
  const data = bytes(60_000, 7);
  const frags = split(data, 10_000);
  const urls = writeFragments(root, data, frags);
  // Fragment 2 (raw) is cut short: 4000 of its 10000 bytes are stored.
  writeFileSync(join(root, 'a', 'j', 'f2.raw'), slice(data, frags[2]!).subarray(0, 4000));
  const stub = await startJournalStub(fragmentBroker(data, frags, urls));
  const notes: string[] = [];
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
  try {
    const reader = client.read({ journal: 'a/j' }, { onRetry: (i) => notes.push((i.error as Error).message) });
    const { data: got, chunks } = await collect(reader);
    assert.ok(got.equals(data), 'every byte once, in order');
    let at = 0n;
    for (const c of chunks) {
      if (c.content.length === 0) continue;
      assert.equal(c.offset, at);
      at += BigInt(c.content.length);
    }
    assert.match(notes[0]!, /unexpected EOF reading fragment file:\/\/\/a\/j\/f2\.raw: ended at 24000, expected 30000/);
    const reads = stub.requests.filter((r) => r.method === 'read').map((r) => r.request as ReadRequest);
    // The run stopped at 24000; direct reads resumed there, and once they kept failing the broker
    // streamed the rest of fragment 2; from 30000 on, direct reads again.
    assert.equal(reads[1]!.offset, 24_000n);
    assert.ok(reads.some((r) => r.offset === 24_000n && !r.do_not_proxy), 'the broker served the failed fragment');
    assert.ok(reads.some((r) => r.offset === 30_000n && r.do_not_proxy), 'direct reads went on after it');
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});

test('parallel: 1 reads fragments one by one, as the broker hands out their URLs', async () => {
  const root = mkdtempSync(join(tmpdir(), 'gazctl-run-'));
  const data = bytes(30_000, 1);
  const frags = split(data, 10_000);
  const urls = writeFragments(root, data, frags);
  const stub = await startJournalStub(fragmentBroker(data, frags, urls));
  const client = new JournalClient({ address: stub.address, cacheSize: 8 }, { fileRoot: root, delay: fastDelay });
  try {
    const { data: got } = await collect(client.read({ journal: 'a/j' }, { parallel: 1 }));
    assert.ok(got.equals(data));
    const reads = stub.requests.filter((r) => r.method === 'read').map((r) => (r.request as ReadRequest).offset);
    assert.deepEqual(reads, [0n, 10_000n, 20_000n, 30_000n]);
    assert.equal(stub.requests.filter((r) => r.method === 'listFragments').length, 0);
  } finally {
    client.close();
    await stub.stop();
    rmSync(root, { recursive: true, force: true });
  }
});
