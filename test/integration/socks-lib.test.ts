// The library's SOCKS5 support (src/lib/socks.ts) against a real proxy (socks5-server) that
// alone resolves the made-up names used here: a TLS gRPC service reached through a tunnel keeps
// its real host name in TLS and in :authority; HTTP through the agent carries the real Host;
// each way of failing (the proxy is down, the target refuses, the name is unknown) reads as one
// phrase naming the proxy and the target.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, get, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, get as httpsGet } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Server, ServerCredentials, type ServerWritableStream } from '@grpc/grpc-js';

import { JournalService, ListResponse, Status, type ListRequest } from '../../src/lib/protocol/gen/broker/protocol.js';
import { JournalClient } from '../../src/lib/client/index.js';
import { parseSocksServer, socksAgent, socksConnect, type SocksServer } from '../../src/lib/socks.js';
import { stubHeader } from '../../src/testing/stubs.js';
import { freePort, startSocksServer, type SocksProcess } from '../../src/testing/index.js';

const GRPC_NAME = 'grpc.gazette.test';
const WEB_NAME = 'web.gazette.test';

describe('SOCKS5 in the library, against a real proxy', { timeout: 60_000 }, () => {
  let dir = '';
  let socks: SocksProcess;
  let proxy: SocksServer;
  let grpc: Server | undefined;
  let grpcPort = 0;
  let web: HttpServer | undefined;
  let webPort = 0;
  let secureWeb: HttpServer | undefined;
  let secureWebPort = 0;
  const authorities: string[] = [];
  const hostHeaders: string[] = [];

  before(async () => {
    socks = await startSocksServer({ hosts: { [GRPC_NAME]: '127.0.0.1', [WEB_NAME]: '127.0.0.1' }, onlyHosts: true });
    proxy = parseSocksServer(socks.addresses[0]!)!;
    dir = mkdtempSync(join(tmpdir(), 'gazctl-socks-lib-'));
    // A certificate for the made-up name only: TLS through the tunnel must check that name.
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${GRPC_NAME}`,
      '-addext', `subjectAltName=DNS:${GRPC_NAME}`,
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    const { replicate: _r, ...service } = JournalService;
    grpc = new Server();
    grpc.addService(service, {
      list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
        authorities.push(call.getHost());
        call.write(ListResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          journals: [{ spec: { name: 'socks/journal', replication: 1, labels: { labels: [] } }, mod_revision: 5n, route: { members: [], primary: -1, endpoints: [] }, create_revision: 1n }],
        }));
        call.end();
      },
    } as never);
    const creds = ServerCredentials.createSsl(null, [{ private_key: readFileSync(join(dir, 'key.pem')), cert_chain: readFileSync(join(dir, 'cert.pem')) }]);
    grpcPort = await new Promise<number>((resolve, reject) => grpc!.bindAsync('127.0.0.1:0', creds, (e, p) => (e ? reject(e) : resolve(p))));
    web = createServer((req, res) => {
      hostHeaders.push(req.headers.host ?? '');
      res.end('through the proxy\n');
    });
    webPort = await new Promise<number>((resolve) => web!.listen(0, '127.0.0.1', () => resolve((web!.address() as { port: number }).port)));
    secureWeb = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (req, res) => {
      hostHeaders.push(req.headers.host ?? '');
      res.end('through the proxy, over TLS\n');
    });
    secureWebPort = await new Promise<number>((resolve) => secureWeb!.listen(0, '127.0.0.1', () => resolve((secureWeb!.address() as { port: number }).port)));
  });

  after(async () => {
    grpc?.forceShutdown();
    web?.close();
    secureWeb?.close();
    await socks?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('gRPC over TLS through a tunnel names the real host in TLS and :authority', async () => {
    const client = new JournalClient({ address: `https://${GRPC_NAME}:${grpcPort}`, trustedCAFile: join(dir, 'cert.pem'), socksServer: proxy }, { timeoutMs: 10_000 });
    try {
      const res = await client.list({ include: { labels: [] }, exclude: { labels: [] } });
      assert.deepEqual(res.journals.map((j) => j.spec!.name), ['socks/journal']);
    } finally {
      client.close();
    }
    assert.deepEqual(authorities, [`${GRPC_NAME}:${grpcPort}`]);
    assert.ok(socks.connects().includes(`${GRPC_NAME} 127.0.0.1:${grpcPort}`), socks.connects().join(', '));
  });

  it('HTTP through the agent carries the real Host, the name resolved by the proxy', async () => {
    const body = await new Promise<string>((resolve, reject) => {
      get(`http://${WEB_NAME}:${webPort}/x`, { agent: socksAgent(proxy, false) }, (res: IncomingMessage) => {
        let s = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (s += c));
        res.on('end', () => resolve(s));
      }).on('error', reject);
    });
    assert.equal(body, 'through the proxy\n');
    assert.deepEqual(hostHeaders, [`${WEB_NAME}:${webPort}`]);
    assert.ok(socks.connects().includes(`${WEB_NAME} 127.0.0.1:${webPort}`), socks.connects().join(', '));
  });

  it('HTTPS through the agent checks the certificate against the real name', async () => {
    const fetchVia = (ca?: Buffer) =>
      new Promise<string>((resolve, reject) => {
        httpsGet(`https://${GRPC_NAME}:${secureWebPort}/y`, { agent: socksAgent(proxy, true), ...(ca ? { ca } : {}) }, (res: IncomingMessage) => {
          let s = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (s += c));
          res.on('end', () => resolve(s));
        }).on('error', reject);
      });
    assert.equal(await fetchVia(readFileSync(join(dir, 'cert.pem'))), 'through the proxy, over TLS\n');
    assert.ok(hostHeaders.includes(`${GRPC_NAME}:${secureWebPort}`), hostHeaders.join(', '));
    // Without the CA the self-signed certificate is refused: TLS is really checked.
    await assert.rejects(fetchVia(), /self-signed certificate/);
  });

  it('each failure names the proxy and, where it got that far, the target and its reason', async () => {
    const closed = await freePort();
    const at = socks.addresses[0]!;
    await assert.rejects(socksConnect(proxy, WEB_NAME, closed), { message: `SOCKS server ${at} could not connect to ${WEB_NAME}:${closed} (ConnectionRefused)` });
    await assert.rejects(socksConnect(proxy, 'nowhere.gazette.test', 80), { message: `SOCKS server ${at} could not connect to nowhere.gazette.test:80 (HostUnreachable)` });
    await assert.rejects(socksConnect({ host: '127.0.0.1', port: closed }, WEB_NAME, webPort), { message: `SOCKS server 127.0.0.1:${closed}: connect ECONNREFUSED 127.0.0.1:${closed}` });
  });

  it('a gRPC call to a target the proxy cannot reach fails at its deadline with the proxy\'s reason', async () => {
    const closed = await freePort();
    const client = new JournalClient({ address: `http://${GRPC_NAME}:${closed}`, socksServer: proxy }, { timeoutMs: 1500 });
    try {
      await assert.rejects(client.list({ include: { labels: [] }, exclude: { labels: [] } }), {
        message: `broker http://${GRPC_NAME}:${closed} is unreachable: SOCKS server ${socks.addresses[0]} could not connect to ${GRPC_NAME}:${closed} (ConnectionRefused)`,
      });
    } finally {
      client.close();
    }
  });
});
