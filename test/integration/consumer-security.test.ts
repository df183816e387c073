// TLS and auth keys on our consumer process, end to end: one of our brokers serving TLS with a
// test CA and verifying tokens of one key set, and our consumer (the sum app) serving TLS with
// the same CA and verifying tokens of another key set, reaching the broker with its own client
// options (--broker.trusted-ca-file, --broker.auth-keys). Shards are applied and listed with our
// gazctl and with the Go gazctl; their replicas become PRIMARY, which takes reading and
// appending their recovery logs through the broker over TLS with signed tokens. Without a token
// the consumer refuses in one line; with the wrong CA the connection fails at once.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  createSumAppJournals,
  makeTestCerts,
  pollUntil,
  runGoGazctlShards,
  startCluster,
  startConsumers,
  sumAppLayout,
  tsBroker,
  tsConsumer,
  type Cluster,
  type ConsumerGroup,
  type TestCerts,
} from '../../src/testing/index.js';
import { describeResult, runGazctl } from '../helpers/cli.js';
import { Capability, signJwt } from '../../src/lib/client/auth.js';
import { ShardClient } from '../../src/lib/client/shard-client.js';
import { Status as ConsumerStatus } from '../../src/lib/protocol/gen/consumer/protocol.js';
import { oneStderrLine } from '../helpers/journals.js';

const BROKER_KEYS = Buffer.from('broker key of the consumer test!').toString('base64');
const CONSUMER_KEYS = Buffer.from('consumer key, another key set...').toString('base64');
const layout = sumAppLayout({ name: 'secsum', shards: 2 });
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

describe('our consumer with TLS and auth keys, on our broker with TLS and other keys', { timeout: 180_000 }, () => {
  let dir: string;
  let certs: TestCerts;
  let cluster: Cluster | undefined;
  let consumers: ConsumerGroup | undefined;
  /** Environment of both gazctls: consumer and broker addresses, the CA, both key sets. */
  const env = (extra: Record<string, string> = {}) => ({
    CONSUMER_ADDRESS: consumers!.consumers[0]!.endpoint,
    CONSUMER_TRUSTED_CA_FILE: certs.caFile,
    CONSUMER_AUTH_KEYS: CONSUMER_KEYS,
    BROKER_ADDRESS: cluster!.brokerAddress,
    BROKER_TRUSTED_CA_FILE: certs.caFile,
    BROKER_AUTH_KEYS: BROKER_KEYS,
    ...extra,
  });
  const ours = (args: string[], extra: Record<string, string> = {}, input?: string) => runGazctl(args, { env: env(extra), ...(input !== undefined ? { input } : {}) });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gazctl-tls-consumer-'));
    certs = makeTestCerts(dir);
    const tls = { certFile: certs.certFile, keyFile: certs.keyFile, caFile: certs.caFile };
    cluster = await startCluster({ impl: tsBroker, tls, authKeys: BROKER_KEYS });
    await createSumAppJournals(cluster, layout);
    consumers = await startConsumers(cluster, {
      impl: tsConsumer,
      tls,
      authKeys: CONSUMER_KEYS,
      extraArgs: [`--broker.trusted-ca-file=${certs.caFile}`, `--broker.auth-keys=${BROKER_KEYS}`],
    });
  });
  after(async () => {
    await consumers?.stop();
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('the consumer advertises an https:// endpoint; our gazctl applies shards, which become PRIMARY', async () => {
    assert.match(consumers!.consumers[0]!.endpoint, /^https:\/\//);
    const args = ['shards', 'apply'];
    const r = await ours(args, {}, SHARDS);
    assert.equal(r.code, 0, describeResult(args, r));
    await pollUntil(
      'both shards PRIMARY',
      async () => {
        const l = await ours(['shards', 'list', '-l', `app=${layout.name}`]);
        return l.code === 0 && (l.stdout.toString().match(/PRIMARY/g) ?? []).length === layout.shards.length;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  });

  test('the Go gazctl lists and applies shards through our consumer with the CA and the keys', async () => {
    const opts = { consumerAddress: consumers!.consumers[0]!.endpoint, brokerAddress: cluster!.brokerAddress, env: env(), timeoutMs: 30_000 };
    const list = await runGoGazctlShards(['shards', 'list', '-l', `app=${layout.name}`, '-o', 'yaml'], opts);
    assert.equal(list.code, 0, list.stderr);
    const yaml = list.stdout.toString();
    for (const s of layout.shards) assert.match(yaml, new RegExp(`id: ${s.id}\\b`));
    const apply = await runGoGazctlShards(['shards', 'apply'], { ...opts, input: yaml });
    assert.equal(apply.code, 0, apply.stderr);
    const table = await runGoGazctlShards(['shards', 'list', '-l', `app=${layout.name}`], opts);
    assert.equal(table.code, 0, table.stderr);
    assert.equal((table.stdout.toString().match(/PRIMARY/g) ?? []).length, layout.shards.length, table.stdout.toString());
  });

  test('without a token (or with the brokers\' keys) the consumer refuses in one line naming --consumer.auth-keys', async () => {
    const args = ['shards', 'list', '--timeout', '20s'];
    const r = await ours(args, { CONSUMER_AUTH_KEYS: '' });
    assert.equal(r.code, 1, describeResult(args, r));
    const line = oneStderrLine(args, r);
    assert.match(line, /UNAUTHENTICATED: missing or empty Authorization token/);
    assert.match(line, /--consumer\.auth-keys.*--consumer\.auth-token/);
    const wrong = await ours(args, { CONSUMER_AUTH_KEYS: BROKER_KEYS });
    assert.equal(wrong.code, 1, describeResult(args, wrong));
    assert.match(oneStderrLine(args, wrong), /UNAUTHENTICATED: verifying Authorization: token signature is invalid/);
    const go = await runGoGazctlShards(['shards', 'list'], { consumerAddress: consumers!.consumers[0]!.endpoint, env: env({ CONSUMER_AUTH_KEYS: '' }), timeoutMs: 30_000 });
    assert.notEqual(go.code, 0);
    assert.match(go.stderr, /Unauthenticated desc = missing or empty Authorization token/);
  });

  test('a wrong CA fails at once in one line naming --consumer.trusted-ca-file', async () => {
    const args = ['shards', 'list', '--timeout', '60s'];
    const started = Date.now();
    const r = await ours(args, { CONSUMER_TRUSTED_CA_FILE: certs.otherCaFile });
    const took = Date.now() - started;
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(oneStderrLine(args, r), /TLS certificate of the server is not trusted.*--consumer\.trusted-ca-file/);
    console.log(`# wrong CA: our gazctl failed after ${took} ms (--timeout 60s)`);
  });

  test("a token's selector limits the shards it sees and may unassign", async () => {
    const [mine, other] = layout.shards.map((x) => x.id) as [string, string];
    const sel = { include: { labels: [{ name: 'id', value: mine, prefix: false }] }, exclude: { labels: [] } };
    const token = signJwt(Buffer.from(CONSUMER_KEYS, 'base64'), { cap: Capability.LIST | Capability.APPLY | Capability.READ, sel, ttlSec: 300 });
    const e = { CONSUMER_AUTH_KEYS: '', CONSUMER_AUTH_TOKEN: token };
    const list = await ours(['shards', 'list', '-l', `app=${layout.name}`], e);
    assert.equal(list.code, 0, describeResult(['shards', 'list'], list));
    assert.match(list.stdout.toString(), new RegExp(mine));
    assert.doesNotMatch(list.stdout.toString(), new RegExp(other));
    // gazctl only acts on shards it can list; asked directly, the consumer refuses an Unassign
    // of a shard outside the selector and answers SHARD_NOT_FOUND to its Stat.
    const client = new ShardClient({ address: consumers!.consumers[0]!.endpoint, trustedCAFile: certs.caFile, authToken: token });
    try {
      await assert.rejects(client.unassign([other], { dryRun: true, timeoutMs: 10_000 }), new RegExp(`UNAUTHENTICATED: not authorized to ${other}`));
      assert.equal((await client.unassign([mine], { dryRun: true, timeoutMs: 10_000 })).status, ConsumerStatus.OK);
      const st = await client.stat(other, { timeoutMs: 10_000 }).then((r) => r.status, (err: unknown) => (err as { status?: number }).status);
      assert.equal(st, ConsumerStatus.SHARD_NOT_FOUND);
    } finally {
      client.close();
    }
  });
});
