// What gazctl says when a connection fails for a reason the operator can fix, tested against
// real servers: a TLS gRPC server with a self-signed certificate made with openssl for this run,
// and a cluster whose etcd is frozen (SIGSTOP).
//
// Several runs use --timeout 0 (wait forever): they prove the cause is reported at once, without
// timing anything: before, those runs retried "unreachable" until the harness killed them.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall, type ServerWritableStream } from '@grpc/grpc-js';

import { JournalService, ListResponse, Status, type ApplyRequest, type ApplyResponse, type ListRequest } from '../../src/lib/protocol/gen/broker/protocol.js';
import { JournalClient } from '../../src/lib/client/index.js';
import { stubHeader } from '../../src/testing/stubs.js';
import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, runGazctl } from '../helpers/cli.js';
import { brokerEnv, gzOk } from '../helpers/journals.js';

const ONE_LINE = /^gazctl: [^\n]+\n$/;

/** Runs gazctl and checks that it failed at once (no retrying until killed) with exit 1 and one line on stderr. */
async function failsAtOnce(args: string[]) {
  const r = await runGazctl(args, { timeoutMs: 30_000 });
  const what = describeResult(args, r);
  assert.equal(r.timedOut, false, `still retrying when killed\n${what}`);
  assert.equal(r.code, 1, what);
  assert.match(r.stderr, ONE_LINE, what);
  return { r, what };
}

describe('TLS: a self-signed server', () => {
  let dir = '';
  let server: Server | undefined;
  let port = 0;
  let applied = 0;

  before(async () => {
    let version = '';
    try {
      version = execFileSync('openssl', ['version'], { encoding: 'utf8' });
    } catch (err) {
      assert.fail(`these tests need openssl on PATH to make a certificate: ${(err as Error).message}`);
    }
    assert.match(version, /SSL/);
    dir = mkdtempSync(join(tmpdir(), 'gazctl-tls-'));
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    const { replicate: _r, ...service } = JournalService;
    server = new Server();
    server.addService(service, {
      list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
        call.write(ListResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          journals: [{ spec: { name: 'tls/journal', replication: 1, labels: { labels: [] } }, mod_revision: 5n, route: { members: [], primary: -1, endpoints: [] }, create_revision: 1n }],
        }));
        call.end();
      },
      apply: (call: ServerUnaryCall<ApplyRequest, ApplyResponse>, cb: sendUnaryData<ApplyResponse>) => {
        applied += call.request.changes.length;
        cb(null, { status: Status.OK, header: stubHeader({ revision: 100n + BigInt(applied) }) });
      },
    } as never);
    writeFileSync(join(dir, 'spec.yaml'), 'name: tls/journal\nreplication: 1\nfragment:\n  length: 1048576\n  compression_codec: NONE\n  refresh_interval: 1m\n');
    const creds = ServerCredentials.createSsl(null, [{ private_key: readFileSync(join(dir, 'key.pem')), cert_chain: readFileSync(join(dir, 'cert.pem')) }]);
    port = await new Promise<number>((resolve, reject) => server!.bindAsync('127.0.0.1:0', creds, (e, p) => (e ? reject(e) : resolve(p))));
  });
  after(() => {
    server?.forceShutdown();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const host of ['127.0.0.1', 'localhost']) {
    it(`https://${host} with the CA trusted lists, and prints no warning`, async () => {
      const args = ['journals', 'list', '--broker.address', `https://${host}:${port}`, '--broker.trusted-ca-file', join(dir, 'cert.pem')];
      const r = await runGazctl(args, { timeoutMs: 30_000 });
      const what = describeResult(args, r);
      assert.equal(r.code, 0, what);
      assert.match(r.stdout.toString(), /tls\/journal/, what);
      // Node's DEP0123 ("Setting the TLS ServerName to an IP address…") must not appear.
      assert.equal(r.stderr, '', what);
    });
  }

  for (const host of ['127.0.0.1', 'localhost']) {
    it(`journals apply over https://${host} with the CA trusted, and prints no warning`, async () => {
      const args = ['journals', 'apply', '--specs', join(dir, 'spec.yaml'), '--broker.address', `https://${host}:${port}`, '--broker.trusted-ca-file', join(dir, 'cert.pem')];
      const r = await runGazctl(args, { timeoutMs: 30_000 });
      const what = describeResult(args, r);
      assert.equal(r.code, 0, what);
      assert.match(r.stderr, /^applied 1 journal change in 1 transaction \(etcd revision \d+\)\n$/, what);
    });
  }

  it('the library sends Apply batches over TLS', async () => {
    const client = new JournalClient({ address: `https://localhost:${port}`, trustedCAFile: join(dir, 'cert.pem') });
    try {
      const before = applied;
      const res = await client.apply([{ expect_mod_revision: -1n, upsert: undefined, delete: 'tls/a' }, { expect_mod_revision: -1n, upsert: undefined, delete: 'tls/b' }], { maxTxnSize: 1 });
      assert.equal(res.batches, 2);
      assert.equal(applied - before, 2);
    } finally {
      client.close();
    }
  });

  it('journals apply: an untrusted certificate is named at once, as for a listing', async () => {
    const args = ['journals', 'apply', '--specs', join(dir, 'spec.yaml'), '--broker.address', `https://127.0.0.1:${port}`, '--timeout', '0'];
    const { r, what } = await failsAtOnce(args);
    assert.match(r.stderr, /certificate .*not trusted \(self-signed certificate\)/, what);
    assert.match(r.stderr, /--broker\.trusted-ca-file/, what);
  });

  it('journals apply: plain http:// to the TLS port says the server expects TLS', async () => {
    const args = ['journals', 'apply', '--specs', join(dir, 'spec.yaml'), '--broker.address', `http://127.0.0.1:${port}`, '--timeout', '0'];
    const { r, what } = await failsAtOnce(args);
    assert.match(r.stderr, /speaks TLS/, what);
  });

  it('an untrusted certificate is named at once, with the flag that fixes it', async () => {
    const args = ['journals', 'list', '--broker.address', `https://127.0.0.1:${port}`, '--timeout', '0'];
    const { r, what } = await failsAtOnce(args);
    assert.match(r.stderr, /certificate .*not trusted \(self-signed certificate\)/, what);
    assert.match(r.stderr, /--broker\.trusted-ca-file/, what);
    assert.doesNotMatch(r.stderr, /unreachable/, what);
  });

  it('plain http:// to the TLS port says the server expects TLS and suggests https://', async () => {
    const args = ['journals', 'list', '--broker.address', `http://127.0.0.1:${port}`, '--timeout', '0'];
    const { r, what } = await failsAtOnce(args);
    assert.match(r.stderr, /speaks TLS/, what);
    assert.match(r.stderr, /https:\/\//, what);
  });
});

describe('a broker whose etcd is frozen', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;
  let dir = '';
  const spec = (replication: number) => `name: frozen/a\nreplication: ${replication}\nfragment:\n  length: 1048576\n  compression_codec: NONE\n  refresh_interval: 1m\n`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gazctl-frozen-'));
    cluster = await startCluster({ brokers: 1 });
    writeFileSync(join(dir, 'a.yaml'), spec(1));
    await gzOk(cluster, ['journals', 'apply', '--specs', join(dir, 'a.yaml')]);
    await waitForJournalsAssigned(cluster, ['frozen/a'], 30_000);
  });
  after(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('an apply is reported as not answered (maybe waiting on etcd), not as unreachable', async () => {
    // A new journal: the broker must write it to etcd.
    writeFileSync(join(dir, 'b.yaml'), spec(1).replace('name: frozen/a\n', 'name: frozen/b\n'));
    const args = ['journals', 'apply', '--specs', join(dir, 'b.yaml'), '--timeout', '3s'];
    const etcdPid = cluster!.etcd.process.pid;
    process.kill(etcdPid, 'SIGSTOP');
    let r;
    try {
      r = await runGazctl(args, { env: brokerEnv(cluster!), timeoutMs: 60_000 });
    } finally {
      process.kill(etcdPid, 'SIGCONT');
    }
    const what = describeResult(args, r);
    assert.equal(r.code, 1, what);
    assert.match(r.stderr, ONE_LINE, what);
    assert.match(r.stderr, /did not answer/, what);
    assert.match(r.stderr, /etcd/, what);
    assert.doesNotMatch(r.stderr, /unreachable/, what);
  });
});
