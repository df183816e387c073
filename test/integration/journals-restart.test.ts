// Acceptance: `gazctl journals read` survives broker restarts mid-stream, with no byte missing or
// repeated, against three reference Go brokers + etcd.
//
// 64 MiB are written to a replication-3 journal; our CLI reads it through broker 0's address
// with stdout piped to this process, which throttles it: the pipe is paused after ~8 MiB, so the
// CLI (and, through gRPC flow control, the broker) stalls mid-stream while a broker restarts.
// The bytes read are compared (sha256) with the bytes written.
//
// * broker 0 (the one the CLI talks to) restarts while the consumer is paused: the stream breaks
//   and the reader must reopen it at the right offset on the new broker process;
// * broker 0 restarts while the consumer keeps reading (`--block`): the reader retries against a
//   dead address until the broker is back;
// * the journal's primary restarts while the consumer keeps reading (`--block`).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { delay, listJournals, pollUntil, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult, spawnGazctl, type GazctlProcess } from '../helpers/cli.js';
import { brokerEnv, coversFromZero, gzOk, listFragmentsAt, sha256, stopwatch, tempDir } from '../helpers/journals.js';

const MiB = 1024 * 1024;
const JOURNAL = 'restart/data';
const APPENDS = 8;
const APPEND_SIZE = 8 * MiB; // 8 × 8 MiB = 64 MiB
const TOTAL = APPENDS * APPEND_SIZE;
/** Bytes consumed before the consumer pauses and a broker restarts. */
const PAUSE_AT = 8 * MiB;
/**
 * Upper bound of what the CLI can hold unconsumed at the pause (gRPC flow-control window of
 * 16 MiB + stream and pipe buffers): the bytes past pausedAt + this must come through a Read
 * opened after the restart.
 */
const IN_FLIGHT_BOUND = 24 * MiB;

const SPEC = `name: ${JOURNAL}
replication: 3
labels:
- name: app
  value: restart
fragment:
  length: 4194304
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1s
`;

describe('journals read across broker restarts (acceptance, 3 Go brokers)', { timeout: 300_000 }, () => {
  let cluster: Cluster;
  let dir: string;
  let cleanupDir = () => {};
  let wantSha: string;

  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    ({ dir, cleanup: cleanupDir } = tempDir('gazctl-restart-'));
    await gzOk(cluster, ['journals', 'apply'], { input: SPEC });
    await waitForJournalsAssigned(cluster, [JOURNAL], 30_000);
    const parts: Buffer[] = [];
    for (let i = 0; i < APPENDS; i++) {
      const part = randomBytes(APPEND_SIZE);
      const path = join(dir, `part-${i}`);
      writeFileSync(path, part);
      await gzOk(cluster, ['journals', 'append', '-l', `name=${JOURNAL}`, '-i', path], { timeoutMs: 60_000 });
      parts.push(part);
    }
    wantSha = sha256(parts);
  });
  after(async () => {
    await cluster?.stop();
    cleanupDir();
  });

  /** Waits until every broker is back, the journal fully replicated, and broker 0 indexes all of it. */
  async function healed(): Promise<void> {
    await cluster.waitReady(30_000);
    await waitForJournalsAssigned(cluster, [JOURNAL], 60_000);
    await pollUntil(
      `broker 0 to index all ${TOTAL} bytes of ${JOURNAL}`,
      async () => coversFromZero(await listFragmentsAt(cluster.brokers[0]!.endpoint, JOURNAL), BigInt(TOTAL)),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  }

  /** Starts our CLI reading the journal through broker 0 and pauses its stdout after PAUSE_AT bytes. */
  async function startPausedRead(extra: string[]): Promise<{ reader: GazctlProcess; args: string[]; pausedAt: number }> {
    const args = ['journals', 'read', '-l', `name=${JOURNAL}`, ...extra];
    const reader = spawnGazctl(args, { env: brokerEnv(cluster, 0), timeoutMs: 180_000 });
    const stdout = reader.child.stdout!;
    await new Promise<void>((resolve, reject) => {
      const onData = () => {
        if (reader.stdoutBytes() >= PAUSE_AT) {
          stdout.pause();
          stdout.off('data', onData);
          resolve();
        }
      };
      stdout.on('data', onData);
      reader.result.then((r) => reject(new Error(`the read ended before ${PAUSE_AT} bytes\n${describeResult(args, r)}`)), reject);
    });
    const pausedAt = reader.stdoutBytes();
    assert.ok(pausedAt + IN_FLIGHT_BOUND < TOTAL, `paused after ${pausedAt} bytes: too late to be mid-stream`);
    return { reader, args, pausedAt };
  }

  /** Resumes a paused blocking read, waits for all TOTAL bytes, then SIGINTs it. */
  async function finishBlockingRead(reader: GazctlProcess, args: string[], offsetsOut: string): Promise<void> {
    await pollUntil(
      `the reader to deliver all ${TOTAL} bytes`,
      async () => {
        if (reader.child.exitCode !== null) throw new Error(`the reader exited\n${reader.stderrText()}`);
        return reader.stdoutBytes() >= TOTAL;
      },
      { timeoutMs: 120_000, intervalMs: 100, describe: () => `have ${reader.stdoutBytes()} bytes\n${reader.stderrText()}` },
    );
    reader.child.kill('SIGINT');
    const r = await reader.result;
    assert.equal(r.code, 0, describeResult(args, r));
    assert.equal(r.stdout.length, TOTAL, 'no byte repeated or missing (length)');
    assert.equal(sha256(r.stdout), wantSha, 'no byte repeated or missing (sha256)');
    assert.deepEqual(JSON.parse(readFileSync(offsetsOut, 'utf8')), { [JOURNAL]: TOTAL });
  }

  test('a read through broker 0 reopens at the right offset after broker 0 restarts mid-stream', async (t) => {
    await healed();
    const lap = stopwatch();
    const { reader, args, pausedAt } = await startPausedRead([]);
    try {
      const oldPid = cluster.brokers[0]!.pid;
      await cluster.restartBroker(0);
      assert.notEqual(cluster.brokers[0]!.pid, oldPid, 'broker 0 is a new process');
      t.diagnostic(`paused at ${pausedAt} bytes of ${TOTAL}; broker 0 restarted (pid ${oldPid} → ${cluster.brokers[0]!.pid})`);
      await healed();
      reader.child.stdout!.resume();
      const r = await reader.result;
      assert.equal(r.code, 0, describeResult(args, r));
      assert.equal(r.stdout.length, TOTAL, 'no byte repeated or missing (length)');
      assert.equal(sha256(r.stdout), wantSha, 'no byte repeated or missing (sha256)');
      t.diagnostic(`read of 64 MiB across the restart took ${lap()}`);
    } finally {
      reader.child.kill('SIGKILL');
    }
  });

  test('a blocking read through broker 0 keeps reading while broker 0 is down and back', async (t) => {
    await healed();
    const lap = stopwatch();
    const offsetsOut = join(dir, 'offsets-b0.json');
    const { reader, args, pausedAt } = await startPausedRead(['--block', '--offsets-out', offsetsOut]);
    try {
      await cluster.stopBroker(0, { graceful: false, releaseLease: true });
      reader.child.stdout!.resume(); // the reader now drains what it holds, then retries a dead address
      await delay(2000);
      assert.ok(reader.stdoutBytes() < TOTAL, 'the rest of the journal is not readable while broker 0 is down');
      assert.equal(reader.child.exitCode, null, `the reader gave up while broker 0 was down\n${reader.stderrText()}`);
      t.diagnostic(`paused at ${pausedAt} bytes; ${reader.stdoutBytes()} read while broker 0 was down`);
      await cluster.restartBroker(0);
      await finishBlockingRead(reader, args, offsetsOut);
      t.diagnostic(`read of 64 MiB across the outage took ${lap()}`);
    } finally {
      reader.child.kill('SIGKILL');
    }
  });

  test("a blocking read through broker 0 survives a restart of the journal's primary mid-stream", async (t) => {
    await healed();
    const lap = stopwatch();
    const offsetsOut = join(dir, 'offsets-primary.json');
    const { reader, args, pausedAt } = await startPausedRead(['--block', '--offsets-out', offsetsOut]);
    try {
      const listed = await listJournals(cluster.brokers[0]!.endpoint);
      const route = listed.journals.find((j) => j.spec?.name === JOURNAL)!.route!;
      const primaryId = route.members[route.primary]!.suffix;
      const p = cluster.brokers.findIndex((b) => b.id === primaryId);
      assert.ok(p >= 0, `primary ${primaryId} is one of ours`);
      t.diagnostic(`paused at ${pausedAt} bytes; restarting the primary, broker ${p}`);
      await cluster.stopBroker(p, { graceful: false, releaseLease: true });
      reader.child.stdout!.resume();
      await delay(1000);
      await cluster.restartBroker(p);
      await finishBlockingRead(reader, args, offsetsOut);
      t.diagnostic(`read of 64 MiB across the primary's restart took ${lap()}`);
    } finally {
      reader.child.kill('SIGKILL');
    }
  });

  test('a read warns on stderr about its retries while its broker is down', async () => {
    await healed();
    const args = ['journals', 'read', '-l', `name=${JOURNAL}`, '--block', '--tail', '--log.level', 'info', '--log.format', 'json'];
    const reader = spawnGazctl(args, { env: brokerEnv(cluster, 0), timeoutMs: 120_000 });
    let stopped = false;
    try {
      await pollUntil('the read to start', async () => reader.stderrText().includes('read started'), {
        timeoutMs: 30_000,
        describe: () => reader.stderrText(),
      });
      await delay(500); // the Read RPC is open and waiting at the write head
      await cluster.stopBroker(0, { graceful: false, releaseLease: true });
      stopped = true;
      await delay(3000); // retries back off 0, 50, 50, 100, 100 ms, then 1 s
      const during = reader.stderrText();
      await cluster.restartBroker(0);
      stopped = false;
      reader.child.kill('SIGINT');
      const r = await reader.result;
      assert.equal(r.code, 0, describeResult(args, r));
      const warnings = during
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as { level?: string })
        .filter((e) => e.level === 'warn' || e.level === 'warning');
      assert.ok(
        warnings.some((w) => JSON.stringify(w).includes(JOURNAL)),
        `expected warnings naming ${JOURNAL} while the read retried against the stopped broker; stderr was:\n${during}`,
      );
    } finally {
      reader.child.kill('SIGKILL');
      if (stopped) await cluster.restartBroker(0);
    }
  });
});
