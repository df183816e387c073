// Regression: a broker that stalls for over a second aborts append streams that fell under its
// minimum append rate. `journals append --framing lines` must retry those (they were rolled
// back) instead of failing after committing part of its input.
//
// The test proves the stalls happened mid-append: each pause starts only once gazctl is reading
// its input (the position of its file descriptor on the input file, from /proc, has moved on),
// the kernel reports the broker stopped during the pause, and gazctl is still running when the
// broker resumes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
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
  const gz = p.child.pid!;
  const running = () => p.child.exitCode === null && p.child.signalCode === null;
  // Pause the broker three times while the append streams, each after gazctl has read another
  // 10 MB of its input since the last pause.
  let mark = 0;
  for (let pause = 1; pause <= 3; pause++) {
    for (;;) {
      assert.ok(running(), `the append ended before pause ${pause} could happen\n${p.stderrText()}`);
      const pos = inputPosition(gz, path);
      if (pos !== undefined && pos >= mark + 10_000_000 && pos < input.length) {
        mark = pos;
        break;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    process.kill(pid, 'SIGSTOP');
    try {
      // The signal takes effect asynchronously: wait until the kernel reports the broker stopped.
      while (processState(pid) !== 'T') await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(processState(pid), 'T', 'the broker stayed stopped for the whole pause');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    assert.ok(running(), `gazctl ended while the broker was paused (pause ${pause})\n${p.stderrText()}`);
  }
  const r = await p.result;
  assert.equal(r.code, 0, describeResult(args, r));

  const read = await gzOk(cluster!, ['journals', 'read', '-l', 'name=stall/a'], { timeoutMs: 60_000 });
  assert.equal(read.stdout.length, input.length, 'every byte appended exactly once');
  assert.equal(createHash('sha256').update(read.stdout).digest('hex'), createHash('sha256').update(input).digest('hex'));
});

/** Where process `pid` is in file `path` (its read offset), or undefined when it has it closed. */
function inputPosition(pid: number, path: string): number | undefined {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return undefined;
  }
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) !== path) continue;
      const m = /^pos:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'));
      if (m) return Number(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  return undefined;
}

/** The kernel's state letter of a process (R, S, T for stopped, …). */
function processState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!;
}
