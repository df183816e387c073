// The service port with TLS (core/security.ts, broker/server.ts): gRPC (ALPN h2) and HTTP/1
// (ALPN http/1.1, or none) on the one TLS port; with --*.server-ca-file a client certificate is
// required, and one from the CA is accepted. Certificates come from the openssl CLI.
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { Metadata, status as GrpcStatus, type ServerWritableStream } from '@grpc/grpc-js';

import { Metrics } from '../../../../src/core/broker/metrics.js';
import { startServer, type ServiceServer } from '../../../../src/core/broker/server.js';
import { buildSecurity, serviceEndpoint } from '../../../../src/core/security.js';
import { UsageError } from '../../../../src/core/options.js';
import { tlsCredentials } from '../../../../src/lib/client/dial.js';
import { JournalClient, ListRequest, type JournalServer } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { makeTestCerts, type TestCerts } from '../../../../src/testing/certs.js';

const unimplemented = (_call: unknown, cb: (e: unknown) => void) => cb(Object.assign(new Error('no'), { code: GrpcStatus.UNIMPLEMENTED, metadata: new Metadata() }));
const journal = {
  list: (call: ServerWritableStream<unknown, unknown>) => call.end(),
  apply: unimplemented,
  append: unimplemented,
  replicate: (call: ServerWritableStream<unknown, unknown>) => call.end(),
  listFragments: unimplemented,
  fragmentStoreHealth: unimplemented,
  read: unimplemented,
} as unknown as JournalServer;

const none = { certFile: '', keyFile: '', caFile: '' };

function list(port: number, ctx: ReturnType<typeof createSecureContext>): Promise<void> {
  const client = new JournalClient(`127.0.0.1:${port}`, tlsCredentials(ctx, `127.0.0.1:${port}`));
  return new Promise((resolve, reject) => {
    const call = client.list(ListRequest.fromPartial({}), new Metadata(), { deadline: Date.now() + 5000 });
    call.on('data', () => {});
    call.on('error', (e) => {
      client.close();
      reject(e);
    });
    call.on('end', () => {
      client.close();
      resolve();
    });
  });
}

function get(port: number, opts: { ca: Buffer; cert?: Buffer; key?: Buffer; alpn?: string[] }): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/debug/ready', ca: opts.ca, cert: opts.cert, key: opts.key, ...(opts.alpn ? { ALPNProtocols: opts.alpn } : {}) }, (res) => {
      let s = '';
      res.on('data', (d) => (s += d));
      res.on('end', () => resolve(`${res.statusCode} ${s.trim()}`));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the service port with TLS', () => {
  let dir: string;
  let certs: TestCerts;
  let plain: ServiceServer;
  let mutual: ServiceServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'server-tls-'));
    certs = makeTestCerts(dir);
    const server = { certFile: certs.certFile, keyFile: certs.keyFile, caFile: '' };
    const start = (caFile: string) =>
      startServer({
        host: '127.0.0.1',
        port: 0,
        journal,
        metrics: new Metrics(),
        ready: () => true,
        maxRecvBytes: 4 << 20,
        tls: buildSecurity('broker', { ...server, caFile }, none, '').serverTls!,
      });
    plain = await start('');
    mutual = await start(certs.caFile);
  });
  after(async () => {
    await plain?.close();
    await mutual?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves gRPC and HTTP/1 (with or without ALPN) on one port', async () => {
    const ca = readFileSync(certs.caFile);
    await list(plain.port, createSecureContext({ ca }));
    assert.equal(await get(plain.port, { ca }), '200 ready');
    assert.equal(await get(plain.port, { ca, alpn: ['h2', 'http/1.1'] }), '200 ready');
  });

  it('refuses a client whose CA does not match', async () => {
    await assert.rejects(list(plain.port, createSecureContext({ ca: readFileSync(certs.otherCaFile) })), (e: { code?: number }) => e.code === GrpcStatus.UNAVAILABLE);
  });

  it('with a server CA, requires a client certificate from it', async () => {
    const ca = readFileSync(certs.caFile);
    await assert.rejects(list(mutual.port, createSecureContext({ ca })), (e: { code?: number }) => e.code === GrpcStatus.UNAVAILABLE);
    await assert.rejects(get(mutual.port, { ca }));
    const cert = readFileSync(certs.certFile);
    const key = readFileSync(certs.keyFile);
    await list(mutual.port, createSecureContext({ ca, cert, key }));
    assert.equal(await get(mutual.port, { ca, cert, key }), '200 ready');
  });

  it('bad options are one usage error naming the option; endpoints say https', () => {
    assert.throws(() => buildSecurity('broker', { certFile: join(dir, 'nope.crt'), keyFile: certs.keyFile, caFile: '' }, none, ''), (e: unknown) => e instanceof UsageError && /^--broker\.server-cert-file: reading certificate .*nope\.crt: ENOENT$/.test(e.message));
    assert.throws(() => buildSecurity('consumer', { certFile: certs.certFile, keyFile: join(dir, 'other.key'), caFile: '' }, none, ''), (e: unknown) => e instanceof UsageError && /^--consumer\.server-cert-file: .*key values mismatch/.test(e.message));
    assert.throws(() => buildSecurity('broker', none, none, 'AA=='), (e: unknown) => e instanceof UsageError && /--broker\.auth-keys: .*at least one key/.test(e.message));
    // Peer options are ignored without the server's, as upstream.
    assert.equal(buildSecurity('broker', none, { certFile: '/nonexistent', keyFile: '/nonexistent', caFile: '/nonexistent' }, '').serverTls, undefined);
    assert.equal(serviceEndpoint('10.0.0.5', 8080, true), 'https://10.0.0.5:8080');
    assert.equal(serviceEndpoint('::1', 8080, false), 'http://[::1]:8080');
  });
});
