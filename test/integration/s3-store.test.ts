// The s3:// store against the test S3 server (versitygw, which checks SigV4 signatures): the
// shared conformance table, then failures an operator meets: a wrong secret, an unknown key, an
// unreachable endpoint, a missing bucket.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { collectFragmentObjects } from '../../src/lib/fragment/listing.js';
import {
  FileStore,
  S3Store,
  StoreAuthError,
  StoreError,
  StoreHealthError,
  StoreUnreachableError,
  openStore,
} from '../../src/lib/stores/index.js';
import { freePort, startS3, type S3Server } from '../../src/testing/index.js';
import { collect, fragName, storeConformance, type StoreFixture } from '../unit/lib/stores/conformance.js';

// The SDK's default credential chain ends with container and instance metadata services on
// link-local addresses; a test must never reach for those, so they are switched off here.
process.env.AWS_EC2_METADATA_DISABLED = 'true';
delete process.env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
delete process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI;

const oneLine = (e: Error) => e.message.length > 0 && !e.message.includes('\n');

describe('s3:// store', { timeout: 120_000 }, () => {
  let srv: S3Server;
  const opened: S3Store[] = [];
  const open = (url: string, opts: ConstructorParameters<typeof S3Store>[1] = { credentials: srv.credentials }) => {
    const s = new S3Store(url, opts);
    opened.push(s);
    return s;
  };

  before(async () => {
    srv = await startS3({ bucket: 'store-test' });
  });
  after(async () => {
    for (const s of opened) s.close();
    await srv?.stop();
  });

  describe('conformance', () => {
    const fixture = (): StoreFixture => ({
      async open(name, query) {
        return open(srv.storeUrl(`${name}/`) + (query ? `&${query}` : ''));
      },
      async raw(key) {
        try {
          return await readFile(join(srv.dataDir, srv.bucket, key));
        } catch {
          return undefined;
        }
      },
      async readSigned(url) {
        assert.ok(url.startsWith(`${srv.endpoint}/${srv.bucket}/`), `path-style signed URL: ${url}`);
        assert.match(url, /X-Amz-Signature=/);
        const res = await fetch(url);
        const body = Buffer.from(await res.arrayBuffer());
        assert.equal(res.status, 200, body.toString());
        return body;
      },
    });
    storeConformance(fixture);
  });

  it('is what openStore gives for s3:// URLs, with credentials from the environment', async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = srv.credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = srv.credentials.secretAccessKey;
    try {
      const s = openStore(srv.storeUrl('env/'));
      assert.ok(s instanceof S3Store);
      opened.push(s);
      await s.put('j/x', 'from env');
      assert.equal((await s.get('j/x')).toString(), 'from env');
    } finally {
      for (const [k, v] of [['AWS_ACCESS_KEY_ID', saved.id], ['AWS_SECRET_ACCESS_KEY', saved.secret]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it('takes the endpoint unencoded, too', async () => {
    const s = open(`s3://${srv.bucket}/plain/?endpoint=${srv.endpoint}&region=us-east-1`);
    await s.put('j/x', 'ok');
    assert.equal((await s.get('j/x')).toString(), 'ok');
    assert.equal((await readFile(join(srv.dataDir, srv.bucket, 'plain/j/x'))).toString(), 'ok');
  });

  it('says the credentials were refused for a wrong secret or an unknown key', async () => {
    const wrong = open(srv.storeUrl('auth/'), { credentials: { ...srv.credentials, secretAccessKey: `${srv.credentials.secretAccessKey}x` } });
    for (const op of [() => collect(wrong.list('j/')), () => wrong.put('j/x', 'x'), () => wrong.get('j/x')]) {
      await assert.rejects(op(), (e: Error) => {
        assert.ok(e instanceof StoreAuthError, String(e));
        assert.equal(e.kind, 'credentials');
        assert.ok(oneLine(e), e.message);
        assert.ok(e.message.startsWith(`store ${wrong.url}: `), e.message);
        assert.match(e.message, /credentials refused \(SignatureDoesNotMatch\)/);
        assert.ok(wrong.isAuthError(e));
        return true;
      });
    }
    await assert.rejects(wrong.health(), (e: Error) => e instanceof StoreHealthError && /health check PUT failed: .*credentials refused/.test(e.message) && wrong.isAuthError(e));

    // AWS answers InvalidAccessKeyId; versitygw says XAdminUserNotFound (with HTTP 404).
    const unknown = open(srv.storeUrl('auth/'), { credentials: { accessKeyId: 'nobody', secretAccessKey: 'nothing' } });
    await assert.rejects(collect(unknown.list('')), (e: Error) => e instanceof StoreAuthError && oneLine(e) && /credentials refused \((InvalidAccessKeyId|XAdminUserNotFound)\)/.test(e.message));
  });

  it('says a bucket is missing', async () => {
    const s = open(`s3://no-such-bucket/p/?endpoint=${encodeURIComponent(srv.endpoint)}&region=us-east-1`);
    await assert.rejects(collect(s.list('j/')), (e: Error) => {
      assert.ok(e instanceof StoreAuthError, String(e));
      assert.equal(e.kind, 'no-bucket');
      assert.ok(oneLine(e), e.message);
      assert.match(e.message, /^store s3:\/\/no-such-bucket\/p\/\?.*: list j\/: bucket no-such-bucket does not exist/);
      assert.ok(s.isAuthError(e));
      return true;
    });
    await assert.rejects(s.put('j/x', 'x'), (e: Error) => e instanceof StoreAuthError && e.kind === 'no-bucket');
  });

  it('fails fast with one line when the endpoint is unreachable', { timeout: 30_000 }, async () => {
    const port = await freePort(); // nothing listens there
    const s = open(`s3://${srv.bucket}/p/?endpoint=http%3A%2F%2F127.0.0.1%3A${port}&region=us-east-1`);
    await assert.rejects(collect(s.list('j/')), (e: Error) => {
      assert.ok(e instanceof StoreUnreachableError, String(e));
      assert.ok(oneLine(e), e.message);
      assert.match(e.message, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`));
      assert.ok(!s.isAuthError(e));
      return true;
    });
    await assert.rejects(s.get(`j/${fragName(0, 1)}`), StoreUnreachableError);
  });

  it('puts content of unknown length larger than a part as a multipart upload', async () => {
    const s = open(srv.storeUrl('multipart/'), { credentials: srv.credentials, partSize: 5 * 1024 * 1024 });
    const chunk = Buffer.alloc(1 << 20);
    const total = 11;
    await s.put('j/big', (async function* () {
      for (let i = 0; i < total; i++) yield Buffer.from(chunk.fill(i));
    })());
    const got = await s.get('j/big');
    assert.equal(got.length, total << 20);
    for (let i = 0; i < total; i++) assert.equal(got[(i << 20) + 5], i);
  });

  it("lists a journal's fragments across an s3:// and a file:// store", async () => {
    const s3url = srv.storeUrl('listing-x/');
    const s = open(s3url);
    const root = await mkdtemp(join(tmpdir(), 'gazctl-s3list-'));
    try {
      await mkdir(join(root, 'local'));
      const file = new FileStore('file:///local/', { root });
      await s.put(`jj/aa/${fragName(0, 4)}`, 'abcd');
      await s.put(`jj/aa/pp=1/${fragName(4, 8, '.zst')}`, 'zz');
      await s.put(`jj/aa/junk.txt`, 'junk');
      await s.put(`jj/aab/${fragName(0, 1)}`, 'other journal');
      await file.put(`jj/aa/${fragName(0, 4)}`, 'abcd');
      const missing = `s3://no-such-bucket/p/?endpoint=${encodeURIComponent(srv.endpoint)}&region=us-east-1`;
      const spec = { name: 'jj/aa', fragment: { stores: [s3url, 'file:///local/', missing] } };
      const got = await collectFragmentObjects([spec], {
        stores: { fileRoot: root, s3: { credentials: srv.credentials } },
        continueOnError: true,
      });
      assert.deepEqual(got.objects.map((o) => `${o.store === s3url ? 's3' : 'file'} ${o.path} ${o.size}`).sort(), [
        `file jj/aa/${fragName(0, 4)} 4`,
        `s3 jj/aa/${fragName(0, 4)} 4`,
        `s3 jj/aa/pp=1/${fragName(4, 8, '.zst')} 2`,
      ]);
      for (const o of got.objects) assert.ok(o.modTime > 0);
      assert.deepEqual(got.unparseable.map((u) => [u.store, u.path]), [[s3url, 'jj/aa/junk.txt']]);
      assert.equal(got.failed.length, 1);
      assert.equal(got.failed[0]!.store, missing);
      assert.ok(got.failed[0]!.error instanceof StoreAuthError && got.failed[0]!.error.kind === 'no-bucket');
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('rejects URLs it cannot use, naming the store', () => {
    assert.throws(() => new S3Store('s3://b/p/?bogus=1'), (e: Error) => e instanceof StoreError && /unknown query argument "bogus"/.test(e.message));
    assert.throws(() => new S3Store('s3://b/p/?endpoint=ftp://x'), (e: Error) => e instanceof StoreError && /must be an http/.test(e.message));
  });
});
