// NODE_EXTRA_CA_CERTS through the launcher (bin/gazctl), which defers loading it to the first TLS
// context (src/cli/deferred-ca.ts). Against real TLS servers whose certificates a private CA,
// made with openssl for this run, signed: a gRPC broker stub, the test S3 server (versitygw) over
// https, and Node's https server. The CA is trusted only through NODE_EXTRA_CA_CERTS.

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server as HttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Server, ServerCredentials, type ServerWritableStream } from '@grpc/grpc-js';

import { canDefer, contextOptionsRead, sharingKey } from '../../src/cli/deferred-ca.js';
import { JournalService, ListResponse, Status, type ListRequest } from '../../src/lib/protocol/gen/broker/protocol.js';
import { stubHeader } from '../../src/testing/stubs.js';
import { startS3, type S3Server } from '../../src/testing/index.js';
import { describeResult, REPO_ROOT, runGazctl, type RunGazctlOptions } from '../helpers/cli.js';

const execFileAsync = promisify(execFile);
const MISSING = '/nonexistent/gazctl-test-ca.pem';
const NODE_WARNING = `Warning: Ignoring extra certs from \`${MISSING}\`, load failed:`;

function openssl(args: string[], cwd: string) {
  execFileSync('openssl', args, { cwd, stdio: 'ignore' });
}

describe('NODE_EXTRA_CA_CERTS, loaded at the first TLS context (bin/gazctl)', { timeout: 120_000 }, () => {
  let dir = '';
  let ca = '';
  let grpc: Server | undefined;
  let grpcPort = 0;
  let s3: S3Server | undefined;
  let https: HttpsServer | undefined;
  let httpsPort = 0;

  const run = (args: string[], opts: RunGazctlOptions = {}) => runGazctl(args, { timeoutMs: 30_000, launcher: true, ...opts });
  const withCA = (file: string, env: Record<string, string> = {}): RunGazctlOptions => ({ env: { NODE_EXTRA_CA_CERTS: file, ...env } });
  const withoutCA = (env: Record<string, string> = {}): RunGazctlOptions => ({ env, unsetEnv: ['NODE_EXTRA_CA_CERTS'] });
  const s3Env = () => ({
    AWS_ACCESS_KEY_ID: s3!.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3!.credentials.secretAccessKey,
    AWS_REGION: s3!.credentials.region,
    AWS_EC2_METADATA_DISABLED: 'true',
  });
  const listArgs = () => ['journals', 'list', '--broker.address', `https://localhost:${grpcPort}`, '--timeout', '0'];
  // Retention pruning lists the journal's S3 store itself (the broker is asked only for the spec).
  const pruneArgs = () => ['journals', 'prune', '-l', 'name=ca/journal', '--dry-run', '--broker.address', `https://localhost:${grpcPort}`, '--timeout', '0'];

  before(async () => {
    try {
      execFileSync('openssl', ['version'], { stdio: 'ignore' });
    } catch (err) {
      assert.fail(`these tests need openssl on PATH to make certificates: ${(err as Error).message}`);
    }
    dir = mkdtempSync(join(tmpdir(), 'gazctl-ca-'));
    // A CA, and a server certificate for localhost and 127.0.0.1 that it signs.
    openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=gazctl test CA', '-keyout', 'ca-key.pem', '-out', 'ca.pem'], dir);
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'key.pem', '-out', 'server.csr'], dir);
    writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'cert.pem'], dir);
    ca = join(dir, 'ca.pem');
    const cert = readFileSync(join(dir, 'cert.pem'));
    const key = readFileSync(join(dir, 'key.pem'));

    s3 = await startS3({ tls: { certFile: join(dir, 'cert.pem'), keyFile: join(dir, 'key.pem'), ca: readFileSync(ca) } });

    const { replicate: _r, ...service } = JournalService;
    grpc = new Server();
    grpc.addService(service, {
      list: (call: ServerWritableStream<ListRequest, ListResponse>) => {
        call.write(
          ListResponse.fromPartial({
            status: Status.OK,
            header: stubHeader(),
            journals: [{ spec: { name: 'ca/journal', replication: 1, labels: { labels: [] }, fragment: { stores: [s3!.storeUrl()], retention: { seconds: 3600n, nanos: 0 } } }, mod_revision: 5n, route: { members: [], primary: -1, endpoints: [] }, create_revision: 1n }],
          }),
        );
        call.end();
      },
    } as never);
    const creds = ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: cert }]);
    grpcPort = await new Promise<number>((resolve, reject) => grpc!.bindAsync('127.0.0.1:0', creds, (e, p) => (e ? reject(e) : resolve(p))));


    https = createServer({ cert, key }, (_req, res) => res.end('ok'));
    httpsPort = await new Promise<number>((resolve) => https!.listen(0, '127.0.0.1', () => resolve((https!.address() as { port: number }).port)));
  });
  after(async () => {
    grpc?.forceShutdown();
    https?.close();
    await s3?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('this Node lets the trust be copied: its own createSecureContext reads only known options', () => {
    const read = contextOptionsRead();
    assert.ok(read, 'the option names are read from Node');
    for (const k of ['ca', 'cert', 'key', 'pfx', 'minVersion', 'secureOptions', 'ciphers']) assert.ok(read.includes(k), `${k} in ${read.join(' ')}`);
    assert.equal(canDefer({}, []), true);
    assert.equal(canDefer({ NODE_OPTIONS: '--max-old-space-size=512 --use-openssl-ca' }, []), false);
    assert.equal(canDefer({}, ['--use-openssl-ca']), false);
  });

  it('contexts are shared only between plain settings', () => {
    assert.equal(sharingKey(undefined), sharingKey({}));
    assert.equal(sharingKey({ minVersion: 'TLSv1.2' }), sharingKey({ minVersion: 'TLSv1.2', servername: 'x', host: 'y', ALPNProtocols: ['h2'] } as never));
    assert.notEqual(sharingKey({ minVersion: 'TLSv1.2' }), sharingKey({ minVersion: 'TLSv1.3' }));
    assert.notEqual(sharingKey({ ciphers: undefined }), sharingKey({ ciphers: null } as never));
    for (const k of ['cert', 'key', 'pfx', 'passphrase', 'crl', 'ticketKeys']) assert.equal(sharingKey({ [k]: 'x' }), undefined, k);
    assert.equal(sharingKey({ ecdhCurve: {} } as never), undefined);
  });

  it('a TLS broker signed by the CA is trusted (gRPC), with nothing on stderr', async () => {
    const r = await run(listArgs(), withCA(ca));
    const what = describeResult(listArgs(), r);
    assert.equal(r.code, 0, what);
    assert.match(r.stdout.toString(), /ca\/journal/, what);
    assert.equal(r.stderr, '', what);
  });

  it('the S3 store over https, signed by the CA, is trusted (the SDK)', async () => {
    const r = await run(pruneArgs(), withCA(ca, s3Env()));
    const what = describeResult(pruneArgs(), r);
    assert.equal(r.code, 0, what);
    assert.doesNotMatch(r.stderr, /gazctl:|Warning/, what);
  });

  it('without NODE_EXTRA_CA_CERTS, both are refused with one line', async () => {
    let r = await run(listArgs(), withoutCA());
    assert.equal(r.code, 1, describeResult(listArgs(), r));
    assert.match(r.stderr, /^gazctl: [^\n]*not trusted[^\n]*\n$/, describeResult(listArgs(), r));
    // The broker is trusted here (--broker.trusted-ca-file); the store is not.
    const args = [...pruneArgs(), '--broker.trusted-ca-file', ca];
    r = await run(args, withoutCA(s3Env()));
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(r.stderr, /certificate/, describeResult(args, r));
  });

  it('the file is read only when a TLS context is made: a command without TLS never reads it', async () => {
    // Node itself reads the file at start-up and warns when it cannot: node bin/run.js does.
    const eager = await runGazctl(['--version'], { ...withCA(MISSING), launcher: false });
    assert.equal(eager.code, 0, describeResult(['--version'], eager));
    assert.ok(eager.stderr.includes(NODE_WARNING), eager.stderr);
    // Through the launcher, a run without TLS never reads it.
    const deferred = await run(['--version'], withCA(MISSING));
    assert.equal(deferred.code, 0, describeResult(['--version'], deferred));
    assert.equal(deferred.stderr, '');
    // A run that makes a TLS context reads it then, and warns in Node's words once.
    const tls = await run(listArgs(), withCA(MISSING));
    assert.equal(tls.code, 1, describeResult(listArgs(), tls));
    assert.equal(tls.stderr.split(NODE_WARNING).length, 2, tls.stderr);
    assert.match(tls.stderr, /not trusted/, tls.stderr);
  });

  it('with --use-openssl-ca in NODE_OPTIONS the launcher leaves the variable to Node', async () => {
    const r = await run(['--version'], withCA(MISSING, { NODE_OPTIONS: '--use-openssl-ca' }));
    assert.equal(r.code, 0, describeResult(['--version'], r));
    assert.ok(r.stderr.includes(NODE_WARNING), r.stderr);
  });

  it('where the trust cannot be copied, bin/run.js runs Node again with the variable in place', async () => {
    // As the launcher hands it over, but on a Node that must load the file itself.
    const args = listArgs();
    const r = await runGazctl(args, { env: { GAZCTL_DEFERRED_CA_CERTS: ca, NODE_OPTIONS: '--use-openssl-ca' }, unsetEnv: ['NODE_EXTRA_CA_CERTS'], launcher: false, timeoutMs: 30_000 });
    // --use-openssl-ca trusts OpenSSL's store plus the file: the broker is trusted, via the file.
    assert.equal(r.code, 0, describeResult(args, r));
    assert.match(r.stdout.toString(), /ca\/journal/);
    // The exit code of the second Node is the command's.
    const bad = await runGazctl(['journals', 'list', '-l', '=x'], {
      env: { GAZCTL_DEFERRED_CA_CERTS: ca, NODE_OPTIONS: '--use-openssl-ca' },
      unsetEnv: ['NODE_EXTRA_CA_CERTS'],
      launcher: false,
    });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /^gazctl: -l\/--selector: invalid selector[^\n]+\n$/);
  });

  it('child processes get NODE_EXTRA_CA_CERTS back, and not the launcher variable', async () => {
    const out = join(dir, 'editor-env.txt');
    const editor = join(dir, 'editor.sh');
    writeFileSync(editor, `#!/bin/sh\necho "extra=\${NODE_EXTRA_CA_CERTS-unset} deferred=\${GAZCTL_DEFERRED_CA_CERTS-unset}" > ${out}\n`, { mode: 0o755 });
    const args = ['journals', 'edit', '-l', 'name=ca/journal', '--broker.address', `https://localhost:${grpcPort}`];
    const r = await run(args, withCA(ca, { EDITOR: editor }));
    assert.equal(r.code, 0, describeResult(args, r));
    assert.equal(readFileSync(out, 'utf8'), `extra=${ca} deferred=unset\n`);
  });

  it('one context is made for many connections with the same settings; an explicit ca is left alone', async () => {
    // In a Node of its own, as bin/run.js sets it up, against Node's https server.
    const script = `
      const { deferExtraCACerts } = await import(${JSON.stringify(join(REPO_ROOT, 'dist/src/cli/deferred-ca.js'))});
      const https = await import('node:https');
      const d = deferExtraCACerts(${JSON.stringify(ca)});
      const get = (opts) => new Promise((resolve) => {
        const req = https.get({ host: '127.0.0.1', port: ${httpsPort}, agent: false, ...opts }, (res) => { res.resume(); res.on('end', () => resolve('ok')); });
        req.on('error', (e) => resolve(e.code));
      });
      const plain = await Promise.all([get({}), get({}), get({}), get({}), get({})]);
      const tls12 = await get({ maxVersion: 'TLSv1.2' });
      const made = d.made();
      const own = await get({ ca: (await import('node:tls')).rootCertificates[0] });
      console.log(JSON.stringify({ plain, tls12, made, own, after: d.made() }));
    `;
    // Not spawnSync: the server answering it runs in this process.
    const p = await execFileAsync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, NODE_EXTRA_CA_CERTS: '' }, timeout: 30_000 });
    const res = JSON.parse(p.stdout) as { plain: string[]; tls12: string; made: number; own: string; after: number };
    assert.deepEqual(res.plain, ['ok', 'ok', 'ok', 'ok', 'ok']);
    assert.equal(res.tls12, 'ok');
    assert.equal(res.made, 2, 'one context per distinct settings');
    // A `ca` of its own replaces the default trust, as in Node: the CA is not added to it.
    assert.notEqual(res.own, 'ok');
    assert.equal(res.after, 2);
  });
});
