import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseServeArgs, serveHelp, SERVE_FLAGS, UsageError } from '../../../../src/core/broker/flags.js';

test('defaults are upstream\'s, but for the Kubernetes-first etcd address (D79)', () => {
  const c = parseServeArgs([], {});
  assert.equal(c.zone, 'local');
  assert.equal(c.limit, 1024);
  assert.equal(c.maxReplication, 9);
  assert.equal(c.minAppendRate, 65536);
  assert.equal(c.maxAppendRate, 0);
  assert.equal(c.etcdAddress, 'http://etcd:2379');
  assert.equal(c.etcdPrefix, '/gazette/cluster');
  assert.equal(c.etcdLeaseSeconds, 20);
  assert.equal(c.watchDelayMs, 30);
  assert.equal(c.logLevel, 'warn');
  assert.equal(c.logFormat, 'text');
  assert.equal(c.port, 0);
  assert.equal(c.fileOnly, false);
});

test('flags take --name=value and --name value; a flag beats its env var, which beats the default', () => {
  const c = parseServeArgs(['--broker.port=8080', '--broker.id', 'b1', '--broker.file-only', '--etcd.lease=5s'], {
    BROKER_PORT: '9090',
    BROKER_ZONE: 'us-east',
    ETCD_PREFIX: '/x/y',
    LOG_LEVEL: 'debug',
  });
  assert.equal(c.port, 8080);
  assert.equal(c.id, 'b1');
  assert.equal(c.fileOnly, true);
  assert.equal(c.etcdLeaseSeconds, 5);
  assert.equal(c.zone, 'us-east');
  assert.equal(c.etcdPrefix, '/x/y');
  assert.equal(c.logLevel, 'debug');
});

test('bad values are one UsageError naming the flag', () => {
  const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
    [['--nope'], {}, /unknown flag --nope/],
    [['--broker.limit=many'], {}, /--broker\.limit: not an integer/],
    [['--broker.port=70000'], {}, /--broker\.port: not a port/],
    [['--etcd.lease=soon'], {}, /--etcd\.lease: not a duration/],
    [['--log.level=loud'], {}, /--log\.level/],
    [['--etcd.prefix=/trailing/'], {}, /--etcd\.prefix/],
    [[], { BROKER_AUTO_SUSPEND: 'true' }, /--broker\.auto-suspend \(BROKER_AUTO_SUSPEND\) is not supported/],
    [['--broker.id'], {}, /expected argument for flag --broker\.id/],
    [['serve'], {}, /unexpected argument "serve"/],
  ];
  for (const [args, env, re] of cases) {
    assert.throws(() => parseServeArgs(args, env), (e: unknown) => e instanceof UsageError && re.test(e.message) && !e.message.includes('\n'), args.join(' '));
  }
});

test('help lists every flag with its env var', () => {
  const help = serveHelp();
  for (const f of SERVE_FLAGS) {
    assert.ok(help.includes(`--${f.name}`), f.name);
    assert.ok(help.includes(`[$${f.env}]`), f.env);
  }
  for (const required of ['broker.port', 'broker.host', 'broker.id', 'broker.zone', 'broker.file-root', 'broker.limit', 'broker.max-replication', 'broker.min-append-rate', 'etcd.address', 'etcd.prefix', 'etcd.lease', 'log.level', 'log.format', 'broker.file-only', 'broker.max-append-rate']) {
    assert.ok(SERVE_FLAGS.some((f) => f.name === required), required);
  }
});

test('TLS and auth-key options are taken, from flags or the environment (security.md)', () => {
  const c = parseServeArgs(['--broker.server-cert-file=/tls.crt', '--broker.auth-keys', 'a2V5,AA=='], {
    BROKER_SERVER_CERT_KEY_FILE: '/tls.key',
    BROKER_SERVER_CA_FILE: '/clients-ca.crt',
    BROKER_PEER_CA_FILE: '/ca.crt',
  });
  assert.equal(c.serverCertFile, '/tls.crt');
  assert.equal(c.serverCertKeyFile, '/tls.key');
  assert.equal(c.serverCAFile, '/clients-ca.crt');
  assert.equal(c.peerCAFile, '/ca.crt');
  assert.equal(c.peerCertFile, '');
  assert.equal(c.authKeys, 'a2V5,AA==');
});

test('--broker.advertise: the endpoint put in the member key, an http(s)://host:port URL', () => {
  assert.equal(parseServeArgs([], {}).advertise, '');
  assert.equal(parseServeArgs(['--broker.advertise=http://127.0.0.1:9000'], {}).advertise, 'http://127.0.0.1:9000');
  assert.equal(parseServeArgs([], { BROKER_ADVERTISE: 'http://proxy.example:80' }).advertise, 'http://proxy.example:80');
  assert.equal(parseServeArgs(['--broker.advertise', 'https://[::1]:443'], {}).advertise, 'https://[::1]:443');
  for (const bad of ['127.0.0.1:9000', 'grpc://x:1', 'http://x', 'http://x:1/path', 'http://x:1/']) {
    assert.throws(() => parseServeArgs([`--broker.advertise=${bad}`], {}), (e: unknown) => e instanceof UsageError && /--broker\.advertise/.test(e.message), bad);
  }
});

test('etcd TLS options are taken, from flags or the environment (upstream names)', () => {
  const c = parseServeArgs(['--etcd.address=https://etcd:2379', '--etcd.trusted-ca-file=/etcd-ca.crt'], { ETCD_CERT_FILE: '/etcd.crt', ETCD_CERT_KEY_FILE: '/etcd.key' });
  assert.deepEqual([c.etcdAddress, c.etcdTrustedCAFile, c.etcdCertFile, c.etcdCertKeyFile], ['https://etcd:2379', '/etcd-ca.crt', '/etcd.crt', '/etcd.key']);
});
