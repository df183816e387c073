// Append flow control, on the reference Go broker and on ours with the same assertions: a
// journal's max_append_rate holds back chunks past its credit (the response counts them as
// delayed) without losing any, a journal without one delays nothing, and a client that stops
// streaming mid-append is cut off for not sustaining the broker's minimum rate, with nothing
// of its append committed.

import assert from 'node:assert/strict';
import { credentials, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import { after, before, describe, test } from 'node:test';

import { AppendRequest, JournalClient, Status, type AppendResponse } from '../../src/lib/protocol/gen/broker/protocol.js';
import { goBroker, grpcTarget, startCluster, tsBroker, waitForJournalsAssigned, type BrokerImpl, type Cluster } from '../../src/testing/index.js';
import { gzOk } from '../helpers/journals.js';
import { appendOnce, readRaw } from '../helpers/core.js';

const SPECS = `name: flow/
replication: 1
fragment:
  length: 1048576
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1m
children:
- name: flow/free
- name: flow/limited
  max_append_rate: 100000
- name: flow/stalled
`;

const CHUNK = 60_000;

/** One Append of `chunks` content messages of CHUNK bytes each, then the commit. */
function appendChunks(endpoint: string, journal: string, chunks: Buffer[]): Promise<AppendResponse> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.append({ deadline: Date.now() + 30_000 }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res);
    });
    call.write(AppendRequest.fromPartial({ journal }));
    for (const c of chunks) call.write(AppendRequest.fromPartial({ content: c }));
    call.write(AppendRequest.fromPartial({}));
    call.end();
  });
}

/** An Append that sends its header and a few bytes, then nothing more until the broker gives up. */
function stalledAppend(endpoint: string, journal: string): Promise<ServiceError> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.append({ deadline: Date.now() + 20_000 }, (err, res) => {
      client.close();
      if (err) resolve(err);
      else reject(new Error(`the stalled append was acknowledged: ${JSON.stringify(res?.commit)}`));
    });
    call.write(AppendRequest.fromPartial({ journal }));
    call.write(AppendRequest.fromPartial({ content: Buffer.from('half a record') }));
    // No more messages and no end: the client is stuck.
  });
}

function content(seed: number): Buffer[] {
  return Array.from({ length: 4 }, (_, i) => Buffer.alloc(CHUNK, 97 + ((seed + i) % 26)));
}

for (const impl of [goBroker, tsBroker] as BrokerImpl[]) {
  describe(`append flow control on ${impl.name} brokers`, { timeout: 120_000 }, () => {
    let cluster: Cluster | undefined;

    before(async () => {
      cluster = await startCluster({ brokers: 1, impl });
      await gzOk(cluster, ['journals', 'apply'], { input: SPECS });
      await waitForJournalsAssigned(cluster, ['flow/limited', 'flow/free', 'flow/stalled']);
    });
    after(() => cluster?.stop());

    test('a journal with max_append_rate delays chunks past its credit and commits them all', async () => {
      const ep = cluster!.brokers[0]!.endpoint;
      const chunks = content(0);
      const res = await appendChunks(ep, 'flow/limited', chunks);
      assert.equal(res.status, Status.OK);
      // 240,000 bytes against one second of credit (100,000 bytes): at least the third chunk
      // had to wait for credit to accrue.
      assert.ok(res.delayed_chunks >= 1n, `delayed_chunks ${res.delayed_chunks}`);
      assert.equal(res.total_chunks, 5n, 'four content chunks and the commit');
      assert.equal(res.commit!.end - res.commit!.begin, BigInt(CHUNK * 4));
      assert.deepEqual(await readRaw(ep, 'flow/limited'), Buffer.concat(chunks));
    });

    test('a journal without a max rate delays nothing', async () => {
      const ep = cluster!.brokers[0]!.endpoint;
      const res = await appendChunks(ep, 'flow/free', content(5));
      assert.equal(res.status, Status.OK);
      assert.equal(res.delayed_chunks, 0n);
      assert.equal(res.total_chunks, 5n);
    });

    test('a client that stops streaming is cut off at the minimum rate, and its bytes are not committed', async () => {
      const ep = cluster!.brokers[0]!.endpoint;
      const err = await stalledAppend(ep, 'flow/stalled');
      assert.equal(err.code, grpcStatus.UNKNOWN, `${err.code}: ${err.details}`);
      assert.match(err.details ?? err.message, /minimum append data rate/);
      // The journal carries on: the next append lands at offset 0, nothing of the stalled one.
      const ok = await appendOnce(ep, 'flow/stalled', Buffer.from('whole record\n'));
      assert.equal(ok.status, Status.OK);
      assert.equal(ok.commit!.begin, 0n);
      assert.equal((await readRaw(ep, 'flow/stalled')).toString(), 'whole record\n');
    });
  });
}
