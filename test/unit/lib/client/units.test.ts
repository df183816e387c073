import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { Status, type Route } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { BrokerStatusError, TransportError, ValidationError } from '../../../../src/lib/protocol/errors.js';
import {
  backoffBase,
  withJitter,
  retry,
  sleep,
  isTransient,
  isTransientBrokerStatus,
  RouteCache,
  pickEndpoint,
  decodeSnappyBlock,
  crc32c,
  parseAuthKeys,
  selectorClaimJson,
  dialTarget,
  SnappyFramedDecoder,
  claimsFor,
} from '../../../../src/lib/index.js';

test('backoff schedule: 50, 50, 100, 100, 1000, 1000, then 5000 ms, with ±20% jitter', () => {
  assert.deepEqual(
    [0, 1, 2, 3, 4, 5, 6, 7, 30].map(backoffBase),
    [50, 50, 100, 100, 1000, 1000, 5000, 5000, 5000],
  );
  assert.equal(withJitter(1000, () => 0), 800);
  assert.equal(withJitter(1000, () => 1), 1200);
  assert.equal(withJitter(1000, () => 0.5), 1000);
});

test('transient predicates', () => {
  assert.equal(isTransient({ code: GrpcStatus.UNAVAILABLE, details: 'x', metadata: {} }), true);
  assert.equal(isTransient(new TransportError('down', GrpcStatus.UNAVAILABLE)), true);
  assert.equal(isTransient({ code: GrpcStatus.INVALID_ARGUMENT, details: 'x', metadata: {} }), false);
  for (const s of [Status.NO_JOURNAL_PRIMARY_BROKER, Status.NOT_JOURNAL_PRIMARY_BROKER, Status.NOT_JOURNAL_BROKER, Status.INSUFFICIENT_JOURNAL_BROKERS]) {
    assert.equal(isTransientBrokerStatus(s), true);
    assert.equal(isTransient(new BrokerStatusError(s, 'x')), true);
  }
  for (const s of [Status.SUSPENDED, Status.NOT_ALLOWED, Status.WRONG_APPEND_OFFSET, Status.JOURNAL_NOT_FOUND]) {
    assert.equal(isTransientBrokerStatus(s), false);
  }
});

test('retry retries transient errors, stops on others, and honours maxAttempts and abort', async () => {
  let calls = 0;
  const v = await retry(
    async () => {
      if (++calls < 3) throw new BrokerStatusError(Status.NO_JOURNAL_PRIMARY_BROKER, 'x');
      return 'ok';
    },
    { delay: () => 1 },
  );
  assert.equal(v, 'ok');
  assert.equal(calls, 3);

  calls = 0;
  await assert.rejects(
    retry(async () => {
      calls++;
      throw new BrokerStatusError(Status.NOT_ALLOWED, 'x');
    }),
    BrokerStatusError,
  );
  assert.equal(calls, 1);

  calls = 0;
  await assert.rejects(
    retry(
      async () => {
        calls++;
        throw new TransportError('down', GrpcStatus.UNAVAILABLE);
      },
      { delay: () => 1, maxAttempts: 4 },
    ),
    TransportError,
  );
  assert.equal(calls, 4);

  const ac = new AbortController();
  const started = Date.now();
  setTimeout(() => ac.abort(), 30);
  await assert.rejects(
    retry(
      async () => {
        throw new TransportError('down', GrpcStatus.UNAVAILABLE);
      },
      { delay: () => 10_000, signal: ac.signal },
    ),
    (e: unknown) => e instanceof Error && e.name === 'AbortError',
  );
  assert.ok(Date.now() - started < 1000);
  await assert.rejects(sleep(10, AbortSignal.abort()), (e: unknown) => e instanceof Error);
});

const route = (zones: string[], primary: number, endpoints?: string[]): Route => ({
  members: zones.map((z, i) => ({ zone: z, suffix: `b${i}` })),
  primary,
  endpoints: endpoints ?? zones.map((_, i) => `http://b${i}:8080`),
});

test('route cache: LRU eviction and TTL expiry', () => {
  let now = 0;
  const c = new RouteCache(2, 1000, () => now);
  c.set('a', route(['z'], 0));
  c.set('b', route(['z'], 0));
  assert.ok(c.get('a')); // a is now most recent
  c.set('c', route(['z'], 0));
  assert.equal(c.get('b'), undefined, 'least recently used entry evicted');
  assert.ok(c.get('a'));
  assert.ok(c.get('c'));
  now = 1500;
  assert.equal(c.get('a'), undefined, 'expired');
  c.set('d', route([], -1));
  assert.equal(c.get('d'), undefined, 'empty routes are not cached');
  assert.equal(new RouteCache(0).length, 0);
});

test('dispatch: primary for appends; otherwise same zone, then healthy, then ready', () => {
  const r = route(['us-east', 'us-west', 'us-west'], 2);
  assert.equal(pickEndpoint(r, { primary: true }), 'http://b2:8080');
  assert.equal(pickEndpoint(route(['a'], -1), { primary: true }), undefined);
  assert.equal(pickEndpoint(undefined), undefined);
  assert.equal(pickEndpoint(r, { zone: 'us-west' }), 'http://b1:8080');
  assert.equal(pickEndpoint(r, { zone: 'us-west', state: (ep) => (ep === 'http://b1:8080' ? 'failed' : 'idle') }), 'http://b2:8080');
  assert.equal(pickEndpoint(r, { state: (ep) => (ep === 'http://b1:8080' ? 'ready' : 'idle') }), 'http://b1:8080');
  assert.equal(pickEndpoint(route(['a', 'b'], 0, ['', 'http://x:1'])), 'http://x:1', 'unknown endpoints are skipped');
});

test('snappy: raw block decoding incl. overlapping copies, and CRC-32C', () => {
  // "abcd" literal, then a 2-byte-offset copy of 16 bytes at distance 4 (overlapping).
  const out = decodeSnappyBlock(Buffer.from([20, 0x0c, 0x61, 0x62, 0x63, 0x64, (15 << 2) | 2, 4, 0]));
  assert.equal(out.toString(), 'abcd'.repeat(5));
  // A 1-byte-offset copy: len 4..11.
  const out2 = decodeSnappyBlock(Buffer.from([7, 0x08, 0x78, 0x79, 0x7a, (0 << 5) | ((4 - 4) << 2) | 1, 3]));
  assert.equal(out2.toString(), 'xyzxyzx');
  assert.throws(() => decodeSnappyBlock(Buffer.from([5, 0x00, 0x61])), /snappy/);
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
});

test('snappy framed decoder rejects bad checksums and missing stream identifiers', async () => {
  const run = (input: Buffer) =>
    new Promise<Buffer>((resolve, reject) => {
      const d = new SnappyFramedDecoder();
      const parts: Buffer[] = [];
      d.on('data', (b: Buffer) => parts.push(b));
      d.on('end', () => resolve(Buffer.concat(parts)));
      d.on('error', reject);
      d.end(input);
    });
  const body = Buffer.concat([Buffer.from([0, 0, 0, 0]), Buffer.from('hi')]);
  const chunk = Buffer.concat([Buffer.from([0x01, body.length, 0, 0]), body]);
  await assert.rejects(run(chunk), /missing stream identifier/);
  await assert.rejects(run(Buffer.concat([Buffer.from([0xff, 6, 0, 0]), Buffer.from('sNaPpY'), chunk])), /checksum mismatch/);
});

test('auth keys: parsing and the claims JSON shape', () => {
  assert.deepEqual(
    parseAuthKeys('AA==  a2V5MQ==,a2V5Mg==').map((b) => b.toString()),
    ['key1', 'key2'],
  );
  assert.throws(() => parseAuthKeys('AA=='), ValidationError);
  assert.throws(() => parseAuthKeys('not base64!'), ValidationError);
  assert.deepEqual(selectorClaimJson(claimsFor.journalRead('a/b;meta').sel), {
    include: { labels: [{ name: 'name', value: 'a/b' }] },
    exclude: { labels: null },
  });
  assert.deepEqual(
    selectorClaimJson({ include: { labels: [{ name: 'name', value: 'a/', prefix: true }] }, exclude: { labels: [] } }),
    { include: { labels: [{ name: 'name', value: 'a/', prefix: true }] }, exclude: { labels: null } },
  );
});

test('dial targets of endpoint URLs', () => {
  assert.deepEqual(dialTarget('http://127.0.0.1:8080'), { target: '127.0.0.1:8080', secure: false });
  assert.deepEqual(dialTarget('https://broker.example'), { target: 'broker.example:443', secure: true });
  assert.deepEqual(dialTarget('unix://localhost/tmp/broker.sock'), { target: 'unix:///tmp/broker.sock', secure: false });
  assert.throws(() => dialTarget('ftp://x'), ValidationError);
});
