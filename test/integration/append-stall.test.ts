// Regression: a broker that stalls for over a second aborts append streams that fell under its
// minimum append rate. `journals append --framing lines` must retry those (they were rolled
// back) instead of failing after committing part of its input.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { gzOk, brokerEnv } from '../helpers/journals.js';
import { spawnGazctl, describeResult } from '../helpers/cli.js';

let cluster: Cluster | undefined;
let dir: string;

before(async () => {
  cluster = await startCluster({ brokers: 1 });
  dir = mkdtempSync(join(tmpdir(), 'gazctl-stall-'));
  writeFileSync(
    join(dir, 'specs.yaml'),
    `name: stall/a
replication: 1
fragment:
  length: 67108864
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1m0s
`,
  );
  await gzOk(cluster, ['journals', 'apply', '--specs', join(dir, 'specs.yaml')]);
  await waitForJournalsAssigned(cluster, ['stall/a'], 20_000);
});

after(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('append of lines survives a broker pausing mid-stream, with every byte committed once', async () => {
  const line = 'x'.repeat(99) + '\n';
  const input = Buffer.from(line.repeat(2_000_000)); // 200 MB
  const path = join(dir, 'in.txt');
  writeFileSync(path, input);
  const pid = cluster!.brokers[0]!.pid!;
  const args = ['journals', 'append', '-l', 'name=stall/a', '--framing', 'lines', '-i', path];
  const p = spawnGazctl(args, { env: brokerEnv(cluster!), timeoutMs: 120_000 });
  // Pause the broker a few times while the append streams.
  for (const at of [300, 700, 700]) {
    await new Promise((r) => setTimeout(r, at));
    process.kill(pid, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, 1500));
    process.kill(pid, 'SIGCONT');
  }
  const r = await p.result;
  assert.equal(r.code, 0, describeResult(args, r));

  const read = await gzOk(cluster!, ['journals', 'read', '-l', 'name=stall/a'], { timeoutMs: 60_000 });
  assert.equal(read.stdout.length, input.length, 'every byte appended exactly once');
  assert.equal(createHash('sha256').update(read.stdout).digest('hex'), createHash('sha256').update(input).digest('hex'));
});
