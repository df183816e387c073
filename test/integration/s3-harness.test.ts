// The test S3 server (versitygw, posix backend): it starts on loopback, holds the bucket it was
// asked to create, stores and lists objects for correctly signed requests, refuses a request
// signed with the wrong secret, and leaves nothing behind when stopped.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { pidAlive, s3Request, startS3, type S3Server } from '../../src/testing/index.js';

const KEY = 'examples/journal/pp=1/0000000000000000-0000000000000005-aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d.raw';

describe('S3 test server', { timeout: 60_000 }, () => {
  let s3: S3Server | undefined;

  before(async () => {
    s3 = await startS3({ bucket: 'frag-test' });
  });

  after(async () => {
    await s3?.stop();
  });

  test('exposes a loopback endpoint, credentials and a Gazette store URL', () => {
    const srv = s3!;
    assert.equal(srv.endpoint, `http://127.0.0.1:${srv.port}`);
    assert.equal(srv.bucket, 'frag-test');
    assert.equal(srv.credentials.region, 'us-east-1');
    assert.ok(srv.credentials.accessKeyId.length > 0 && srv.credentials.secretAccessKey.length > 0);
    assert.equal(
      srv.storeUrl('gazette/'),
      `s3://frag-test/gazette/?endpoint=${encodeURIComponent(srv.endpoint)}&region=us-east-1`,
    );
    assert.throws(() => srv.storeUrl('no-slash'), /must end in '\/'/);
  });

  test('puts, lists and gets an object with signed requests', async () => {
    const srv = s3!;
    const put = await s3Request({
      endpoint: srv.endpoint,
      credentials: srv.credentials,
      method: 'PUT',
      path: `/${srv.bucket}/${KEY}`,
      body: 'hello',
    });
    assert.equal(put.status, 200, await put.text());

    const list = await s3Request({
      endpoint: srv.endpoint,
      credentials: srv.credentials,
      method: 'GET',
      path: `/${srv.bucket}`,
      query: { 'list-type': '2', prefix: 'examples/journal/' },
    });
    const xml = await list.text();
    assert.equal(list.status, 200, xml);
    const keys = [...xml.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => m[1]);
    assert.deepEqual(keys, [KEY]);
    assert.match(xml, /<Size>5<\/Size>/);

    const get = await s3Request({
      endpoint: srv.endpoint,
      credentials: srv.credentials,
      method: 'GET',
      path: `/${srv.bucket}/${KEY}`,
    });
    assert.equal(get.status, 200);
    assert.equal(await get.text(), 'hello');

    // The posix backend keeps the object as a plain file under <dataDir>/<bucket>/<key>.
    assert.equal(readFileSync(`${srv.dataDir}/${srv.bucket}/${KEY}`, 'utf8'), 'hello');
  });

  test('refuses a request signed with the wrong secret', async () => {
    const srv = s3!;
    const res = await s3Request({
      endpoint: srv.endpoint,
      credentials: { ...srv.credentials, secretAccessKey: `${srv.credentials.secretAccessKey}x` },
      method: 'GET',
      path: `/${srv.bucket}`,
      query: { 'list-type': '2' },
    });
    const body = await res.text();
    assert.equal(res.status, 403, body);
    assert.match(body, /SignatureDoesNotMatch/);

    const unsigned = await fetch(`${srv.endpoint}/${srv.bucket}?list-type=2`);
    await unsigned.arrayBuffer();
    assert.equal(unsigned.status, 403);
  });

  test('stop ends the process and removes its directory', async () => {
    const other = await startS3();
    const pid = other.process.pid;
    const dir = other.dataDir;
    assert.ok(pidAlive(pid));
    assert.ok(existsSync(dir));
    await other.stop();
    assert.equal(pidAlive(pid), false);
    assert.equal(existsSync(dir), false);
  });
});
