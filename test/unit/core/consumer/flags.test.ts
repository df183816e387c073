// The consumer process's options: runconsumer's flags, environment variables and gazette.ini, their
// precedence, print-config's INI, and the refusals.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { parseIni } from '../../../../src/lib/config/ini.js';
import { ConsumerSpec, ReplicaStatus_Code, ShardSpec } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { consumerAllocationRules, encodeConsumerSpec, shardDesiredReplication } from '../../../../src/core/consumer/allocation.js';
import { reduceStatus } from '../../../../src/core/consumer/daemon.js';
import { parseOptions, printConfig, toConfig, UsageError } from '../../../../src/core/consumer/flags.js';

const emptyDir = () => mkdtempSync(join(tmpdir(), 'consumer-flags-'));

describe('consumer options', () => {
  test('defaults are runconsumer\'s, but for the Kubernetes-first addresses (D79)', () => {
    const p = parseOptions(['serve'], {}, emptyDir());
    assert.equal(p.command, 'serve');
    const c = toConfig(p.values);
    assert.equal(c.zone, 'local');
    assert.equal(c.limit, 32);
    assert.equal(c.maxHotStandbys, 3);
    assert.equal(c.watchDelayMs, 30);
    assert.equal(c.brokerAddress, 'http://gazette:8080');
    assert.equal(c.etcdAddress, 'http://etcd:2379');
    assert.equal(c.etcdLeaseSeconds, 20);
    assert.equal(c.etcdPrefix, '');
    assert.equal(c.logLevel, 'warn');
    assert.equal(c.port, 0);
  });

  test('command line over gazette.ini over environment over default; flags before or after the command', () => {
    const dir = emptyDir();
    writeFileSync(join(dir, 'gazette.ini'), '[Consumer]\nLimit = 7\nmax-hot-standbys = 2\n[Etcd]\nLeaseTTL = 9s\n');
    const env = { CONSUMER_LIMIT: '5', CONSUMER_ZONE: 'z-env', ETCD_LEASE_TTL: '3s', CONSUMER_MAX_HOT_STANDBYS: '1' };
    const c = toConfig(parseOptions(['--consumer.limit=11', 'serve', '--etcd.prefix', '/apps/x'], env, dir).values);
    assert.equal(c.limit, 11, 'flag wins');
    assert.equal(c.maxHotStandbys, 2, 'ini (long name) over environment');
    assert.equal(c.etcdLeaseSeconds, 9, 'ini (field name) over environment');
    assert.equal(c.zone, 'z-env', 'environment over default');
    assert.equal(c.etcdPrefix, '/apps/x');
  });

  test('bad input is one clear usage error', () => {
    const dir = emptyDir();
    assert.throws(() => parseOptions(['serve', '--consumer.nope=1'], {}, dir), (e) => e instanceof UsageError && /unknown flag `consumer.nope'/.test(e.message));
    assert.throws(() => parseOptions(['--consumer.limit=1'], {}, dir), (e) => e instanceof UsageError && /specify one command/.test(e.message));
    assert.throws(() => parseOptions(['bogus'], {}, dir), (e) => e instanceof UsageError && /Unknown command/.test(e.message));
    assert.throws(() => toConfig(parseOptions(['serve', '--consumer.limit=x'], {}, dir).values), /--consumer.limit: not an integer/);
    assert.throws(() => toConfig(parseOptions(['serve', '--etcd.lease=500ms'], {}, dir).values), /at least 1s/);
    assert.throws(() => toConfig(parseOptions(['serve', '--etcd.prefix=nope'], {}, dir).values), /must start and not end with \//);
    assert.throws(() => toConfig(parseOptions(['serve', '--log.level=loud'], {}, dir).values), /--log.level/);
    // TLS to etcd is taken too (its files are read at start-up, by consumerSecurity).
    const etcdTls = toConfig(parseOptions(['serve', '--etcd.trusted-ca-file=/ca.pem'], { ETCD_CERT_FILE: '/x.pem', ETCD_CERT_KEY_FILE: '/x.key' }, dir).values);
    assert.deepEqual([etcdTls.etcdCertFile, etcdTls.etcdCertKeyFile, etcdTls.etcdTrustedCAFile], ['/x.pem', '/x.key', '/ca.pem']);
    // TLS and auth keys are taken (security.md), and so are https:// broker addresses.
    const sec = toConfig(parseOptions(['serve', '--broker.address=https://b:8080', '--consumer.auth-keys=a2V5', '--broker.auth-token=t'], { CONSUMER_SERVER_CERT_FILE: '/x.pem', BROKER_TRUSTED_CA_FILE: '/ca.pem' }, dir).values);
    assert.equal(sec.brokerAddress, 'https://b:8080');
    assert.equal(sec.authKeys, 'a2V5');
    assert.equal(sec.serverCertFile, '/x.pem');
    assert.equal(sec.brokerTrustedCAFile, '/ca.pem');
    assert.equal(sec.brokerAuthToken, 't');
    const ini = parseIni('[Consumer]\nLimitt = 3\n', 'gazette.ini');
    assert.throws(() => parseOptions(['serve'], {}, dir, ini), /unknown option "Limitt" in section \[consumer\]/);
  });

  test('print-config writes go-flags\' INI: sections, field names, commented defaults, Go durations', () => {
    const out = printConfig(parseOptions(['print-config', '--consumer.limit=4', '--etcd.lease=1m30s'], {}, emptyDir()).values);
    assert.match(out, /^\[Consumer\]\n; Availability zone within which this process is running\n; Zone = local\n\n/);
    assert.match(out, /\nLimit = 4\n/);
    assert.match(out, /\n; MaxHotStandbys = 3\n/);
    assert.match(out, /\n; WatchDelay = 30ms\n/);
    assert.match(out, /\n\[Broker\]\n/);
    assert.match(out, /\n; TTL = 1m0s\n/);
    assert.match(out, /\n\[Etcd\]\n[\s\S]*\nLeaseTTL = 1m30s\n/);
    assert.match(out, /\n\[Logging\]\n[\s\S]*\n; Level = warn\n/);
  });
});

describe('consumer allocation rules and status writes', () => {
  test('a shard wants 1 + hot standbys, capped, and none while disabled', () => {
    const spec = ShardSpec.fromPartial({ id: 's', hot_standbys: 5 });
    assert.equal(shardDesiredReplication(spec, 3), 4);
    assert.equal(shardDesiredReplication(spec, 9), 6);
    assert.equal(shardDesiredReplication({ ...spec, disable: true }, 3), 0);
  });

  test('decoders read ShardSpec, ConsumerSpec and ReplicaStatus values', () => {
    const rules = consumerAllocationRules(1);
    const kv = (value: Uint8Array) => ({ key: 'k', value, createRevision: 1n, modRevision: 1n, lease: 0n });
    assert.deepEqual(rules.decoders.item('s', kv(ShardSpec.encode(ShardSpec.fromPartial({ id: 's', hot_standbys: 2 })).finish())), { desiredReplication: 2 });
    const member = encodeConsumerSpec({ id: { zone: 'z', suffix: 'm' }, endpoint: 'http://h:1', limit: 7, exiting: true });
    assert.deepEqual(rules.decoders.member('z', 'm', kv(member)), { itemLimit: 7, exiting: true });
    assert.equal(ConsumerSpec.decode(member).process_spec?.endpoint, 'http://h:1');
    assert.equal(rules.decoders.assignment!({ item: 's', zone: 'z', suffix: 'm', slot: 0 } as never, kv(new Uint8Array(0))), undefined);
  });

  test('status updates reduce as upstream: the higher code wins, errors accumulate', () => {
    assert.deepEqual(reduceStatus({ code: ReplicaStatus_Code.STANDBY, errors: [] }, { code: ReplicaStatus_Code.BACKFILL, errors: [] }), { code: ReplicaStatus_Code.STANDBY, errors: [] });
    assert.deepEqual(reduceStatus({ code: ReplicaStatus_Code.STANDBY, errors: ['b'] }, { code: ReplicaStatus_Code.FAILED, errors: ['a'] }), { code: ReplicaStatus_Code.FAILED, errors: ['b', 'a'] });
  });
});

describe('GAZETTE_HINTS_INTERVAL', () => {
  /** runConsumerCommand's exit code and stderr, for a `serve` that must fail before it serves. */
  async function serveWith(interval: string): Promise<{ code: number; stderr: string }> {
    const { runConsumerCommand } = await import('../../../../src/core/consumer/run.js');
    const { sumApp } = await import('../../../../src/core/consumer/sum-app.js');
    let stderr = '';
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    }) as typeof process.stderr.write;
    try {
      const code = await runConsumerCommand(sumApp, { name: 'gazette-sum', argv: ['serve'], env: { GAZETTE_HINTS_INTERVAL: interval }, cwd: tmpdir() });
      return { code, stderr };
    } finally {
      process.stderr.write = write;
    }
  }

  test('a value that is not a Go duration is a usage error naming the variable', async () => {
    const r = await serveWith('soon');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^gazette-sum serve: GAZETTE_HINTS_INTERVAL: .*"soon".*\n$/);
  });

  test('an interval under one second is refused', async () => {
    const r = await serveWith('500ms');
    assert.equal(r.code, 2);
    assert.equal(r.stderr, 'gazette-sum serve: GAZETTE_HINTS_INTERVAL must be at least 1s (got "500ms")\n');
  });
});
