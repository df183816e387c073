// TLS options towards etcd: loading and checking the files (each failure one line naming the
// option), the http/https rules of the daemons, and the hints added to transport errors.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { EtcdTlsError, etcdEndpointsSecure, etcdTlsHint, loadEtcdTls } from '../../../../src/lib/keyspace/tls.js';
import { buildEtcdTls, unusedEtcdTlsNote } from '../../../../src/core/security.js';
import { UsageError } from '../../../../src/core/options.js';
import { makeTestCerts, type TestCerts } from '../../../../src/testing/certs.js';

describe('etcd TLS files', () => {
  let dir: string;
  let certs: TestCerts;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gazctl-etcd-tls-unit-'));
    certs = makeTestCerts(join(dir, 'certs'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const failsWith = (fn: () => unknown, option: string, re: RegExp) =>
    assert.throws(fn, (e: unknown) => e instanceof EtcdTlsError && e.option === option && re.test(e.message) && !e.message.includes('\n'));

  test('loads a CA, and a certificate with its key', () => {
    assert.equal(loadEtcdTls({}), undefined);
    assert.equal(loadEtcdTls({ certFile: '', certKeyFile: '', trustedCAFile: '' }), undefined);
    const onlyCa = loadEtcdTls({ trustedCAFile: certs.caFile })!;
    assert.ok(onlyCa.ca && !onlyCa.cert && !onlyCa.key);
    const all = loadEtcdTls({ trustedCAFile: certs.caFile, certFile: certs.certFile, certKeyFile: certs.keyFile })!;
    assert.match(all.cert!.toString(), /BEGIN CERTIFICATE/);
    assert.match(all.key!.toString(), /PRIVATE KEY/);
  });

  test('each bad file is one error naming its option', () => {
    failsWith(() => loadEtcdTls({ trustedCAFile: join(dir, 'absent.crt') }), 'trusted-ca-file', /reading CA certificate .*absent\.crt: ENOENT/);
    const junk = join(dir, 'junk.pem');
    writeFileSync(junk, 'not a certificate\n');
    failsWith(() => loadEtcdTls({ trustedCAFile: junk }), 'trusted-ca-file', /junk\.pem: no PEM certificate/);
    failsWith(() => loadEtcdTls({ certFile: certs.certFile }), 'cert-key-file', /needs both --etcd\.cert-file and --etcd\.cert-key-file/);
    failsWith(() => loadEtcdTls({ certKeyFile: certs.keyFile }), 'cert-file', /needs both/);
    failsWith(() => loadEtcdTls({ certFile: join(dir, 'nope.crt'), certKeyFile: certs.keyFile }), 'cert-file', /reading certificate .*nope\.crt: ENOENT/);
    failsWith(() => loadEtcdTls({ certFile: certs.certFile, certKeyFile: join(dir, 'nope.key') }), 'cert-key-file', /reading private key .*nope\.key: ENOENT/);
    // The key of another certificate (the unrelated CA's).
    const otherKey = join(dir, 'other.key');
    copyFileSync(join(certs.dir, 'other.key'), otherKey);
    failsWith(() => loadEtcdTls({ certFile: certs.certFile, certKeyFile: otherKey }), 'cert-file', /key values mismatch|mismatch/i);
  });

  test('the daemons read the files for https:// endpoints only, and say when they go unused', () => {
    const files = { trustedCAFile: certs.caFile, certFile: certs.certFile, certKeyFile: certs.keyFile };
    assert.ok(buildEtcdTls('https://127.0.0.1:2379', files)?.ca);
    assert.equal(buildEtcdTls('http://127.0.0.1:2379', { trustedCAFile: join(dir, 'absent.crt') }), undefined);
    assert.throws(
      () => buildEtcdTls('https://127.0.0.1:2379', { trustedCAFile: join(dir, 'absent.crt') }),
      (e: unknown) => e instanceof UsageError && /^--etcd\.trusted-ca-file: reading CA certificate .*: ENOENT$/.test(e.message),
    );
    assert.throws(() => buildEtcdTls('https://a:2379, http://b:2379', files), (e: unknown) => e instanceof UsageError && /^--etcd\.address: .*mix https:\/\/ and http:\/\//.test(e.message));
    assert.equal(unusedEtcdTlsNote('https://a:2379', files), undefined);
    assert.equal(unusedEtcdTlsNote('http://a:2379', {}), undefined);
    assert.equal(unusedEtcdTlsNote('http://a:2379', { trustedCAFile: '/ca' }), '--etcd.trusted-ca-file ignored: --etcd.address http://a:2379 is not https://');
  });
});

describe('etcd endpoints and error hints', () => {
  test('https is all or nothing', () => {
    assert.equal(etcdEndpointsSecure(['http://a:1', 'http://b:1']), false);
    assert.equal(etcdEndpointsSecure(['https://a:1', 'HTTPS://b:1']), true);
    assert.throws(() => etcdEndpointsSecure(['https://a:1', 'http://b:1']), /mix/);
  });

  test('TLS failures name the option to look at; other failures get nothing', () => {
    assert.match(etcdTlsHint('14 UNAVAILABLE: No connection established. Last error: unable to verify the first certificate'), /--etcd\.trusted-ca-file/);
    assert.match(etcdTlsHint('self-signed certificate in certificate chain'), /--etcd\.trusted-ca-file/);
    assert.match(etcdTlsHint('write EPROTO ... SSL alert number 116'), /--etcd\.cert-file and --etcd\.cert-key-file/);
    assert.equal(etcdTlsHint('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:2379'), '');
  });
});
