// The client library against a real broker: apply, list, atomic append and rollback, reads that
// stop at the write head, fragment listing and store health.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import {
  BrokerStatusError,
  CompressionCodec,
  JournalClient,
  JournalSpec,
  Status,
  nanosToDuration,
  parseLabelSelector,
  labelSet,
  label,
} from '../../src/lib/index.js';

let cluster: Cluster | undefined;
let client: JournalClient;
const NAME = 'lib/events';

before(async () => {
  cluster = await startCluster({ brokers: 1 });
  client = new JournalClient({ address: cluster.brokerAddress });
  const spec = JournalSpec.fromPartial({
    name: NAME,
    replication: 1,
    labels: labelSet(label('app', 'lib')),
    fragment: {
      length: 1n << 20n,
      compression_codec: CompressionCodec.NONE,
      stores: ['file:///'],
      refresh_interval: nanosToDuration(60_000_000_000n),
    },
  });
  await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
  await waitForJournalsAssigned(cluster, [NAME], 20_000);
});

after(async () => {
  client?.close();
  await cluster?.stop();
});

async function readAll(): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of client.read({ journal: NAME, offset: 0n })) parts.push(Buffer.from(chunk.content));
  return Buffer.concat(parts);
}

test('list finds the journal by label and by name prefix', async () => {
  for (const sel of ['app=lib', 'name:prefix=lib/', 'prefix=lib/']) {
    const { journals } = await client.list(parseLabelSelector(sel));
    assert.deepEqual(journals.map((j) => j.spec!.name), [NAME], sel);
  }
  const { journals } = await client.list(parseLabelSelector('app=other'));
  assert.equal(journals.length, 0);
});

test('an aborted append is rolled back; a committed one is read back whole', async () => {
  const aborted = client.append(NAME);
  await aborted.write(Buffer.from('never committed\n'));
  aborted.abort();
  await aborted.settled();

  const a = client.append(NAME);
  await a.write(Buffer.from('one\n'));
  await a.write(Buffer.from('two\n'));
  const resp = await a.commit();
  assert.equal(resp.status, Status.OK);
  assert.equal(resp.commit!.end - resp.commit!.begin, 8n);
  assert.equal((await readAll()).toString(), 'one\ntwo\n');
});

test('a non-blocking read ends at the write head and reports it', async () => {
  const reader = client.read({ journal: NAME, offset: 0n });
  let bytes = 0;
  for await (const chunk of reader) bytes += chunk.content.length;
  assert.equal(BigInt(bytes), reader.offset);
  assert.equal(reader.writeHead, reader.offset);
});

test('an append with a wrong explicit offset is refused and changes nothing', async () => {
  const before = await readAll();
  const a = client.append(NAME, { offset: 1n });
  await a.write(Buffer.from('misplaced\n'));
  await assert.rejects(a.commit(), (err: unknown) => err instanceof BrokerStatusError && err.status === Status.WRONG_APPEND_OFFSET);
  assert.deepEqual(await readAll(), before);
});

test('fragments and store health', async () => {
  const fragments = await client.listFragments(NAME);
  assert.ok(fragments.length >= 1);
  assert.equal(fragments[0]!.spec!.begin, 0n);
  const health = await client.fragmentStoreHealth('file:///');
  assert.equal(health.status, Status.OK);
});
