// s3:// store URLs and the parts of the s3 backend that need no server: URL parsing, client
// configuration (path style, region, profiles), presigning, what puts send, and how S3 error
// answers map onto store errors.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';

import { S3ServiceException } from '@aws-sdk/client-s3';

import {
  S3Store,
  StoreAuthError,
  StoreError,
  StoreHealthError,
  StoreNotFoundError,
  openStore,
  parseS3StoreURL,
} from '../../../../src/lib/stores/index.js';

// The SDK's default credential chain ends with container and instance metadata services on
// link-local addresses; a test must never reach for those, so they are switched off here.
process.env.AWS_EC2_METADATA_DISABLED = 'true';
delete process.env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
delete process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI;

const CREDS = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

function s3Error(name: string, status: number): S3ServiceException {
  return new S3ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode: status }, message: `${name} happened\nsecond line` });
}

/** A store whose client answers every command with `answer(command)`; the commands it got. */
function fakeStore(url: string, answer: (cmd: { constructor: { name: string }; input: Record<string, unknown> }) => unknown) {
  const s = new S3Store(url, { credentials: CREDS });
  const sent: { name: string; input: Record<string, unknown> }[] = [];
  (s.client as unknown as { send: (c: never) => Promise<unknown> }).send = async (c: { constructor: { name: string }; input: Record<string, unknown> }) => {
    sent.push({ name: c.constructor.name, input: c.input });
    const r = answer(c);
    if (r instanceof Error) throw r;
    return r;
  };
  return { s, sent };
}

describe('s3:// store URLs', () => {
  it('parses bucket, prefix and every query argument, names case-insensitively', () => {
    assert.deepEqual(parseS3StoreURL('s3://bucket/a/b/'), { bucket: 'bucket', prefix: 'a/b/', find: '', replace: '' });
    assert.deepEqual(parseS3StoreURL('s3://bucket/'), { bucket: 'bucket', prefix: '', find: '', replace: '' });
    assert.deepEqual(
      parseS3StoreURL(
        's3://b/p/?Endpoint=http%3A%2F%2F127.0.0.1%3A9000&REGION=eu-west-1&profile=ops&ACL=bucket-owner-full-control' +
          '&storageClass=GLACIER_IR&SSE=aws:kms&SSEKMSKeyId=key-1&find=x&Replace=y',
      ),
      {
        bucket: 'b',
        prefix: 'p/',
        find: 'x',
        replace: 'y',
        endpoint: 'http://127.0.0.1:9000',
        region: 'eu-west-1',
        profile: 'ops',
        acl: 'bucket-owner-full-control',
        storageClass: 'GLACIER_IR',
        sse: 'aws:kms',
        sseKmsKeyId: 'key-1',
      },
    );
  });

  it('takes the endpoint encoded, unencoded, doubly encoded, or without a scheme (https)', () => {
    const ep = (q: string) => parseS3StoreURL(`s3://b/p/?endpoint=${q}`).endpoint;
    assert.equal(ep('http%3A%2F%2F127.0.0.1%3A9000'), 'http://127.0.0.1:9000');
    assert.equal(ep('http://127.0.0.1:9000'), 'http://127.0.0.1:9000');
    assert.equal(ep('http%253A%252F%252F127.0.0.1%253A9000'), 'http://127.0.0.1:9000');
    assert.equal(ep('minio.local:9000'), 'https://minio.local:9000');
    assert.equal(ep('https://s3.example.com/'), 'https://s3.example.com');
    assert.equal(parseS3StoreURL('s3://b/p/?endpoint=').endpoint, undefined);
  });

  it('refuses URLs that are not usable s3:// stores, naming the store', () => {
    const bad: [string, RegExp][] = [
      ['s3:///p/', /needs a bucket/],
      ['s3://b/p', /must end in "\/"/],
      ['s3://b/p/?bogus=1', /unknown query argument "bogus"/],
      ['s3://b/p/?endpoint=ftp%3A%2F%2Fhost', /endpoint "ftp:\/\/host" must be an http:\/\/ or https:\/\/ URL/],
      ['s3://b/p/?endpoint=http%3A%2F%2F%5B', /endpoint .* is not a URL/],
      ['file:///p/', /is not an s3:\/\/ store/],
    ];
    for (const [url, re] of bad) {
      assert.throws(
        () => parseS3StoreURL(url),
        (e: Error) => e instanceof StoreError && re.test(e.message) && e.message.includes(url.replace(/^s3:\/\/b\/p\/\?endpoint=.*/, 's3://b/p/')) && !e.message.includes('\n'),
        url,
      );
    }
  });

  it('an endpoint means path-style requests; no endpoint means virtual hosts', async () => {
    const withEp = new S3Store('s3://bkt/pre/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=us-east-1', { credentials: CREDS });
    assert.equal(withEp.client.config.forcePathStyle, true);
    const url = new URL(await withEp.signGet('j/frag.raw', 90_000));
    assert.equal(url.origin, 'http://127.0.0.1:9000');
    assert.equal(url.pathname, '/bkt/pre/j/frag.raw');
    assert.equal(url.searchParams.get('X-Amz-Expires'), '90');
    assert.match(url.searchParams.get('X-Amz-Credential') ?? '', /^AKIDEXAMPLE\/\d{8}\/us-east-1\/s3\/aws4_request$/);
    assert.ok(url.searchParams.get('X-Amz-Signature'));

    const aws = new S3Store('s3://bkt/pre/?region=eu-west-1&find=j%2F&replace=k%2F', { credentials: CREDS });
    assert.notEqual(aws.client.config.forcePathStyle, true);
    const signed = new URL(await aws.signGet('j/frag.raw', 1000));
    assert.equal(signed.host, 'bkt.s3.eu-west-1.amazonaws.com');
    assert.equal(signed.pathname, '/pre/k/frag.raw');
    assert.equal(aws.key('j/x'), 'pre/k/x');
  });

  describe('credentials and region from a profile', () => {
    let dir = '';
    const saved: Record<string, string | undefined> = {};
    const vars = ['AWS_SHARED_CREDENTIALS_FILE', 'AWS_CONFIG_FILE', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_REGION', 'AWS_DEFAULT_REGION'];
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'gazctl-awsprof-'));
      writeFileSync(join(dir, 'credentials'), '[ops]\naws_access_key_id = OPSKEY\naws_secret_access_key = opssecret\n');
      writeFileSync(join(dir, 'config'), '[profile ops]\nregion = ap-south-1\n');
      for (const v of vars) saved[v] = process.env[v];
      for (const v of vars) delete process.env[v];
      process.env.AWS_SHARED_CREDENTIALS_FILE = join(dir, 'credentials');
      process.env.AWS_CONFIG_FILE = join(dir, 'config');
    });
    after(() => {
      for (const v of vars) {
        if (saved[v] === undefined) delete process.env[v];
        else process.env[v] = saved[v];
      }
      rmSync(dir, { recursive: true, force: true });
    });

    it('profile= selects the profile', async () => {
      const s = new S3Store('s3://bkt/p/?profile=ops');
      const c = await s.client.config.credentials();
      assert.equal(c.accessKeyId, 'OPSKEY');
      assert.equal(c.secretAccessKey, 'opssecret');
      assert.equal(await s.client.config.region(), 'ap-south-1');
      // region= wins over the profile's.
      assert.equal(await new S3Store('s3://bkt/p/?profile=ops&region=us-west-2').client.config.region(), 'us-west-2');
    });

    it('the environment comes first in the default chain', async () => {
      process.env.AWS_ACCESS_KEY_ID = 'ENVKEY';
      process.env.AWS_SECRET_ACCESS_KEY = 'envsecret';
      try {
        const s = openStore('s3://bkt/p/?region=us-east-1');
        const c = await (s as S3Store).client.config.credentials();
        assert.equal(c.accessKeyId, 'ENVKEY');
      } finally {
        delete process.env.AWS_ACCESS_KEY_ID;
        delete process.env.AWS_SECRET_ACCESS_KEY;
      }
    });

    it('no credentials at all, or no region, fail with one line saying what to set', async () => {
      const none = new S3Store('s3://bkt/p/?region=us-east-1');
      await assert.rejects(none.get('j/x'), (e: Error) => e instanceof StoreAuthError && e.kind === 'credentials' && /: open j\/x: no AWS credentials found \(set AWS_ACCESS_KEY_ID/.test(e.message) && !e.message.includes('\n'));
      const noRegion = new S3Store('s3://bkt/p/?endpoint=http%3A%2F%2F127.0.0.1%3A9', { credentials: CREDS });
      for (const op of [() => noRegion.get('j/x'), () => noRegion.signGet('j/x', 1000)]) {
        await assert.rejects(op(), (e: Error) => e instanceof StoreError && /no AWS region \(add region=… to the store URL, or set AWS_REGION\)$/.test(e.message));
      }
    });

    it('a profile that does not exist fails with one line', async () => {
      const s = new S3Store('s3://bkt/p/?profile=nope&region=us-east-1');
      await assert.rejects(s.get('j/x'), (e: Error) => e instanceof StoreAuthError && e.kind === 'credentials' && /no AWS credentials for profile nope \(/.test(e.message) && !e.message.includes('\n'));
    });
  });

  it('puts pass acl, storage class, encryption and content encoding on', async () => {
    const { s, sent } = fakeStore('s3://bkt/pre/?acl=bucket-owner-full-control&storageclass=STANDARD_IA&sse=aws:kms&ssekmskeyid=k1&region=us-east-1', () => ({}));
    await s.put('j/x.gz', 'data', { contentEncoding: 'gzip' });
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.name, 'PutObjectCommand');
    const { Body: _body, ...input } = sent[0]!.input;
    assert.deepEqual(input, {
      Bucket: 'bkt',
      Key: 'pre/j/x.gz',
      ACL: 'bucket-owner-full-control',
      StorageClass: 'STANDARD_IA',
      ServerSideEncryption: 'aws:kms',
      SSEKMSKeyId: 'k1',
      ContentEncoding: 'gzip',
      ContentLength: 4,
    });
    const plain = fakeStore('s3://bkt/pre/?region=us-east-1', () => ({}));
    await plain.s.put('j/x', 'data');
    assert.deepEqual(Object.keys(plain.sent[0]!.input).sort(), ['Body', 'Bucket', 'ContentLength', 'Key']);
  });

  it('maps S3 error answers to store errors of one line', async () => {
    const url = 's3://bkt/pre/?region=us-east-1';
    const cases: [string, number, (e: Error) => boolean][] = [
      ['AccessDenied', 403, (e) => e instanceof StoreAuthError && e.kind === 'denied' && /open j\/x: access denied \(AccessDenied\)$/.test(e.message)],
      ['SignatureDoesNotMatch', 403, (e) => e instanceof StoreAuthError && e.kind === 'credentials' && /credentials refused \(SignatureDoesNotMatch\)$/.test(e.message)],
      ['InvalidAccessKeyId', 403, (e) => e instanceof StoreAuthError && e.kind === 'credentials'],
      ['NoSuchBucket', 404, (e) => e instanceof StoreAuthError && e.kind === 'no-bucket' && /bucket bkt does not exist/.test(e.message)],
      ['NoSuchKey', 404, (e) => e instanceof StoreNotFoundError && !(e instanceof StoreAuthError)],
      ['Forbidden', 403, (e) => e instanceof StoreAuthError && e.kind === 'denied' && /HTTP 403 Forbidden/.test(e.message)],
      ['SlowDown', 503, (e) => e instanceof StoreError && !(e instanceof StoreAuthError) && /SlowDown \(HTTP 503\): SlowDown happened$/.test(e.message)],
    ];
    for (const [name, status, check] of cases) {
      const { s } = fakeStore(url, () => s3Error(name, status));
      await assert.rejects(s.get('j/x'), (e: Error) => {
        assert.ok(check(e), `${name}: ${e.constructor.name}: ${e.message}`);
        assert.ok(e.message.startsWith(`store ${url}: open j/x: `), e.message);
        assert.ok(!e.message.includes('\n'), e.message);
        assert.equal(s.isAuthError(e), e instanceof StoreAuthError);
        return true;
      });
    }
  });

  it('a delete refused for want of permission is an auth error, also through the health check', async () => {
    const { s } = fakeStore('s3://bkt/pre/?region=us-east-1', (c) => {
      if (c.constructor.name === 'DeleteObjectCommand') return s3Error('AccessDenied', 403);
      return {};
    });
    await assert.rejects(s.remove('j/x'), (e: Error) => e instanceof StoreAuthError && e.kind === 'denied' && /remove j\/x: access denied/.test(e.message) && s.isAuthError(e));
    // Not a delete problem: a missing object.
    const missing = fakeStore('s3://bkt/pre/?region=us-east-1', () => s3Error('NotFound', 404));
    await assert.rejects(missing.s.remove('j/x'), (e: Error) => e instanceof StoreNotFoundError && !missing.s.isAuthError(e));
    // Health: the server is faked (and so is the fetch of the signed URL); only the DELETE of
    // the probe fails.
    const h = fakeStore('s3://bkt/pre/?region=us-east-1&endpoint=http%3A%2F%2F127.0.0.1%3A1', (c) => {
      switch (c.constructor.name) {
        case 'DeleteObjectCommand':
          return s3Error('AccessDenied', 403);
        case 'GetObjectCommand':
          return { Body: Readable.from([Buffer.from('health-check\n')]) };
        case 'ListObjectsV2Command':
          return { Contents: [{ Key: 'pre/.test/health-check', Size: 13, LastModified: new Date() }] };
        default:
          return {};
      }
    });
    const realFetch = globalThis.fetch;
    globalThis.fetch = async () => new Response('health-check\n');
    try {
      await h.s.health(); // without the delete check it passes
      await assert.rejects(h.s.health({ deleteUnder: 'j' }), (e: Error) => {
        assert.ok(e instanceof StoreHealthError, String(e));
        assert.match(e.message, /health check DELETE of j\/\.health-check-\S+ failed: .*access denied \(AccessDenied\)$/);
        assert.ok(h.s.isAuthError(e));
        return true;
      });
    } finally {
      globalThis.fetch = realFetch;
    }
  });
});
