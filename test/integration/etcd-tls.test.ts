// TLS to etcd, end to end with real processes: etcd 3.6 serving only https:// with client
// certificate auth (--client-cert-auth), certificates from a test CA. Our broker and a Go
// broker beside it (upstream's --etcd.* flags, the same for both) register on it and share
// journals; our consumer (the sum app) runs its shards on it; our gazctl applies, lists, appends
// and reads through both brokers, and `gazctl health` checks the etcd member over TLS. Each way
// of getting TLS wrong is one line naming the option: a bad file stops our daemons at start-up
// (exit 2); an untrusted etcd or a missing client certificate is logged once and waited out, as
// an unreachable etcd is.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import {
  createSumAppJournals,
  goBroker,
  makeTestCerts,
  pollUntil,
  rangePrefix,
  scrubEnv,
  spawnManaged,
  startCluster,
  startConsumers,
  sumAppLayout,
  tsBroker,
  tsConsumer,
  waitForJournalsAssigned,
  type Cluster,
  type ConsumerGroup,
  type TestCerts,
} from '../../src/testing/index.js';
import { Keyspace, KeyspaceError } from '../../src/lib/keyspace/index.js';
import { describeResult, runGazctl } from '../helpers/cli.js';
import { gzOk, oneStderrLine } from '../helpers/journals.js';

const JOURNALS = ['etls/a', 'etls/b'];
const SPECS = `name: etls/
replication: 2
labels:
- name: app
  value: etls
fragment:
  length: 4096
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1s
children:
${JOURNALS.map((j) => `- name: ${j}`).join('\n')}
`;
const layout = sumAppLayout({ name: 'etlsum', shards: 1 });
const SHARDS = `common:
  recovery_log_prefix: ${layout.recoveryLogPrefix}
  hint_prefix: ${layout.hintPrefix}
  hint_backups: 1
  max_txn_duration: 1s
  hot_standbys: 0
  labels:
  - name: app
    value: ${layout.name}
shards:
${layout.shards.map((s) => `- id: ${s.id}\n  sources:\n${s.sources.map((j) => `  - journal: ${j}`).join('\n')}`).join('\n')}
`;

const BROKER_BIN = fileURLToPath(new URL('../../../bin/gazette.js', import.meta.url));
const SUM_BIN = fileURLToPath(new URL('../../../bin/gazette-sum.js', import.meta.url));

describe('etcd with client TLS: our broker and consumer, and a Go broker, on it', { timeout: 180_000 }, () => {
  let dir: string;
  let certs: TestCerts;
  let cluster: Cluster | undefined;
  let consumers: ConsumerGroup | undefined;
  const etcdEnv = (extra: Record<string, string> = {}) => ({
    ETCD_ADDRESS: cluster!.etcd.endpoint,
    ETCD_TRUSTED_CA_FILE: certs.caFile,
    ETCD_CERT_FILE: certs.certFile,
    ETCD_CERT_KEY_FILE: certs.keyFile,
    ...extra,
  });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gazctl-etcd-tls-'));
    certs = makeTestCerts(join(dir, 'certs'));
    cluster = await startCluster({
      brokerImpls: [tsBroker, goBroker],
      etcdTls: { certFile: certs.certFile, keyFile: certs.keyFile, caFile: certs.caFile },
    });
  });
  after(async () => {
    await consumers?.stop();
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('etcd serves https:// only to a client certificate it trusts; both brokers registered on it', async () => {
    const endpoint = cluster!.etcd.endpoint;
    assert.match(endpoint, /^https:\/\/127\.0\.0\.1:\d+$/);
    // Through the harness (its client presents the test certificate): both members are there.
    const members = await rangePrefix(endpoint, `${cluster!.etcdPrefix}/members/`);
    assert.equal(members.length, 2, members.map((m) => m.key).join(', '));
    const attempt = async (tls: ConstructorParameters<typeof Keyspace>[0]['tls']) => {
      const ks = new Keyspace({ endpoints: endpoint, callTimeoutMs: 5000, ...(tls ? { tls } : {}) });
      try {
        await ks.range(`${cluster!.etcdPrefix}/`);
        return 'answered';
      } catch (e) {
        assert.ok(e instanceof KeyspaceError, String(e));
        return e.message;
      } finally {
        ks.close();
      }
    };
    const ca = readFileSync(certs.caFile);
    const noCert = await attempt({ ca });
    assert.match(noCert, /--etcd\.cert-file and --etcd\.cert-key-file/, noCert);
    const otherCa = await attempt({ ca: readFileSync(certs.otherCaFile), cert: readFileSync(certs.certFile), key: readFileSync(certs.keyFile) });
    assert.match(otherCa, /not trusted: pass etcd's CA with --etcd\.trusted-ca-file/, otherCa);
    assert.equal(await attempt({ ca, cert: readFileSync(certs.certFile), key: readFileSync(certs.keyFile) }), 'answered');
    console.log(`# without a client certificate: ${noCert}`);
    console.log(`# with another CA: ${otherCa}`);
  });

  test('our gazctl applies, lists, appends and reads through our broker and the Go broker', async () => {
    const c = cluster!;
    await gzOk(c, ['journals', 'apply', '--specs', '-'], { input: SPECS });
    const listed = await waitForJournalsAssigned(c, JOURNALS, 60_000);
    for (const j of JOURNALS) assert.equal(listed.get(j)!.route!.members.length, 2, `${j} is on both brokers`);
    const expected = new Map(JOURNALS.map((j) => [j, '']));
    for (const i of [0, 1]) {
      const env = { BROKER_ADDRESS: c.brokers[i]!.endpoint };
      const list = await gzOk(c, ['journals', 'list', '-l', 'app=etls'], { env });
      for (const j of JOURNALS) assert.match(list.stdout.toString(), new RegExp(j));
      for (const j of JOURNALS) {
        const line = `via ${c.implOf(i).name} to ${j}\n`;
        await gzOk(c, ['journals', 'append', '-l', `name=${j}`], { input: line, env });
        expected.set(j, expected.get(j)! + line);
      }
    }
    for (const i of [0, 1]) {
      for (const j of JOURNALS) {
        const r = await gzOk(c, ['journals', 'read', '-l', `name=${j}`], { env: { BROKER_ADDRESS: c.brokers[i]!.endpoint } });
        assert.equal(r.stdout.toString(), expected.get(j), `${j} read via ${c.implOf(i).name}`);
      }
    }
  });

  test('our consumer runs its shard on the TLS etcd: applied with gazctl, it becomes PRIMARY', async () => {
    const c = cluster!;
    await createSumAppJournals(c, layout);
    consumers = await startConsumers(c, { impl: tsConsumer });
    const env = { CONSUMER_ADDRESS: consumers.consumers[0]!.endpoint, BROKER_ADDRESS: c.brokerAddress };
    await gzOk(c, ['shards', 'apply'], { input: SHARDS, env });
    await pollUntil(
      'the shard PRIMARY',
      async () => {
        const l = await runGazctl(['shards', 'list', '-l', `app=${layout.name}`], { env });
        return l.code === 0 && (l.stdout.toString().match(/PRIMARY/g) ?? []).length === layout.shards.length;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    // Its member key and the shard's status went through etcd over TLS.
    const members = await rangePrefix(c.etcd.endpoint, `${consumers.etcdPrefix}/members/`);
    assert.equal(members.length, 1);
  });

  test('gazctl health checks the etcd member over TLS; without the client certificate, one problem line names the option', async () => {
    const c = cluster!;
    const base = ['health', '-v', '--timeout', '20s'];
    const ok = await runGazctl(base, { env: { BROKER_ADDRESS: c.brokerAddress, ...etcdEnv() } });
    assert.equal(ok.code, 0, describeResult(base, ok));
    assert.match(ok.stdout.toString(), /etcd .*member [0-9a-f]+ \(etcd 3\.6/);
    const noCert = await runGazctl(base, { env: { BROKER_ADDRESS: c.brokerAddress, ...etcdEnv({ ETCD_CERT_FILE: '', ETCD_CERT_KEY_FILE: '' }) } });
    assert.equal(noCert.code, 1, describeResult(base, noCert));
    const problems = noCert.stdout.toString().split('\n').filter((l) => /etcd/.test(l) && /--etcd\.cert-file/.test(l));
    assert.equal(problems.length, 1, describeResult(base, noCert));
    const args = [...base, '--etcd.trusted-ca-file', join(dir, 'absent.crt')];
    const bad = await runGazctl(args, { env: { BROKER_ADDRESS: c.brokerAddress, ...etcdEnv() } });
    assert.equal(bad.code, 2, describeResult(args, bad));
    assert.match(oneStderrLine(args, bad), /--etcd\.trusted-ca-file: reading CA certificate .*absent\.crt: ENOENT/);
    console.log(`# health without a client certificate: ${problems[0]}`);
  });

  test('our daemons refuse a bad TLS file at start-up: one line naming the option, exit 2', async () => {
    const endpoint = cluster!.etcd.endpoint;
    const run = async (name: string, bin: string, args: string[]) => {
      const p = spawnManaged({ name, command: process.execPath, args: [bin, 'serve', ...args], logFile: join(dir, `${name}.log`), env: scrubEnv(process.env, ['BROKER_', 'CONSUMER_', 'ETCD_', 'LOG_']) });
      const exit = await p.waitForExit(20_000);
      return { code: exit.code, out: readFileSync(p.logFile, 'utf8') };
    };
    const broker = await run('broker-bad-ca', BROKER_BIN, ['--broker.port=0', `--etcd.address=${endpoint}`, `--etcd.trusted-ca-file=${join(dir, 'absent.crt')}`]);
    assert.equal(broker.code, 2, broker.out);
    assert.match(broker.out, /^gazette serve: --etcd\.trusted-ca-file: reading CA certificate .*absent\.crt: ENOENT\n$/);
    const consumer = await run('consumer-no-key', SUM_BIN, ['--consumer.port=0', `--etcd.address=${endpoint}`, `--etcd.trusted-ca-file=${certs.caFile}`, `--etcd.cert-file=${certs.certFile}`]);
    assert.equal(consumer.code, 2, consumer.out);
    assert.match(consumer.out, /^gazette-sum serve: --etcd\.cert-key-file: a client certificate needs both --etcd\.cert-file and --etcd\.cert-key-file\n$/);
  });

  test('our broker on an etcd it does not trust, or without a client certificate: one line naming the option, then it waits as for an unreachable etcd', async () => {
    const endpoint = cluster!.etcd.endpoint;
    const cases = [
      { name: 'broker-other-ca', args: [`--etcd.trusted-ca-file=${certs.otherCaFile}`, `--etcd.cert-file=${certs.certFile}`, `--etcd.cert-key-file=${certs.keyFile}`], want: /--etcd\.trusted-ca-file/ },
      { name: 'broker-no-cert', args: [`--etcd.trusted-ca-file=${certs.caFile}`], want: /--etcd\.cert-file and --etcd\.cert-key-file/ },
    ];
    for (const k of cases) {
      const p = spawnManaged({
        name: k.name,
        command: process.execPath,
        args: [BROKER_BIN, 'serve', '--broker.port=0', '--broker.host=127.0.0.1', `--etcd.address=${endpoint}`, '--etcd.prefix=/etls-wrong', ...k.args],
        logFile: join(dir, `${k.name}.log`),
        env: scrubEnv(process.env, ['BROKER_', 'ETCD_', 'LOG_']),
      });
      try {
        const line = await pollUntil(
          `${k.name} to log its etcd failure`,
          async () => readFileSync(p.logFile, 'utf8').split('\n').find((l) => /loading the etcd keyspace failed; retrying/.test(l)),
          { timeoutMs: 30_000, intervalMs: 200, describe: () => p.describe() },
        );
        assert.match(line, k.want, line);
        assert.ok(p.running, `${k.name} keeps waiting for etcd\n${p.describe()}`);
        console.log(`# ${k.name}: ${line}`);
        // Nothing else in the log, but for Node's warning about a TLS server name that is an IP
        // address (grpc-js sets it from the etcd address, 127.0.0.1 here; a DNS name does not).
        const others = readFileSync(p.logFile, 'utf8').split('\n').filter((l) => l !== '' && l !== line && !/DEP0123|--trace-deprecation/.test(l));
        assert.deepEqual(others, [], p.describe());
      } finally {
        await p.stop('SIGKILL');
      }
    }
  });
});
