// gazctl through a real SOCKS5 proxy (socks5-server, src/testing/socks.ts), with nothing
// bypassing it: gazctl runs in a fresh network namespace (`unshare -n`) whose only way out is a
// relay from 127.0.0.1:1080 there to the proxy's Unix socket (file systems are shared across
// network namespaces; addresses are not). The brokers, etcd and the S3 server listen on the
// host's loopback, which the namespace's own loopback is not: a connection that skipped the
// proxy would find nothing. The broker and etcd are also named by host names that only the
// proxy resolves, so the names must travel unresolved (SOCKS5 remote DNS).
//
// Configuration comes from the environment only, as a pod would have it:
// SOCKS_SERVER_SERVICE_HOST / _PORT, BROKER_ADDRESS, AWS_* for the S3 store.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/client/index.js';
import { CompressionCodec, JournalSpec } from '../../src/lib/protocol/gen/broker/protocol.js';
import { nanosToDuration } from '../../src/lib/protocol/duration.js';
import {
  freePort,
  pollUntil,
  startCluster,
  startRelay,
  startS3,
  startSocksServer,
  waitForJournalsAssigned,
  type Cluster,
  type RelayProcess,
  type S3Server,
  type SocksProcess,
} from '../../src/testing/index.js';
import { describeResult, runGazctl, spawnGazctl, type GazctlResult } from '../helpers/cli.js';
import { listFragmentsAt, oneStderrLine, tempDir } from '../helpers/journals.js';

process.env.AWS_EC2_METADATA_DISABLED = 'true';

const JOURNAL = 'socks/events';
const BROKER_NAME = 'broker.gazette.test';
const ETCD_NAME = 'etcd.gazette.test';
const CONSUMER_NAME = 'consumer.gazette.test';
/** Names only the proxy resolves. */
const HOSTS = { [BROKER_NAME]: '127.0.0.1', [ETCD_NAME]: '127.0.0.1', [CONSUMER_NAME]: '127.0.0.1' };
/** Bound by each test's own timeout too: a hang fails the test rather than the run. */
const RUN_TIMEOUT_MS = 45_000;

function portOf(endpoint: string): string {
  return new URL(endpoint).port;
}

describe('gazctl through a SOCKS5 proxy, from a network namespace with no other way out', { timeout: 240_000 }, () => {
  let s3: S3Server;
  let cluster: Cluster;
  let socks: SocksProcess;
  let relay: RelayProcess;
  let tmp: { dir: string; cleanup: () => void };
  let socksPath: string;
  let inNamespace: string[];
  let data: Buffer;
  let podEnv: Record<string, string>;

  /** gazctl in the namespace with the pod's environment (plus `env`). */
  const gzNs = (args: string[], env: Record<string, string> = {}, input?: string): Promise<GazctlResult> =>
    runGazctl(args, { env: { ...podEnv, ...env }, wrap: inNamespace, timeoutMs: RUN_TIMEOUT_MS, ...(input !== undefined ? { input } : {}) });
  const ok = async (args: string[], env: Record<string, string> = {}, input?: string): Promise<GazctlResult> => {
    const r = await gzNs(args, env, input);
    assert.equal(r.code, 0, describeResult(args, r));
    return r;
  };

  before(async () => {
    tmp = tempDir('gazctl-socks-test-');
    socksPath = join(tmp.dir, 'socks.sock');
    s3 = await startS3({ bucket: 'socks' });
    cluster = await startCluster({
      brokers: 1,
      brokerEnv: { AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: s3.credentials.region },
    });
    socks = await startSocksServer({ listen: [`unix:${socksPath}`], hosts: HOSTS });
    // The namespace lives as long as the relay, its first process; gazctl joins it with nsenter.
    relay = await startRelay([['127.0.0.1:1080', `unix:${socksPath}`]], ['unshare', '--net', 'sh', '-c', 'ip link set lo up && exec "$0" "$@"']);
    inNamespace = ['nsenter', `--net=/proc/${relay.process.pid}/ns/net`, '--'];
    podEnv = {
      SOCKS_SERVER_SERVICE_HOST: '127.0.0.1',
      SOCKS_SERVER_SERVICE_PORT: '1080',
      BROKER_ADDRESS: `http://${BROKER_NAME}:${portOf(cluster.brokerAddress)}`,
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: s3.credentials.region,
      AWS_EC2_METADATA_DISABLED: 'true',
    };

    // A journal with persisted fragments in S3 (written from the host, directly).
    const client = new JournalClient({ address: cluster.brokerAddress });
    try {
      const spec = JournalSpec.fromPartial({
        name: JOURNAL,
        replication: 1,
        fragment: { length: 1024n, compression_codec: CompressionCodec.NONE, stores: [s3.storeUrl('frags/')], refresh_interval: nanosToDuration(1_000_000_000n) },
      });
      await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
      await waitForJournalsAssigned(cluster, [JOURNAL], 30_000);
      const parts: Buffer[] = [];
      for (let i = 0; i < 3; i++) {
        const b = Buffer.from(`${String(i).repeat(1999)}\n`);
        const a = client.append(JOURNAL);
        await a.write(b);
        await a.commit();
        parts.push(b);
      }
      data = Buffer.concat(parts);
      await pollUntil(
        'fragments persisted to S3',
        async () => (await listFragmentsAt(cluster.brokerAddress, JOURNAL)).filter((f) => f.mod_time !== 0n).length >= 2,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    } finally {
      client.close();
    }
  });

  after(async () => {
    await relay?.stop();
    await socks?.stop();
    await cluster?.stop();
    await s3?.stop();
    tmp?.cleanup();
  });

  test('without the proxy, the namespace reaches nothing', async () => {
    const args = ['journals', 'list', '--timeout', '1s'];
    const r = await runGazctl(args, { env: { BROKER_ADDRESS: cluster.brokerAddress }, wrap: inNamespace, timeoutMs: RUN_TIMEOUT_MS });
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(oneStderrLine(args, r), /unreachable/);
  });

  test('list, append, read (direct from S3), fragments --verify, forks, store-health and health go through it', async () => {
    const before = socks.connects().length;
    const list = await ok(['journals', 'list']);
    assert.match(list.stdout.toString(), new RegExp(JOURNAL));

    await ok(['journals', 'append', '-l', `name=${JOURNAL}`], {}, 'appended through the proxy\n');
    const want = Buffer.concat([data, Buffer.from('appended through the proxy\n')]);
    const read = await ok(['journals', 'read', '-l', `name=${JOURNAL}`]);
    assert.ok(read.stdout.equals(want), 'read through the broker');
    // With a route cache, persisted fragments are fetched from S3 by signed URL (direct reads).
    const direct = await ok(['journals', 'read', '-l', `name=${JOURNAL}`, '--broker.cache.size', '16']);
    assert.ok(direct.stdout.equals(want), 'direct read');

    const verify = await ok(['journals', 'fragments', '-l', `name=${JOURNAL}`, '--verify']);
    assert.match(verify.stdout.toString(), /Verified: 3 persisted fragments, 0 failed/);
    await ok(['journals', 'forks', '-l', `name=${JOURNAL}`, '-o', 'json']);
    await ok(['journals', 'store-health', s3.storeUrl('frags/')]);
    const health = await ok(['health', '-v', '--etcd.address', `http://${ETCD_NAME}:${portOf(cluster.etcd.endpoint)}`]);
    assert.match(health.stdout.toString(), /^healthy/m);

    const seen = socks.connects().slice(before);
    const brokerPort = portOf(cluster.brokerAddress);
    assert.ok(seen.includes(`${BROKER_NAME} 127.0.0.1:${brokerPort}`), `the broker by name through the proxy: ${seen.join(', ')}`);
    assert.ok(seen.includes(`${ETCD_NAME} 127.0.0.1:${portOf(cluster.etcd.endpoint)}`), `etcd by name: ${seen.join(', ')}`);
    assert.ok(seen.includes(`- 127.0.0.1:${s3.port}`), `S3 (signed URLs and API calls): ${seen.join(', ')}`);
  });

  test('shards list goes through it too (to a consumer that is not there: the proxy says so)', async () => {
    const port = await freePort();
    const args = ['shards', 'list', '--consumer.address', `http://${CONSUMER_NAME}:${port}`, '--timeout', '1s'];
    const r = await gzNs(args);
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(oneStderrLine(args, r), new RegExp(`SOCKS server 127\\.0\\.0\\.1:1080 could not connect to consumer\\.gazette\\.test:${port} \\(ConnectionRefused\\)`));
    assert.ok(socks.connects().includes(`${CONSUMER_NAME} 127.0.0.1:${port}`));
  });

  test('print-config shows the proxy and that it came from the environment', async () => {
    const r = await ok(['print-config']);
    assert.match(r.stdout.toString(), /\[journals\][^[]*; \(from \$SOCKS_SERVER_SERVICE_HOST:\$SOCKS_SERVER_SERVICE_PORT\)\nSocksServer = 127\.0\.0\.1:1080\n/);
  });

  test('killing the SOCKS server under a blocking read: retries, then one error at --timeout', async () => {
    const args = ['journals', 'read', '-l', `name=${JOURNAL}`, '--block', '--timeout', '3s'];
    const p = spawnGazctl(args, { env: podEnv, wrap: inNamespace, timeoutMs: RUN_TIMEOUT_MS });
    await pollUntil('the read to catch up', async () => p.stdoutBytes() >= data.length, { timeoutMs: 20_000, intervalMs: 50 });
    await socks.kill();
    let r: GazctlResult;
    try {
      r = await p.result;
    } finally {
      // The proxy back, for the tests after this one.
      socks = await startSocksServer({ listen: [`unix:${socksPath}`], hosts: HOSTS });
    }
    assert.equal(r.timedOut, false, 'no hang');
    assert.equal(r.code, 1, describeResult(args, r));
    // A warning when the retries start, then one error line when --timeout has passed.
    const lines = r.stderr.trimEnd().split('\n');
    assert.match(lines.at(-1)!, /^gazctl: reading socks\/events: no broker could be reached for 3s: SOCKS server 127\.0\.0\.1:1080: /, describeResult(args, r));
    assert.ok(lines.length >= 2, describeResult(args, r));
    for (const l of lines.slice(0, -1)) assert.match(l, /level=warning msg="read failure \(will retry\)/, describeResult(args, r));
  });

  test('killing the broker under a blocking read and an append: retries, then one error at --timeout', async () => {
    const toBroker = () => socks.connects().filter((c) => c.startsWith(`${BROKER_NAME} `)).length;
    const before = toBroker();
    const readArgs = ['journals', 'read', '-l', `name=${JOURNAL}`, '--block', '--timeout', '3s'];
    const read = spawnGazctl(readArgs, { env: podEnv, wrap: inNamespace, timeoutMs: RUN_TIMEOUT_MS });
    const appendArgs = ['journals', 'append', '-l', `name=${JOURNAL}`, '--framing', 'lines', '--timeout', '3s', '--log.level', 'debug'];
    const append = spawnGazctl(appendArgs, { env: podEnv, wrap: inNamespace, timeoutMs: RUN_TIMEOUT_MS, keepStdinOpen: true });
    await pollUntil('the read to catch up', async () => read.stdoutBytes() >= data.length, { timeoutMs: 20_000, intervalMs: 50 });
    // The append has connected (to resolve and watch its selector) and waits for its input.
    await pollUntil('the append to reach the broker', async () => toBroker() >= before + 2, { timeoutMs: 20_000, intervalMs: 50 });
    await cluster.stopBroker(0, { graceful: false });
    // The record goes in once the append has seen its connection to the broker drop (its watch
    // of the journals logs that at debug level). Sent on a connection that drops under it, an
    // append's outcome would be unknown, and it would fail at once rather than be retried: that
    // is the append's rule with or without a proxy, not what this test is about.
    await pollUntil('the append to see the broker gone', async () => append.stderrText().includes('watching journals failed (will retry)'), { timeoutMs: 20_000, intervalMs: 20 });
    append.child.stdin!.end('a record for a broker that is gone\n');
    for (const [args, p, what] of [
      [readArgs, read, /^gazctl: reading socks\/events: no broker could be reached for 3s: SOCKS server 127\.0\.0\.1:1080 could not connect to (broker\.gazette\.test|127\.0\.0\.1):\d+ \(ConnectionRefused\)$/],
      // Killed while the append's first listing of its selector waited for its answer, that
      // listing is what fails; after it, the append of the record does.
      [appendArgs, append, /^gazctl: (appending to socks\/events: UNAVAILABLE|cannot resolve the selector to journals: broker http:\/\/broker\.gazette\.test:\d+ is unreachable): SOCKS server 127\.0\.0\.1:1080 could not connect to (broker\.gazette\.test|127\.0\.0\.1):\d+ \(ConnectionRefused\)$/],
    ] as const) {
      const r = await p.result;
      assert.equal(r.timedOut, false, 'no hang');
      assert.equal(r.code, 1, describeResult([...args], r));
      const lines = r.stderr.trimEnd().split('\n');
      // One error line (with --log.level debug, the append's is followed by its stack trace).
      const errors = lines.filter((l) => l.startsWith('gazctl: '));
      assert.equal(errors.length, 1, describeResult([...args], r));
      assert.match(errors[0]!, what, describeResult([...args], r));
      assert.ok(lines.some((l) => /level=warning/.test(l)), `a warning when the retries start: ${describeResult([...args], r)}`);
      if (p === read) assert.equal(lines.at(-1), errors[0], 'the error comes last, after the warnings');
    }
  });
});
