// Fragments written by our persister, read back: from the real S3 server (objects decoded with
// the library's stores and decoders, SHA-1 checked, names parsed, signed URLs fetched, the index
// built from the listing), and from a file:// store served by a reference Go broker, which must
// list, parse and serve reads of them (codecs NONE, GZIP, SNAPPY, ZSTANDARD). The other way
// round, fragments the Go broker persists land in our index with the postfixes our template
// evaluator computes for them. And our broker (not just the persister) writes SNAPPY and
// ZSTANDARD fragments that Go gazctl reads (SNAPPY straight from the store, with its own
// decoder) and that a Go broker, taking over the journals on the same store, serves.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';

import { evaluatePostfixTemplate, FragmentIndex, Persister, Spool, walkAllStores, type LocalFragment } from '../../src/core/fragment/index.js';
import { decompressor } from '../../src/lib/codecs/index.js';
import { collectFragmentObjects } from '../../src/lib/fragment/listing.js';
import { fragmentContentPath, parseFragmentPath, sumToHex } from '../../src/lib/protocol/fragment.js';
import { CompressionCodec, JournalClient, JournalSpec, nanosToDuration, Status } from '../../src/lib/index.js';
import { FileStore, S3Store } from '../../src/lib/stores/index.js';
import { goBroker, pollUntil, runGoGazctl, startCluster, startS3, tsBroker, waitForJournalsAssigned, type Cluster, type S3Server } from '../../src/testing/index.js';

process.env.AWS_EC2_METADATA_DISABLED = 'true';
delete process.env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
delete process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI;

const CODECS = [CompressionCodec.NONE, CompressionCodec.GZIP, CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD];
const TEMPLATE = 'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}/';
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

/** Deterministic, compressible content of `n` lines. */
function content(tag: string, n: number): Buffer {
  let seed = tag.length * 7919;
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    lines.push(`${tag} line ${i} value ${seed % 100000} ${'y'.repeat(seed % 30)}\n`);
  }
  return Buffer.from(lines.join(''));
}

/** A closed spool of `journal` holding `data` at `begin`, appended in a few commits. */
function closed(journal: string, begin: bigint, data: Buffer, codec: CompressionCodec): LocalFragment {
  const s = new Spool(journal);
  s.applyProposal({ ...s.fragment, begin, end: begin, compression_codec: codec }, { labels: [] });
  for (let at = 0; at < data.length; at += 10_000) {
    s.apply(data.subarray(at, at + 10_000));
    assert.equal(s.applyProposal(s.next(), { labels: [] }).status, 0);
  }
  return s.roll()!;
}

async function decode(codec: CompressionCodec, stored: Buffer): Promise<Buffer> {
  const d = codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION ? decompressor(CompressionCodec.GZIP) : decompressor(codec);
  if (!d) return stored;
  const out: Buffer[] = [];
  await pipeline(Readable.from([stored]), d, async (src: AsyncIterable<Buffer | string>) => {
    for await (const c of src) out.push(Buffer.from(c));
  });
  return Buffer.concat(out);
}

function specOf(name: string, stores: string[], codec = CompressionCodec.GZIP): JournalSpec {
  return JournalSpec.fromPartial({
    name,
    replication: 1,
    fragment: {
      length: 1n << 20n,
      compression_codec: codec,
      stores,
      refresh_interval: nanosToDuration(1_000_000_000n),
      path_postfix_template: TEMPLATE,
    },
  });
}

describe('persisting to s3://', { timeout: 120_000 }, () => {
  let srv: S3Server;
  let store: S3Store;
  before(async () => {
    srv = await startS3({ bucket: 'persist-test' });
    store = new S3Store(srv.storeUrl('frags/'), { credentials: srv.credentials });
  });
  after(async () => {
    store?.close();
    await srv?.stop();
  });

  it('stores every codec at its content path; objects decode to their sums; the index lists them', async () => {
    const url = srv.storeUrl('frags/');
    const journal = 'persist/s3';
    const persister = new Persister({ openStore: () => store });
    const spec = specOf(journal, [url]);
    const parts: Buffer[] = [];
    let begin = 0n;
    const codecs = [...CODECS, CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION];
    for (const codec of codecs) {
      const data = content(CompressionCodec[codec]!, 3000);
      const lf = closed(journal, begin, data, codec);
      const f = await persister.persist(lf, spec);
      assert.ok(f);
      assert.equal(f.backing_store, url);
      assert.match(f.path_postfix, /^date=\d{4}-\d{2}-\d{2}$/);
      // Persisting the same spool again finds the object and leaves it alone.
      assert.deepEqual((await persister.persist(lf, spec))?.path_postfix, f.path_postfix);
      const stored = await store.get(fragmentContentPath(f));
      const back = await decode(codec, stored);
      assert.equal(sha1(back), sumToHex(f.sum));
      assert.ok(back.equals(data));
      if (codec !== CompressionCodec.NONE) assert.ok(stored.length < data.length / 2, `${CompressionCodec[codec]}: ${stored.length} of ${data.length}`);
      parts.push(data);
      begin += BigInt(data.length);
    }

    // The listing parses every object as a fragment; the index covers the whole range.
    const listed = await collectFragmentObjects([{ name: journal, fragment: { stores: [url] } }], { stores: { s3: { credentials: srv.credentials } } });
    assert.deepEqual(listed.unparseable, []);
    assert.equal(listed.objects.length, codecs.length);
    const set = await walkAllStores(journal, [url], () => store);
    const index = new FragmentIndex(journal, { openStore: () => store });
    index.replaceRemote(set);
    assert.equal(index.endOffset(), begin);
    assert.deepEqual(index.fragments().map((f) => f.compression_codec), codecs);

    // Signed URLs read the objects with a plain GET.
    const page = await index.list({ signatureTtlMs: 60_000 });
    for (const [i, lf] of page.fragments.entries()) {
      const res = await fetch(lf.signedUrl, { headers: { 'accept-encoding': 'identity' } });
      assert.equal(res.status, 200);
      let body: Buffer = Buffer.from(await res.arrayBuffer());
      const codec = lf.spec.compression_codec;
      // A GZIP_OFFLOAD object is stored gzipped with Content-Encoding: gzip, so fetch itself
      // gunzips it; only the other codecs are decoded here.
      if (codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION) assert.equal(res.headers.get('content-encoding'), 'gzip');
      else body = await decode(codec, body);
      assert.ok(body.equals(parts[i]!), `fragment ${i} (${CompressionCodec[codec]})`);
    }
  });
});

describe('a reference Go broker and our fragment layer on one file:// store', { timeout: 180_000 }, () => {
  const NAME = 'persist/go-reads';
  let cluster: Cluster | undefined;
  let client: JournalClient;

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    client = new JournalClient({ address: cluster.brokerAddress });
  });
  after(async () => {
    client?.close();
    await cluster?.stop();
  });

  it('reads the journal across our NONE, GZIP, SNAPPY and ZSTANDARD fragments', async () => {
    const persister = new Persister({ stores: { fileRoot: cluster!.fileRoot } });
    const spec = specOf(NAME, ['file:///']);
    const parts: Buffer[] = [];
    let begin = 0n;
    for (const codec of CODECS) {
      const data = content(`go-${CompressionCodec[codec]}`, 4000);
      assert.ok(await persister.persist(closed(NAME, begin, data, codec), spec));
      parts.push(data);
      begin += BigInt(data.length);
    }
    const want = Buffer.concat(parts);
    // The names parse as fragments for our listing too.
    const files = new FileStore('file:///', { root: cluster!.fileRoot });
    for await (const o of files.list(`${NAME}/`)) parseFragmentPath(NAME, o.path);

    await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
    await waitForJournalsAssigned(cluster!, [NAME], 30_000);
    const got = await pollUntil<Buffer>(
      'the Go broker reading our fragments',
      async () => {
        const chunks: Buffer[] = [];
        for await (const c of client.read({ journal: NAME, offset: 0n })) chunks.push(Buffer.from(c.content));
        const b = Buffer.concat(chunks);
        return b.length >= want.length ? b : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    assert.equal(got.length, want.length);
    assert.equal(sha1(got), sha1(want));
    // And the broker's fragment listing reports our four fragments with their codecs.
    const listing = await client.listFragments(NAME);
    assert.deepEqual(
      listing.map((f) => [f.spec!.compression_codec, f.spec!.path_postfix.replace(/^date=\d{4}-\d{2}-\d{2}$/, 'date')]),
      CODECS.map((c) => [c, 'date']),
    );
  });

  it("lists the Go broker's own fragments into our index, with the postfixes our evaluator gives", async () => {
    const name = 'persist/go-writes';
    const template = 'b={{ .Spool.Begin }}/c={{ .Spool.CompressionCodec }}/y={{ .Spool.FirstAppendTime.Format "2006" }}/';
    const spec = JournalSpec.fromPartial({
      name,
      replication: 1,
      fragment: {
        length: 32n * 1024n, // small, so the Go broker rolls and persists as we append
        compression_codec: CompressionCodec.SNAPPY,
        stores: ['file:///'],
        refresh_interval: nanosToDuration(1_000_000_000n),
        path_postfix_template: template,
      },
    });
    await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
    await waitForJournalsAssigned(cluster!, [name], 30_000);
    for (let a = 0; a < 4; a++) {
      const app = client.append(name);
      await app.write(content(`go-append-${a}`, 800));
      assert.equal((await app.commit()).status, Status.OK);
    }
    const open = (url: string) => new FileStore(url, { root: cluster!.fileRoot });
    const set = await pollUntil(
      'fragments persisted by the Go broker',
      async () => {
        const got = await walkAllStores(name, ['file:///'], open);
        return got.size >= 3 ? got : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    const index = new FragmentIndex(name, { openStore: open });
    index.replaceRemote(set);
    for (const f of index.fragments()) {
      assert.equal(f.compression_codec, CompressionCodec.SNAPPY);
      // The Go broker's first-append time is its own; take its year from the postfix.
      const year = Number(/\/y=(\d{4})$/.exec(f.path_postfix)?.[1]);
      assert.ok(year > 2000, f.path_postfix);
      const firstAppendTime = new Date(Date.UTC(year, 5, 1));
      const ours = evaluatePostfixTemplate(template, { journal: name, begin: f.begin, end: f.end, compressionCodec: f.compression_codec, firstAppendTime }, spec);
      assert.equal(f.path_postfix + '/', ours, `postfix of [${f.begin}, ${f.end})`);
      // The object decodes to its sum with our decoder.
      const stored = await open('file:///').get(fragmentContentPath(f));
      assert.equal(sha1(await decode(f.compression_codec, stored)), sumToHex(f.sum));
    }
    const q = await index.query({ offset: 0n });
    assert.equal(q.status, Status.OK);
    assert.equal(q.fragment.begin, 0n);
  });
});

describe('our broker persists SNAPPY and ZSTANDARD fragments; Go gazctl and a Go broker read them', { timeout: 240_000 }, () => {
  const JOURNALS: [string, CompressionCodec][] = [
    ['persist/ts-snappy', CompressionCodec.SNAPPY],
    ['persist/ts-zstd', CompressionCodec.ZSTANDARD],
  ];
  const TAIL = Buffer.from('the tail, left in the spool\n');
  let cluster: Cluster | undefined;

  before(async () => {
    // Broker 0 is ours, broker 1 the Go broker that takes over later; it is stopped (and its
    // member key removed) before the journals exist, so ours holds them all.
    cluster = await startCluster({ brokerImpls: [tsBroker, goBroker], ordered: true });
    await cluster.stopBroker(1, { releaseLease: true });
  });
  after(async () => {
    await cluster?.stop();
  });

  async function goRead(endpoint: string, journal: string, extra: string[] = []): Promise<Buffer> {
    const r = await runGoGazctl(['journals', 'read', '-l', `name=${journal}`, ...extra], { brokerAddress: endpoint, timeoutMs: 60_000 });
    assert.equal(r.code, 0, `Go gazctl journals read ${journal} via ${endpoint} failed (code ${r.code}):\n${r.stderr}`);
    return r.stdout;
  }

  it('Go gazctl reads them (SNAPPY straight from the store); a Go broker taking over on the same store serves them', async () => {
    const c = cluster!;
    const ours = c.brokers[0]!.endpoint;
    const client = new JournalClient({ address: ours });
    try {
      for (const [name, codec] of JOURNALS) {
        const spec = JournalSpec.fromPartial({
          name,
          replication: 1,
          fragment: { length: 16n * 1024n, compression_codec: codec, stores: ['file:///'], refresh_interval: nanosToDuration(1_000_000_000n) },
        });
        await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
      }
      await waitForJournalsAssigned(c, JOURNALS.map(([n]) => n), 30_000);

      // Appends of ~30 KB each: every one rolls the 16 KiB fragment before it, so all but the
      // tail get persisted.
      const want = new Map<string, Buffer>();
      for (const [name, codec] of JOURNALS) {
        const parts: Buffer[] = [];
        for (let a = 0; a < 5; a++) {
          const data = content(`${CompressionCodec[codec]}-${a}`, 700);
          const app = client.append(name);
          await app.write(data);
          assert.equal((await app.commit()).status, Status.OK);
          parts.push(data);
        }
        const app = client.append(name);
        await app.write(TAIL);
        assert.equal((await app.commit()).status, Status.OK);
        parts.push(TAIL);
        want.set(name, Buffer.concat(parts));
      }

      const files = new FileStore('file:///', { root: c.fileRoot });
      for (const [name, codec] of JOURNALS) {
        const all = want.get(name)!;
        const objects = await pollUntil(
          `${name}: our broker persisting every rolled fragment`,
          async () => {
            const got = await collectFragmentObjects([{ name, fragment: { stores: ['file:///'] } }], { stores: { fileRoot: c.fileRoot } });
            const end = got.objects.reduce((m, o) => (o.end > m ? o.end : m), 0n);
            return end >= BigInt(all.length - TAIL.length) ? got.objects : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 250 },
        );
        for (const o of objects) {
          assert.match(o.path, codec === CompressionCodec.SNAPPY ? /\.sz$/ : /\.zst$/);
          const stored = await files.get(o.path);
          assert.ok(stored.length < Number(o.end - o.begin) / 2, `${o.path} is compressed: ${stored.length} of ${o.end - o.begin}`);
          if (codec === CompressionCodec.ZSTANDARD) {
            assert.equal(sha1(execFileSync('zstd', ['-q', '-dc'], { input: stored, maxBuffer: 64 << 20 })), o.sum, `zstd -dc of ${o.path}`);
          }
        }
        // Proxied: our broker decodes its own objects for Go gazctl.
        const proxied = await goRead(ours, name);
        assert.equal(sha1(proxied), sha1(all), `${name}: Go gazctl read through our broker`);
        // Direct: our broker hands out file:// URLs, Go gazctl opens and decodes the objects
        // itself. Not for ZSTANDARD: the reference Go gazctl never finishes a direct read of
        // any persisted zstd fragment, a Go broker's own included (its pump asks the fragment
        // reader for EOF with an empty Read, which DataDog/zstd's reader answers with 0, nil),
        // so there the Go broker below is the Go decoder of our zstd objects.
        if (codec === CompressionCodec.SNAPPY) {
          const direct = await goRead(ours, name, ['--broker.cache.size', '16', '--file-root', c.fileRoot]);
          assert.equal(direct.length, all.length, `${name}: Go gazctl direct read`);
          assert.equal(sha1(direct), sha1(all), `${name}: Go gazctl direct read`);
        }
      }

      // Our broker goes; the Go broker comes back and takes the journals over from the store.
      await c.stopBroker(0, { releaseLease: true });
      await c.restartBroker(1);
      const go = c.brokers[1]!.endpoint;
      await waitForJournalsAssigned(c, JOURNALS.map(([n]) => n), 60_000);
      for (const [name] of JOURNALS) {
        const all = want.get(name)!;
        const listed = await collectFragmentObjects([{ name, fragment: { stores: ['file:///'] } }], { stores: { fileRoot: c.fileRoot } });
        const persistedEnd = Number(listed.objects.reduce((m, o) => (o.end > m ? o.end : m), 0n));
        assert.ok(persistedEnd >= all.length - TAIL.length, `${name}: ${persistedEnd} of ${all.length} bytes persisted`);
        const expect = all.subarray(0, persistedEnd);
        const got = await pollUntil(
          `${name}: the Go broker serving our fragments`,
          async () => {
            const out = await goRead(go, name);
            return out.length >= expect.length ? out : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 500 },
        );
        assert.equal(got.length, expect.length, `${name}: through the Go broker`);
        assert.equal(sha1(got), sha1(expect), `${name}: through the Go broker`);
      }
    } finally {
      client.close();
    }
  });
});
