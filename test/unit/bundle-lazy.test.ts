// The CLI bundle loads the AWS SDK (s3:// stores) and the prompt library only when a command
// needs them, from bundle files of their own (scripts/bundle.mjs). These tests run the real
// binary (bin/run.js) against a scripted broker and a small fake S3 server, and check both that
// the lazily loaded parts work (a prune of an s3:// store, confirmed at a terminal prompt) and
// that a command that needs neither never loads them. Which files a run loaded comes from a
// `--require` preload that writes the process's module cache at exit (load.cjs registers every
// bundle file it runs there, as Node does for a required file).

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import type { ServerWritableStream } from '@grpc/grpc-js';

import { ListResponse, Status, type ListRequest } from '../../src/lib/protocol/gen/broker/protocol.js';
import { startJournalStub, stubHeader, type StubServer } from '../../src/testing/stubs.js';
import { REPO_ROOT, describeResult, runGazctl, runGazctlOnTerminal } from '../helpers/cli.js';

const BUNDLE = join(REPO_ROOT, 'dist', 'bundle');
const SUM = 'ab'.repeat(20);
const OLD = `pre/lazy/s3/0000000000000000-0000000000000064-${SUM}.raw`;
const NEWEST = `pre/lazy/s3/0000000000000064-00000000000000c8-${SUM}.raw`;

/** A fake S3 endpoint: lists, stats and deletes objects of bucket `lazy` (no signature checks). */
interface FakeS3 {
  url: string;
  objects: Map<string, Date>;
  requests: string[];
  close(): Promise<void>;
}

async function startFakeS3(): Promise<FakeS3> {
  const objects = new Map<string, Date>();
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://fake');
    requests.push(`${req.method} ${u.pathname}`);
    req.resume();
    const key = decodeURIComponent(u.pathname.replace(/^\/lazy\/?/, ''));
    if (req.method === 'GET' && key === '' && u.searchParams.get('list-type') === '2') {
      const prefix = u.searchParams.get('prefix') ?? '';
      const keys = [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();
      const contents = keys
        .map((k) => `<Contents><Key>${k}</Key><LastModified>${objects.get(k)!.toISOString()}</LastModified><ETag>"0"</ETag><Size>100</Size><StorageClass>STANDARD</StorageClass></Contents>`)
        .join('');
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>lazy</Name><Prefix>${prefix}</Prefix>` +
          `<KeyCount>${keys.length}</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>${contents}</ListBucketResult>`,
      );
    } else if (req.method === 'HEAD' && objects.has(key)) {
      res.writeHead(200, { 'content-length': '100', 'last-modified': objects.get(key)!.toUTCString() });
      res.end();
    } else if (req.method === 'DELETE') {
      objects.delete(key);
      res.writeHead(204);
      res.end();
    } else {
      res.writeHead(404, { 'content-type': 'application/xml' });
      res.end(req.method === 'HEAD' ? undefined : '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, objects, requests, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

let s3: FakeS3;
let broker: StubServer;
let work: string;
let preload: string;
let runs = 0;

before(async () => {
  s3 = await startFakeS3();
  const store = `s3://lazy/pre/?endpoint=${s3.url}&region=us-east-1`;
  broker = await startJournalStub({
    list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
      call.write(
        ListResponse.fromPartial({
          status: Status.OK,
          header: stubHeader({ revision: 10n }),
          journals: [
            {
              spec: { name: 'lazy/s3', replication: 1, fragment: { length: 1024n, stores: [store], retention: { seconds: 86_400n, nanos: 0 } } },
              mod_revision: 5n,
              create_revision: 5n,
              route: { members: [{ zone: 'local', suffix: 'stub' }], primary: 0, endpoints: [] },
            },
          ],
        }),
      );
      call.end();
    },
  });
  work = mkdtempSync(join(tmpdir(), 'gazctl-lazy-'));
  preload = join(work, 'loaded.cjs');
  writeFileSync(preload, "process.once('exit', () => require('node:fs').writeFileSync(process.env.LAZY_TEST_LOADED, JSON.stringify(Object.keys(require.cache))));\n");
});

after(async () => {
  await broker?.stop();
  await s3?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

beforeEach(() => {
  s3.objects.clear();
  s3.objects.set(OLD, new Date(Date.now() - 48 * 3600_000));
  s3.objects.set(NEWEST, new Date(Date.now() - 3600_000));
  s3.requests.length = 0;
});

/** Environment of a run, and where it reports the files it loaded. */
function runEnv(extra: Record<string, string> = {}): { env: Record<string, string>; loaded: () => string[] } {
  const out = join(work, `loaded-${++runs}.json`);
  return {
    env: {
      BROKER_ADDRESS: broker.address,
      AWS_ACCESS_KEY_ID: 'lazy',
      AWS_SECRET_ACCESS_KEY: 'lazy',
      AWS_EC2_METADATA_DISABLED: 'true',
      NODE_OPTIONS: `--require ${preload}`,
      LAZY_TEST_LOADED: out,
      ...extra,
    },
    loaded: () => JSON.parse(readFileSync(out, 'utf8')) as string[],
  };
}

const inBundle = (files: string[], name: string) => files.includes(join(BUNDLE, name));
const sdkFromNodeModules = (files: string[]) => files.filter((f) => /[\\/]node_modules[\\/]@aws-sdk[\\/]/.test(f));

describe('lazily loaded parts of the CLI bundle', () => {
  test('the bundle is built (npm run build) and current, so bin/run.js runs from it', () => {
    for (const f of ['commands-impl.cjs', 's3-sdk.cjs', 's3-sdk-impl.cjs', 'prompts.cjs', 'prompts-impl.cjs', 'prom-client.cjs', 'prom-client-impl.cjs']) {
      assert.ok(existsSync(join(BUNDLE, f)), `dist/bundle/${f} is missing: run npm run build`);
    }
    // bin/run.js runs the tsc output instead when it is newer than the bundle (a tsc-only build).
    const tsc = statSync(join(REPO_ROOT, 'dist', '.tsbuildinfo'), { throwIfNoEntry: false });
    assert.ok(!tsc || tsc.mtimeMs <= statSync(join(BUNDLE, 'commands.cjs')).mtimeMs, 'the tsc output is newer than the bundle: run npm run build');
  });

  test('a command that opens no s3:// store and shows no prompt loads neither part', async () => {
    const { env, loaded } = runEnv();
    const args = ['journals', 'list', '-l', 'name=lazy/s3'];
    const r = await runGazctl(args, { env });
    assert.equal(r.code, 0, describeResult(args, r));
    assert.match(r.stdout.toString('utf8'), /lazy\/s3/);
    const files = loaded();
    assert.ok(inBundle(files, 'commands-impl.cjs'), `ran from the bundle: ${files.join(', ')}`);
    assert.ok(!inBundle(files, 's3-sdk-impl.cjs') && !inBundle(files, 'prompts-impl.cjs'), `loaded: ${files.join(', ')}`);
    assert.ok(!inBundle(files, 'prom-client-impl.cjs'), `prom-client is not loaded: ${files.join(', ')}`);
    assert.deepEqual(sdkFromNodeModules(files), []);
  });

  test('journals append --metrics-addr loads prom-client from its own part and serves /metrics', async () => {
    const { env, loaded } = runEnv();
    const args = ['journals', 'append', '-l', 'name=lazy/s3', '--framing', 'lines', '--metrics-addr', '127.0.0.1:0', '--log.level', 'info'];
    const r = await runGazctl(args, { env, input: '' });
    assert.equal(r.code, 0, describeResult(args, r));
    assert.match(r.stderr, /serving metrics at http:\/\/127\.0\.0\.1:\d+\/metrics/);
    const files = loaded();
    assert.ok(inBundle(files, 'prom-client-impl.cjs') && !inBundle(files, 's3-sdk-impl.cjs'), `loaded: ${files.join(', ')}`);
    assert.ok(!files.some((f) => f.includes(`${sep}node_modules${sep}prom-client${sep}`)), `prom-client came from the bundle: ${files.join(', ')}`);
  });

  test('a prune of an s3:// store loads the SDK from its bundle file, and --dry-run shows no prompt', async () => {
    const { env, loaded } = runEnv();
    const args = ['journals', 'prune', '-l', 'name=lazy/s3', '--dry-run'];
    const r = await runGazctl(args, { env });
    assert.equal(r.code, 0, describeResult(args, r));
    assert.match(r.stdout.toString('utf8'), /^plan: delete 1 expired object\(s\), 100 B, of 1 journal\(s\)$/m);
    assert.match(r.stdout.toString('utf8'), /^dry run: nothing deleted$/m);
    assert.deepEqual(s3.requests, ['GET /lazy/'], 'one listing request');
    const files = loaded();
    assert.ok(inBundle(files, 's3-sdk-impl.cjs'), `loaded: ${files.join(', ')}`);
    assert.ok(!inBundle(files, 'prompts-impl.cjs'), `loaded: ${files.join(', ')}`);
    assert.deepEqual(sdkFromNodeModules(files), [], 'the SDK comes from the bundle, not node_modules');
  });

  test('on a terminal, the prune asks (the prompt library from its bundle file) and deletes on "y"', async () => {
    const { env, loaded } = runEnv();
    const args = ['journals', 'prune', '-l', 'name=lazy/s3'];
    const r = await runGazctlOnTerminal(args, { env, prompt: /Delete 1 expired fragment object\(s\) \(100 B\)\?/, answer: 'y' });
    assert.ok(r.answered, r.screen);
    assert.equal(r.code, 0, r.screen);
    assert.match(r.screen, /deleted 1 of 1 object\(s\), 100 B/);
    assert.deepEqual([...s3.objects.keys()], [NEWEST]);
    assert.ok(s3.requests.includes(`DELETE /lazy/${OLD}`), s3.requests.join('\n'));
    const files = loaded();
    assert.ok(inBundle(files, 's3-sdk-impl.cjs') && inBundle(files, 'prompts-impl.cjs'), `loaded: ${files.join(', ')}`);
    assert.deepEqual(sdkFromNodeModules(files), []);
  });

  test('on a terminal, "n" at the prompt deletes nothing', async () => {
    const { env } = runEnv();
    const args = ['journals', 'prune', '-l', 'name=lazy/s3'];
    const r = await runGazctlOnTerminal(args, { env, prompt: /Delete 1 expired fragment object\(s\) \(100 B\)\?/, answer: 'n' });
    assert.ok(r.answered, r.screen);
    assert.equal(r.code, 0, r.screen);
    assert.match(r.screen, /nothing deleted/);
    assert.equal(s3.objects.size, 2);
    assert.ok(!s3.requests.some((q) => q.startsWith('DELETE')), s3.requests.join('\n'));
  });

  test('unbundled (GAZCTL_NO_BUNDLE=1), the store requires the SDK module next to it', async () => {
    const { env, loaded } = runEnv({ GAZCTL_NO_BUNDLE: '1' });
    const args = ['journals', 'prune', '-l', 'name=lazy/s3', '--dry-run'];
    const r = await runGazctl(args, { env });
    assert.equal(r.code, 0, describeResult(args, r));
    assert.match(r.stdout.toString('utf8'), /^plan: delete 1 expired object\(s\), 100 B, of 1 journal\(s\)$/m);
    const files = loaded();
    assert.ok(!inBundle(files, 'commands-impl.cjs'), `loaded: ${files.join(', ')}`);
    assert.ok(files.includes(join(REPO_ROOT, 'dist', 'src', 'lib', 'stores', 's3-sdk.cjs')), `loaded: ${files.join(', ')}`);
  });
});
