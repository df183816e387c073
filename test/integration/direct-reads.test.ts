// Direct reads of persisted fragments against a reference Go broker: parallel runs from a
// file:// store and from the real S3 server (broker-signed URLs), the time-window read
// (`journals read --from --to`, fragment mod times set with utimes on the file store),
// `journals fragments --verify` finding exactly the objects whose stored bytes were altered, and
// the Go broker's SNAPPY and ZSTANDARD fragments read and verified with our decoders.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient, Reader, type ReadTransport } from '../../src/lib/client/index.js';
import { fragmentContentPath } from '../../src/lib/protocol/fragment.js';
import { CompressionCodec, JournalSpec, type Fragment, type ReadRequest } from '../../src/lib/protocol/gen/broker/protocol.js';
import { nanosToDuration } from '../../src/lib/protocol/duration.js';
import { pollUntil, startCluster, startS3, waitForJournalsAssigned, type Cluster, type S3Server } from '../../src/testing/index.js';
import { describeResult, spawnGazctl } from '../helpers/cli.js';
import { gz, gzOk, listFragmentsAt, oneStderrLine, prng, tempDir } from '../helpers/journals.js';

process.env.AWS_EC2_METADATA_DISABLED = 'true';

/** Appends per journal: each one a fragment (1 KiB fragments roll before the next append). */
const NONE_SIZES = [3000, 5000, 4000];
const GZIP_SIZES = [6000, 2500, 7000];
const TAIL = 1500; // stays in the spool

function specOf(name: string, store: string, codec: CompressionCodec): JournalSpec {
  return JournalSpec.fromPartial({
    name,
    replication: 1,
    fragment: { length: 1024n, compression_codec: codec, stores: [store], refresh_interval: nanosToDuration(1_000_000_000n) },
  });
}

function textData(rand: () => number, size: number): Buffer {
  // Compressible but varied: words with numbers.
  const words = ['alpha', 'beta', 'gamma', 'delta', 'offset', 'fragment', 'journal', 'broker'];
  const parts: string[] = [];
  let n = 0;
  while (n < size) {
    const w = `${words[Math.floor(rand() * words.length)]}${Math.floor(rand() * 1000)} `;
    parts.push(w);
    n += w.length;
  }
  return Buffer.from(parts.join('')).subarray(0, size);
}

/**
 * Writes a journal of NONE fragments, then (after switching its spec to GZIP) GZIP fragments,
 * then a tail left in the spool; waits until the broker lists every rolled fragment as persisted.
 * Returns the journal's content and its persisted fragments. `phases` replaces the NONE and
 * GZIP runs by runs of other codecs.
 */
async function writeMixedJournal(
  client: JournalClient,
  cluster: Cluster,
  name: string,
  store: string,
  seed: number,
  phases: [CompressionCodec, number[]][] = [
    [CompressionCodec.NONE, NONE_SIZES],
    [CompressionCodec.GZIP, GZIP_SIZES],
  ],
): Promise<{ data: Buffer; persisted: Fragment[] }> {
  await client.apply([{ expect_mod_revision: 0n, upsert: specOf(name, store, phases[0]![0]), delete: '' }]);
  await waitForJournalsAssigned(cluster, [name], 30_000);
  const rand = prng(seed);
  const parts: Buffer[] = [];
  const append = async (size: number) => {
    const b = textData(rand, size);
    const a = client.append(name);
    await a.write(b);
    await a.commit();
    parts.push(b);
  };
  for (const [i, [codec, sizes]] of phases.entries()) {
    if (i > 0) {
      const listed = await client.list({ include: { labels: [{ name: 'name', value: name, prefix: false }] }, exclude: { labels: [] } });
      const rev = listed.journals[0]!.mod_revision;
      await client.apply([{ expect_mod_revision: rev, upsert: specOf(name, store, codec), delete: '' }]);
      // The broker picks up the new spec before the next fragment starts.
      await pollUntil(`the ${CompressionCodec[codec]} spec to reach the broker`, async () => {
        const l = await client.list({ include: { labels: [{ name: 'name', value: name, prefix: false }] }, exclude: { labels: [] } });
        return l.journals[0]!.spec!.fragment!.compression_codec === codec;
      }, { timeoutMs: 10_000, intervalMs: 100 });
      await new Promise((r) => setTimeout(r, 1500));
    }
    for (const s of sizes) await append(s);
  }
  await append(TAIL);
  const data = Buffer.concat(parts);
  const want = phases.reduce((n, [, sizes]) => n + sizes.length, 0);
  let persisted: Fragment[] = [];
  await pollUntil(
    `${name}: rolled fragments persisted`,
    async () => {
      const fs = await listFragmentsAt(cluster.brokerAddress, name);
      persisted = fs.filter((f) => f.mod_time !== 0n);
      return persisted.length === want;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  for (const [codec] of phases) assert.ok(persisted.some((f) => f.compression_codec === codec), `some ${CompressionCodec[codec]} fragments`);
  return { data, persisted };
}

/** A Reader over `client` that counts the Read and ListFragments RPCs it makes. */
function countingReader(client: JournalClient, journal: string, fileRoot?: string) {
  const counts = { reads: 0, listings: 0 };
  const transport: ReadTransport = {
    openRead: (req) => {
      counts.reads++;
      return client.openRead(req);
    },
    noteRoute: (j, r) => client.noteRoute(j, r),
    forgetRoute: (j) => client.forgetRoute(j),
    fileRoot,
    listFragments: (j, o) => {
      counts.listings++;
      return client.listFragments(j, o);
    },
  };
  const req: ReadRequest = { header: undefined, journal, offset: 0n, block: false, do_not_proxy: true, metadata_only: false, end_offset: 0n, begin_mod_time: 0n, min_etcd_revision: 0n };
  return { reader: new Reader(transport, req, { parallel: 4 }), counts };
}

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

describe('direct reads from a file:// store (reference Go broker)', { timeout: 240_000 }, () => {
  let cluster: Cluster;
  let client: JournalClient;
  let tmp: { dir: string; cleanup: () => void };
  let mixed: { data: Buffer; persisted: Fragment[] };

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    tmp = tempDir('gazctl-direct-');
    client = new JournalClient({ address: cluster.brokerAddress, cacheSize: 16 }, { fileRoot: cluster.fileRoot });
    mixed = await writeMixedJournal(client, cluster, 'direct/mixed', 'file:///', 11);
  });
  after(async () => {
    client?.close();
    await cluster?.stop();
    tmp?.cleanup();
  });

  test('a direct read fetches the persisted run in one go, then the spool from the broker', async () => {
    const { reader, counts } = countingReader(client, 'direct/mixed', cluster.fileRoot);
    const got = await reader.readAll();
    assert.equal(got.length, mixed.data.length);
    assert.ok(got.equals(mixed.data), 'every byte once, in order');
    // One Read hands out the first URL, the listing gives the other five; then one Read for the
    // spool (a second may find the head). Fragment by fragment would take seven Reads or more.
    assert.equal(counts.listings, 1);
    assert.ok(counts.reads <= 3, `${counts.reads} Read RPCs`);
  });

  test('journals read with a route cache and --file-root reads every byte once', async () => {
    const out = join(tmp.dir, 'direct.out');
    await gzOk(cluster, ['journals', 'read', '-l', 'name=direct/mixed', '--broker.cache.size', '16', '--file-root', cluster.fileRoot, '-o', out]);
    assert.ok(readFileSync(out).equals(mixed.data));
    const proxied = await gzOk(cluster, ['journals', 'read', '-l', 'name=direct/mixed']);
    assert.ok(proxied.stdout.equals(mixed.data), 'the same through the broker');
  });

  test('a read whose stdout reader has gone (`| head`) stops quietly with 141, as Go gazctl (SIGPIPE)', async () => {
    for (const direct of [false, true]) {
      const args = ['journals', 'read', '-l', 'name=direct/mixed', ...(direct ? ['--broker.cache.size', '16', '--file-root', cluster.fileRoot] : [])];
      const p = spawnGazctl(args, { env: { BROKER_ADDRESS: cluster.brokerAddress } });
      p.child.stdout!.destroy(); // the reader closes its end before any content is written
      const r = await p.result;
      assert.equal(r.code, 141, `${direct ? 'direct' : 'proxied'}: ${describeResult(args, r)}`);
      assert.equal(r.stderr, '', 'no message: the reader has what it wanted');
    }
    // A file output that fails is still reported, with exit 1.
    const bad = join(tmp.dir, 'no-such-dir', 'out');
    const args = ['journals', 'read', '-l', 'name=direct/mixed', '-o', bad];
    const r = await spawnGazctl(args, { env: { BROKER_ADDRESS: cluster.brokerAddress } }).result;
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(oneStderrLine(args, r), /cannot write output: ENOENT/);
  });

  test('--from/--to read exactly the fragments persisted in the window, in order, and stop', async () => {
    const ps = [...mixed.persisted].sort((a, b) => Number(a.begin - b.begin));
    const now = Math.floor(Date.now() / 1000);
    const inside = now - 48 * 3600;
    const outside = now - 72 * 3600;
    // Fragments 1, 2 and 4 in the window, 0 and 3 before it, 5 keeps its (recent) time.
    const times = [outside, inside, inside, outside, inside + 60];
    times.forEach((t, i) => utimesSync(join(cluster.fileRoot, fragmentContentPath(ps[i]!)), t, t));
    await pollUntil(
      'the broker to list the new mod times',
      async () => {
        const fs = await listFragmentsAt(cluster.brokerAddress, 'direct/mixed');
        return times.every((t, i) => fs.some((f) => f.begin === ps[i]!.begin && f.mod_time === BigInt(t)));
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const slice = (f: Fragment) => mixed.data.subarray(Number(f.begin), Number(f.end));
    const want = Buffer.concat([slice(ps[1]!), slice(ps[2]!), slice(ps[4]!)]);
    const iso = (t: number) => new Date(t * 1000).toISOString().replace('.000', '');
    const variants: [string, string[]][] = [
      ['durations ago, direct', ['--from', '50h', '--to', '46h', '--broker.cache.size', '16', '--file-root', cluster.fileRoot]],
      ['unix seconds, through the broker', ['--from', String(inside - 10), '--to', String(inside + 100)]],
      ['RFC 3339, both ends inclusive', ['--from', iso(inside), '--to', iso(inside + 60)]],
    ];
    for (const [what, flags] of variants) {
      const offsetsOut = join(tmp.dir, `offsets-${what.replace(/\W+/g, '-')}.json`);
      const args = ['journals', 'read', '-l', 'name=direct/mixed', ...flags, '--offsets-out', offsetsOut];
      const r = await gzOk(cluster, args);
      assert.equal(r.stdout.length, want.length, `${what}: ${r.stdout.length} bytes`);
      assert.ok(r.stdout.equals(want), `${what}: exactly fragments 1, 2 and 4`);
      assert.equal(readFileSync(offsetsOut, 'utf8'), `{"direct/mixed":${ps[4]!.end}}\n`, `${what}: the offset after the window`);
    }
    // A window with nothing in it reads nothing and records the start offset.
    const none = await gzOk(cluster, ['journals', 'read', '-l', 'name=direct/mixed', '--from', '100h', '--to', '80h']);
    assert.equal(none.stdout.length, 0);
  });

  test('fragments: a totals line; --verify reports exactly the altered raw and gzip objects', async () => {
    const v = await writeMixedJournal(client, cluster, 'direct/verify', 'file:///', 23);
    const ps = [...v.persisted].sort((a, b) => Number(a.begin - b.begin));
    const table = await gzOk(cluster, ['journals', 'fragments', '-l', 'name=direct/verify', '--totals', '--verify', '--file-root', cluster.fileRoot]);
    const text = table.stdout.toString('utf8');
    const total = v.data.length;
    const persistedBytes = ps.reduce((n, f) => n + Number(f.end - f.begin), 0);
    assert.match(text, /^Total: 7 fragments, [\d.]+ KiB: 6 persisted \([\d.]+ KiB\), 1 spooled \(1\.5 KiB\)$/m);
    assert.match(text, /^Verified: 6 persisted fragments, 0 failed$/m);
    const json = await gzOk(cluster, ['journals', 'fragments', '-l', 'name=direct/verify', '-o', 'json', '--totals']);
    const last = json.stdout.toString('utf8').trim().split('\n').at(-1)!;
    assert.equal(last, `{"totals":{"fragments":7,"bytes":${total},"persisted":{"fragments":6,"bytes":${persistedBytes}},"spooled":{"fragments":1,"bytes":${TAIL}}}}`);

    // Flip one byte of a raw object and one of a gzip object.
    const raw = ps.find((f) => f.compression_codec === CompressionCodec.NONE && f.begin > 0n)!;
    const gzf = ps.filter((f) => f.compression_codec === CompressionCodec.GZIP)[1]!;
    for (const f of [raw, gzf]) {
      const p = join(cluster.fileRoot, fragmentContentPath(f));
      const b = readFileSync(p);
      const at = Math.floor(b.length / 2);
      b[at] = b[at]! ^ 0x10;
      writeFileSync(p, b);
    }
    const args = ['journals', 'fragments', '-l', 'name=direct/verify', '--verify', '--file-root', cluster.fileRoot, '-o', 'json'];
    const r = await gz(cluster, args);
    assert.equal(r.code, 1, describeResult(args, r));
    assert.equal(oneStderrLine(args, r), 'gazctl: --verify: 2 of 6 persisted fragments failed verification');
    const failed = r.stdout
      .toString('utf8')
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{"verify_failed"'))
      .map((l) => JSON.parse(l).verify_failed as { begin?: number; end: number; problem: string; path: string; reason: string });
    assert.deepEqual(
      failed.map((f) => [f.begin, f.end]).sort((a, b) => a[0]! - b[0]!),
      [raw, gzf].map((f) => [Number(f.begin), Number(f.end)]),
      'exactly the two altered objects',
    );
    const rawOut = failed.find((f) => f.begin === Number(raw.begin))!;
    assert.equal(rawOut.problem, 'sum');
    assert.match(rawOut.reason, new RegExp(`its name says ${sha1(v.data.subarray(Number(raw.begin), Number(raw.end)))}`));
    assert.equal(rawOut.path, fragmentContentPath(raw));
    assert.ok(['sum', 'unreadable'].includes(failed.find((f) => f.begin === Number(gzf.begin))!.problem));
  });

  test("the Go broker's SNAPPY and ZSTANDARD fragments: journals read (direct and proxied) and fragments --verify decode them", async () => {
    const c = await writeMixedJournal(client, cluster, 'direct/codecs', 'file:///', 41, [
      [CompressionCodec.SNAPPY, [6000, 2500, 7000]],
      [CompressionCodec.ZSTANDARD, [5000, 8000, 3000]],
    ]);
    for (const f of c.persisted) {
      const stored = readFileSync(join(cluster.fileRoot, fragmentContentPath(f))).length;
      assert.ok(stored < Number(f.end - f.begin), `${CompressionCodec[f.compression_codec]} [${f.begin}, ${f.end}) is compressed: ${stored} bytes`);
    }
    const out = join(tmp.dir, 'codecs.out');
    await gzOk(cluster, ['journals', 'read', '-l', 'name=direct/codecs', '--broker.cache.size', '16', '--file-root', cluster.fileRoot, '-o', out]);
    assert.ok(readFileSync(out).equals(c.data), 'direct: every byte once, decoded by our codecs');
    const proxied = await gzOk(cluster, ['journals', 'read', '-l', 'name=direct/codecs']);
    assert.ok(proxied.stdout.equals(c.data), 'the same through the broker');
    const v = await gzOk(cluster, ['journals', 'fragments', '-l', 'name=direct/codecs', '--verify', '--file-root', cluster.fileRoot]);
    assert.match(v.stdout.toString('utf8'), /^Verified: 6 persisted fragments, 0 failed$/m);
  });

  test('--verify without access to a file:// store: every object unreadable, one line, exit 1', async () => {
    const args = ['journals', 'fragments', '-l', 'name=direct/mixed', '--verify'];
    const r = await gz(cluster, args);
    assert.equal(r.code, 1, describeResult(args, r));
    assert.equal(oneStderrLine(args, r), 'gazctl: --verify: 6 of 6 persisted fragments failed verification');
    assert.match(r.stdout.toString('utf8'), /FAILED unreadable: direct\/mixed \[0, 3000\) file:\/\/\/ .*: no --file-root for file:\/\/\//);
  });
});

describe('direct reads from the real S3 server (Go broker signing URLs)', { timeout: 240_000 }, () => {
  let s3: S3Server;
  let cluster: Cluster;
  let client: JournalClient;
  let mixed: { data: Buffer; persisted: Fragment[] };

  before(async () => {
    s3 = await startS3({ bucket: 'direct' });
    cluster = await startCluster({
      brokers: 1,
      brokerEnv: { AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: s3.credentials.region },
    });
    client = new JournalClient({ address: cluster.brokerAddress, cacheSize: 16 });
    mixed = await writeMixedJournal(client, cluster, 'direct/s3', s3.storeUrl('frags/'), 31);
  });
  after(async () => {
    client?.close();
    await cluster?.stop();
    await s3?.stop();
  });

  test('a direct read fetches the persisted run by signed URLs, then the spool', async () => {
    const { reader, counts } = countingReader(client, 'direct/s3');
    const got = await reader.readAll();
    assert.ok(got.equals(mixed.data), 'every byte once, in order');
    assert.equal(counts.listings, 1);
    assert.ok(counts.reads <= 3, `${counts.reads} Read RPCs`);
  });

  test('journals read and fragments --verify on the S3 store', async () => {
    const r = await gzOk(cluster, ['journals', 'read', '-l', 'name=direct/s3', '--broker.cache.size', '16']);
    assert.ok(r.stdout.equals(mixed.data));
    const v = await gzOk(cluster, ['journals', 'fragments', '-l', 'name=direct/s3', '--verify']);
    assert.match(v.stdout.toString('utf8'), /^Verified: 6 persisted fragments, 0 failed$/m);
    const u = await gzOk(cluster, ['journals', 'fragments', '-l', 'name=direct/s3', '--url-ttl', '1h', '-o', 'json']);
    const urls = u.stdout.toString('utf8').trim().split('\n').map((l) => JSON.parse(l.replace(/:(-?\d+)([,}])/g, ':"$1"$2')).signed_url as string | undefined);
    assert.equal(urls.filter((x) => x && x.startsWith(`${s3.endpoint}/direct/frags/direct/s3/`) && /X-Amz-Signature=/.test(x)).length, 6, 'signed URLs for the persisted fragments');
  });
});
