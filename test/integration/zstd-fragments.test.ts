// ZSTANDARD fragments written by a reference Go broker decode with our zstd codec: the broker
// persists zstd-compressed fragments to a file:// store, the cross-store listing finds them, and
// each decompresses to bytes whose SHA-1 is the fragment's sum and which equal the journal's
// content over the fragment's offsets.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, test } from 'node:test';

import { collectFragmentObjects } from '../../src/lib/fragment/listing.js';
import type { FragmentObject } from '../../src/lib/fragment/objects.js';
import { CompressionCodec, JournalClient, JournalSpec, nanosToDuration, Status } from '../../src/lib/index.js';
import { decompressor } from '../../src/lib/codecs/index.js';
import { FileStore } from '../../src/lib/stores/index.js';
import { pollUntil, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';

const NAME = 'zstd/events';
let cluster: Cluster | undefined;
let client: JournalClient;

before(async () => {
  cluster = await startCluster({ brokers: 1 });
  client = new JournalClient({ address: cluster.brokerAddress });
  const spec = JournalSpec.fromPartial({
    name: NAME,
    replication: 1,
    fragment: {
      length: 64n * 1024n, // small fragments, so appends roll (and persist) several
      compression_codec: CompressionCodec.ZSTANDARD,
      stores: ['file:///'],
      refresh_interval: nanosToDuration(1_000_000_000n),
    },
  });
  await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
  await waitForJournalsAssigned(cluster, [NAME], 20_000);
});

after(async () => {
  client?.close();
  await cluster?.stop();
});

async function readAll(): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of client.read({ journal: NAME, offset: 0n })) parts.push(Buffer.from(chunk.content));
  return Buffer.concat(parts);
}

test('fragments a Go broker compressed with zstd decode to their sums and content', { timeout: 120_000 }, async () => {
  // Compressible, but not trivially: numbered lines with a pseudo-random field.
  let seed = 7;
  for (let a = 0; a < 5; a++) {
    const lines: string[] = [];
    for (let i = 0; i < 1500; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      lines.push(`append ${a} line ${i} value ${seed % 100000} ${'x'.repeat(seed % 40)}\n`);
    }
    const app = client.append(NAME);
    await app.write(Buffer.from(lines.join('')));
    assert.equal((await app.commit()).status, Status.OK);
  }
  const content = await readAll();
  assert.ok(content.length > 4 * 64 * 1024);

  // Fragments are persisted after they roll; wait until the listing holds at least three.
  const objects = await pollUntil<FragmentObject[]>(
    'persisted zstd fragments',
    async () => {
      const got = await collectFragmentObjects([{ name: NAME, fragment: { stores: ['file:///'] } }], { stores: { fileRoot: cluster!.fileRoot } });
      assert.deepEqual(got.unparseable, []);
      return got.objects.length >= 3 ? got.objects : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );

  const store = new FileStore('file:///', { root: cluster!.fileRoot });
  for (const o of objects) {
    assert.match(o.path, /\.zst$/);
    const stored = await store.get(o.path);
    const parts: Buffer[] = [];
    await pipeline(Readable.from([stored]), decompressor(CompressionCodec.ZSTANDARD)!, async (src: AsyncIterable<Buffer | string>) => {
      for await (const c of src) parts.push(Buffer.from(c));
    });
    const plain = Buffer.concat(parts);
    assert.ok(stored.length < plain.length, 'the fragment is compressed');
    assert.equal(BigInt(plain.length), o.end - o.begin, o.path);
    assert.equal(createHash('sha1').update(plain).digest('hex'), o.sum, o.path);
    assert.ok(plain.equals(content.subarray(Number(o.begin), Number(o.end))), o.path);
  }
});
