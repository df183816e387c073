// Acceptance of disk-buffered appends (docs/append-buffering.md): a long-running producer,
// `gazctl journals append --framing lines --buffer-dir DIR --metrics-addr ...` fed through a pipe,
// keeps reading its input while every broker is stopped; its /metrics show bytes on disk rising
// during the outage and back to 0 after the brokers return; every record is then in its journal
// exactly once, in input order per journal.
//
// Why "exactly once" is honest here: the brokers are frozen with SIGSTOP, not killed. A frozen
// broker neither answers nor drops connections (the client's keepalive is minutes, the outage
// seconds), so an append under way simply waits and then commits, or is refused outright (Go's
// minimum append rate), which is never ambiguous. And gazctl's append service does not retry an
// ambiguous failure at all (retryAmbiguous is off for plain records): had one happened, the
// command would have failed rather than duplicated, and this test checks it exits 0.
//
// Runs on whichever broker implementation the pass picks (GAZCTL_TEST_BROKER).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { gzOk, brokerEnv } from '../helpers/journals.js';
import { spawnGazctl, describeResult } from '../helpers/cli.js';

const JOURNALS = ['abuf/1', 'abuf/2', 'abuf/3'];
let cluster: Cluster | undefined;
let dir: string;

before(async () => {
  cluster = await startCluster({ brokers: 2 });
  dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-it-'));
  writeFileSync(
    join(dir, 'specs.yaml'),
    `name: abuf/
replication: 1
labels:
- name: app
  value: abuf
fragment:
  length: 67108864
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1m0s
children:
${JOURNALS.map((j) => `- name: ${j}\n`).join('')}`,
  );
  await gzOk(cluster, ['journals', 'apply', '--specs', join(dir, 'specs.yaml')]);
  await waitForJournalsAssigned(cluster, JOURNALS, 20_000);
});

after(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('a disk-buffered producer rides out stopped brokers: disk bytes rise, drain to 0, every record once and in order', async (t) => {
  const bufferDir = mkdtempSync(join(dir, 'buffer-'));
  const args = ['journals', 'append', '-l', 'app=abuf', '--framing', 'lines', '--buffer-dir', bufferDir, '--metrics-addr', '127.0.0.1:0', '--log.level', 'info'];
  const p = spawnGazctl(args, { env: brokerEnv(cluster!), timeoutMs: 180_000, keepStdinOpen: true });
  const running = () => p.child.exitCode === null && p.child.signalCode === null;
  t.after(() => void (running() && p.child.kill('SIGKILL')));
  let url: string | undefined;
  while (!url) {
    assert.ok(running(), `gazctl ended before serving metrics\n${p.stderrText()}`);
    url = /serving metrics at (http:\/\/\S+\/metrics)/.exec(p.stderrText())?.[1];
    if (!url) await sleep(20);
  }
  const scrape = async () => {
    const text = await (await fetch(url!)).text();
    const value = (name: string) => {
      const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
      assert.ok(m, `${name} is exported\n${text}`);
      return Number(m[1]);
    };
    return {
      disk: value('gazette_append_service_disk_buffer_bytes'),
      files: value('gazette_append_service_disk_buffer_files'),
      memory: value('gazette_append_service_memory_buffer_bytes'),
      inflight: value('gazette_append_service_inflight_bytes'),
      appended: value('gazette_append_bytes_total'),
      limit: value('gazette_append_service_disk_buffer_limit_bytes'),
    };
  };

  let seq = 0;
  let written = 0;
  /** Writes `n` records ("<seq> xxx…\n", about 100 bytes) to gazctl's stdin. */
  const feed = async (n: number) => {
    const lines: string[] = [];
    for (let i = 0; i < n; i++) lines.push(`${String(seq++).padStart(8, '0')} ${'x'.repeat(91)}\n`);
    const chunk = Buffer.from(lines.join(''));
    written += chunk.length;
    if (p.child.stdin!.write(chunk)) return;
    // Waits for gazctl to read on, or to end (which the next running() check reports).
    await Promise.race([once(p.child.stdin!, 'drain'), p.result]);
    assert.ok(running(), `gazctl ended (${p.child.exitCode} ${p.child.signalCode}) while reading its input\n${p.stderrText()}`);
  };

  // Brokers up: records flow straight through.
  await feed(5_000);
  while ((await scrape()).appended < written) {
    assert.ok(running(), p.stderrText());
    await sleep(50);
  }
  const before = await scrape();
  assert.equal(before.disk, 0, 'nothing on disk while the brokers keep up');
  assert.equal(before.limit, 1024 ** 3, 'the default disk limit (1 GiB) is reported');

  // Every broker stopped: the producer keeps reading, past its memory bound, onto disk.
  const pids = cluster!.brokers.map((b) => b.pid!);
  for (const pid of pids) process.kill(pid, 'SIGSTOP');
  const samples: number[] = [];
  let duringOutage: Awaited<ReturnType<typeof scrape>>;
  try {
    for (const pid of pids) while (processState(pid) !== 'T') await sleep(5);
    const appendedAtStop = (await scrape()).appended;
    // Feed until the disk gauge has risen twice (two increases between scrapes), all while stopped.
    while (samples.filter((v, i) => i > 0 && v > samples[i - 1]!).length < 2 || samples.at(-1)! === 0) {
      assert.ok(running(), `gazctl ended during the outage\n${p.stderrText()}`);
      assert.ok(written < 200_000_000, `200 MB fed with the brokers stopped and the disk gauge did not rise twice: ${samples.join(', ')}`);
      await feed(10_000);
      // Give gazctl a moment to read what was fed before scraping again.
      await sleep(100);
      samples.push((await scrape()).disk);
    }
    duringOutage = await scrape();
    assert.ok(pids.every((pid) => processState(pid) === 'T'), 'every broker stayed stopped while the gauge rose');
    // At most the answers already on their way when the brokers stopped (one batch, 3 MiB, per journal).
    assert.ok(duringOutage.appended <= appendedAtStop + 3 * 3 * 1024 * 1024, 'little was committed meanwhile');
    // The buffer files are open, but unlinked: nothing in the directory.
    assert.deepEqual(readdirSync(bufferDir), []);
    const held = deletedFilesIn(p.child.pid!, bufferDir);
    assert.ok(held.length >= 1 && held.length === duringOutage.files, `gazctl holds ${held.length} unlinked buffer files (${duringOutage.files} reported)`);
  } finally {
    for (const pid of pids) process.kill(pid, 'SIGCONT');
  }
  t.diagnostic(`disk gauge during the outage: ${samples.join(', ')}; ${duringOutage.files} files; ${written} bytes fed so far`);
  assert.ok(duringOutage.disk > 0 && duringOutage.disk >= Math.max(...samples), `bytes on disk during the outage: ${samples.join(', ')}, ${duringOutage.disk}`);

  // Brokers back: the backlog drains to zero with the input still open.
  let after = await scrape();
  while (after.disk > 0 || after.memory > 0 || after.inflight > 0 || after.appended < written) {
    assert.ok(running(), `gazctl ended while draining\n${p.stderrText()}`);
    await sleep(100);
    after = await scrape();
  }
  assert.equal(after.files, 0, 'every buffer file was closed');
  assert.equal(after.appended, written, 'every byte fed was appended (by the counter)');
  assert.deepEqual(deletedFilesIn(p.child.pid!, bufferDir), []);

  p.child.stdin!.end();
  const r = await p.result;
  assert.equal(r.code, 0, describeResult(args, r));
  assert.deepEqual(readdirSync(bufferDir), [], 'nothing left behind');

  // Every record exactly once, in input order within each journal.
  const seen = new Array<number>(seq).fill(0);
  let total = 0;
  for (const j of JOURNALS) {
    const read = await gzOk(cluster!, ['journals', 'read', '-l', `name=${j}`], { timeoutMs: 60_000 });
    const lines = read.stdout.toString('utf8').split('\n');
    assert.equal(lines.pop(), '', `${j} ends with a whole record`);
    let last = -1;
    for (const line of lines) {
      assert.match(line, /^\d{8} x{91}$/, `${j}: a whole record`);
      const n = Number(line.slice(0, 8));
      assert.ok(n > last, `${j}: record ${n} after ${last}, in input order`);
      last = n;
      seen[n]!++;
    }
    assert.ok(lines.length > 0, `${j} got records`);
    total += read.stdout.length;
  }
  assert.deepEqual(
    seen.flatMap((c, n) => (c === 1 ? [] : [`${n}: ${c}`])),
    [],
    'each record appears exactly once',
  );
  assert.equal(total, written);
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The kernel's state letter of a process (R, S, T for stopped, …). */
function processState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!;
}

/** Unlinked files in `dir` that process `pid` holds open. */
function deletedFilesIn(pid: number, dir: string): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith(dir + '/') && link.endsWith(' (deleted)')) out.push(link);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}
