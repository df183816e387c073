// The append service's buffering: memory, then unlinked temporary files, with a disk limit that
// producers wait on, and its prom-client metrics. The broker is a fake client here (a unit test of
// the queues); test/integration/append-buffering.test.ts is the proof against real brokers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Registry } from 'prom-client';
import { AppendService, AppendWaitTimeoutError, type AppendClient } from '../../../../src/lib/client/append-service.js';
import { AppendMetrics } from '../../../../src/lib/client/append-metrics.js';
import { Publisher } from '../../../../src/lib/client/publisher.js';
import { jsonEncoder } from '../../../../src/lib/message/encoder.js';
import type { Appender } from '../../../../src/lib/client/appender.js';
import { BrokerStatusError } from '../../../../src/lib/protocol/errors.js';
import { AppendResponse, Status } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { fastDelay } from './helpers.js';

/**
 * A fake broker: while `away`, every append is refused at its commit with
 * NO_JOURNAL_PRIMARY_BROKER (a definite refusal: retried, and replayed from the start); otherwise
 * the content of an append commits to its journal at once.
 */
class FakeBroker implements AppendClient {
  away = false;
  journals = new Map<string, Buffer[]>();
  appends = 0;
  refused = 0;

  append(journal: string): Appender {
    const chunks: Buffer[] = [];
    this.appends++;
    const fake = {
      commitSent: false,
      write: async (c: Uint8Array) => void chunks.push(Buffer.from(c)),
      commit: async () => {
        fake.commitSent = true;
        if (this.away) {
          this.refused++;
          throw new BrokerStatusError(Status.NO_JOURNAL_PRIMARY_BROKER, `appending to ${journal}`);
        }
        const j = this.journals.get(journal) ?? [];
        j.push(...chunks);
        this.journals.set(journal, j);
        return AppendResponse.fromPartial({ status: Status.OK });
      },
      abort: () => {},
    };
    return fake as unknown as Appender;
  }

  content(journal: string): string {
    return Buffer.concat(this.journals.get(journal) ?? []).toString();
  }
}

/** Links of this process's open descriptors that point into `dir`. */
function openFilesIn(dir: string, pid: number | 'self' = 'self'): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith(dir + '/')) out.push(link);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

function records(journal: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${journal} record ${String(i).padStart(6, '0')} ${'x'.repeat(i % 50)}\n`);
}

/** Waits (without a deadline: the test runner's timeout is the bound) until `cond` holds. */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 2));
}

test('records past the memory bound go to unlinked files, keep their order and commit once when the broker returns', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const broker = new FakeBroker();
  broker.away = true;
  const svc = new AppendService(broker, { maxBufferedBytes: 4096, maxBatchBytes: 16 * 1024, lingerMs: 0, delay: fastDelay, disk: { dir, fileBytes: 64 * 1024 } });
  const journals = ['a/1', 'a/2', 'a/3'];
  const want = new Map(journals.map((j) => [j, records(j, 3000)]));
  let peakDisk = 0;
  let peakFiles = 0;
  for (let i = 0; i < 3000; i++) {
    for (const j of journals) svc.push(j, Buffer.from(want.get(j)![i]!));
    const f = svc.figures();
    assert.ok(f.memoryBytes <= 4096, `memory stays under its bound (${f.memoryBytes})`);
    peakDisk = Math.max(peakDisk, f.diskBytes);
    peakFiles = Math.max(peakFiles, f.diskFiles);
  }
  const total = [...want.values()].flat().reduce((n, r) => n + r.length, 0);
  const f = svc.figures();
  assert.ok(f.diskBytes > total - 3 * 16 * 1024 - 4096, `nearly everything went to disk (${f.diskBytes} of ${total})`);
  assert.ok(peakFiles > 3, `each queue started new files past fileBytes (${peakFiles} open at most)`);
  // The files are open but have no name: a crash leaves nothing in the directory.
  assert.deepEqual(readdirSync(dir), []);
  assert.equal(openFilesIn(dir).length, f.diskFiles);
  assert.ok(openFilesIn(dir).every((l) => l.endsWith(' (deleted)')), openFilesIn(dir).join(', '));
  await until(() => broker.refused > 10);

  broker.away = false;
  await svc.flush();
  for (const j of journals) assert.equal(broker.content(j), want.get(j)!.join(''), `${j}: every record once, in order`);
  assert.deepEqual(svc.figures(), { memoryBytes: 0, diskBytes: 0, diskFiles: 0, diskLimitBytes: 1024 ** 3, inflightBytes: 0 });
  assert.deepEqual(openFilesIn(dir), [], 'every file was closed once its records committed');
  assert.ok(peakDisk >= f.diskBytes);
  await svc.close();
});

test('files are freed as the backlog drains, not only at the end', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const broker = new FakeBroker();
  broker.away = true;
  const svc = new AppendService(broker, { maxBufferedBytes: 1024, maxBatchBytes: 8 * 1024, lingerMs: 0, delay: fastDelay, disk: { dir, fileBytes: 32 * 1024 } });
  for (const r of records('b/1', 4000)) svc.push('b/1', Buffer.from(r));
  const before = svc.figures();
  broker.away = false;
  // Some file closes while others still hold records.
  await until(() => svc.figures().diskFiles < before.diskFiles || svc.figures().diskFiles === 0);
  const mid = svc.figures();
  await svc.flush();
  assert.ok(before.diskFiles > 2, `several files (${before.diskFiles})`);
  assert.ok(mid.diskBytes < before.diskBytes, `space given back as files drained (${mid.diskBytes} < ${before.diskBytes})`);
  assert.equal(broker.content('b/1'), records('b/1', 4000).join(''));
  await svc.close();
});

test('without disk, producers wait on memory as before', { timeout: 60_000 }, async () => {
  const broker = new FakeBroker();
  broker.away = true;
  const svc = new AppendService(broker, { maxBufferedBytes: 1000, lingerMs: 0, delay: fastDelay });
  for (const r of records('m/1', 100)) svc.push('m/1', Buffer.from(r));
  assert.ok(svc.figures().memoryBytes > 1000);
  assert.equal(svc.figures().diskBytes, 0);
  let waited = true;
  const wait = svc.backpressure().then(() => (waited = false));
  await until(() => broker.refused > 2);
  assert.equal(waited, true, 'the producer waits while the broker is away');
  broker.away = false;
  await wait;
  await svc.flush();
  assert.equal(broker.content('m/1'), records('m/1', 100).join(''));
});

test('past the disk limit producers wait; a wait with a timeout ends in a clear error and is counted', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const registry = new Registry();
  const metrics = new AppendMetrics(registry);
  const broker = new FakeBroker();
  broker.away = true;
  const svc = new AppendService(broker, { maxBufferedBytes: 1024, lingerMs: 0, delay: fastDelay, metrics, disk: { dir, maxBytes: 64 * 1024 } });
  for (const r of records('c/1', 2000)) svc.push('c/1', Buffer.from(r));
  assert.ok(svc.figures().diskBytes > 64 * 1024);
  await assert.rejects(svc.backpressure({ timeoutMs: 30 }), (err: Error) => {
    assert.ok(err instanceof AppendWaitTimeoutError);
    assert.match(err.message, /^appends are not keeping up: waited \d+ ms for [\d.]+ KiB buffered on disk in \S+ \(limit 64\.0 KiB\) to drain$/);
    return true;
  });
  await assert.rejects(svc.backpressure({ timeoutMs: 1 }), AppendWaitTimeoutError);
  const text = await registry.metrics();
  assert.match(text, /^gazette_append_service_wait_timeouts_total 2$/m);
  assert.match(text, /^gazette_append_service_disk_buffer_limit_bytes 65536$/m);
  assert.match(text, new RegExp(`^gazette_append_service_disk_buffer_bytes ${svc.figures().diskBytes}$`, 'm'));
  // A wait without a timeout ends once the broker is back.
  const wait = svc.backpressure();
  broker.away = false;
  await wait;
  await svc.flush();
  assert.equal(broker.content('c/1'), records('c/1', 2000).join(''));
  await svc.close();
});

test('metrics: gauges sum the services sharing them, counters count bytes and retries', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const registry = new Registry();
  const metrics = new AppendMetrics(registry);
  const broker = new FakeBroker();
  broker.away = true;
  const one = new AppendService(broker, { maxBufferedBytes: 512, lingerMs: 0, delay: fastDelay, metrics, disk: { dir } });
  const two = new AppendService(broker, { maxBufferedBytes: 512, lingerMs: 0, delay: fastDelay, metrics, disk: { dir } });
  let bytes = 0;
  for (const r of records('d/1', 500)) {
    one.push('d/1', Buffer.from(r));
    two.push('d/2', Buffer.from(r));
    bytes += 2 * r.length;
  }
  await until(() => broker.refused > 4);
  const value = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)![1]);
  let text = await registry.metrics();
  assert.equal(value(text, 'gazette_append_service_disk_buffer_bytes'), one.figures().diskBytes + two.figures().diskBytes);
  assert.equal(value(text, 'gazette_append_service_memory_buffer_bytes'), one.figures().memoryBytes + two.figures().memoryBytes);
  assert.equal(value(text, 'gazette_append_service_inflight_bytes'), one.figures().inflightBytes + two.figures().inflightBytes);
  assert.equal(value(text, 'gazette_append_service_disk_buffer_files'), 2);
  assert.ok(value(text, 'gazette_append_service_disk_buffer_bytes') > 0);
  assert.ok(value(text, 'gazette_append_service_retries_total') >= 4);
  broker.away = false;
  await Promise.all([one.flush(), two.flush()]);
  text = await registry.metrics();
  assert.equal(value(text, 'gazette_append_bytes_total'), bytes);
  for (const g of ['disk_buffer_bytes', 'disk_buffer_files', 'memory_buffer_bytes', 'inflight_bytes']) assert.equal(value(text, `gazette_append_service_${g}`), 0, g);
  await one.close();
  await two.close();
  // Closed services are no longer reported.
  assert.equal(value(await registry.metrics(), 'gazette_append_service_disk_buffer_limit_bytes'), 0);
});

test('close drops what did not commit, frees the files and fails later pushes', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const broker = new FakeBroker();
  broker.away = true;
  const failed: string[] = [];
  const svc = new AppendService(broker, { maxBufferedBytes: 512, lingerMs: 0, delay: fastDelay, disk: { dir }, onFailed: (j, e) => failed.push(`${j}: ${e.message}`) });
  for (const r of records('e/1', 300)) svc.push('e/1', Buffer.from(r));
  assert.ok(openFilesIn(dir).length > 0);
  await svc.close();
  assert.deepEqual(openFilesIn(dir), []);
  assert.deepEqual(svc.figures(), { memoryBytes: 0, diskBytes: 0, diskFiles: 0, diskLimitBytes: 1024 ** 3, inflightBytes: 0 });
  assert.deepEqual(failed, ['e/1: the append service is closed']);
  assert.throws(() => svc.push('e/1', Buffer.from('late\n')), /the append service is closed/);
  assert.throws(() => svc.push('e/2', Buffer.from('late\n')), /the append service is closed/);
  assert.equal(broker.content('e/1'), '');
});

test('a spill directory that cannot hold files fails the push with one clear line', { timeout: 60_000 }, () => {
  const broker = new FakeBroker();
  broker.away = true;
  const svc = new AppendService(broker, { maxBufferedBytes: 1, lingerMs: 0, delay: fastDelay, disk: { dir: '/nonexistent/abuf' } });
  assert.throws(() => svc.push('f/1', Buffer.from('record\n')), /^AppendBufferError: cannot create an append buffer file in \/nonexistent\/abuf: ENOENT/);
  void svc.close();
});

test('a process killed while it buffers to disk leaves nothing in the directory', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const mod = pathToFileURL(join(import.meta.dirname, '../../../../src/lib/client/append-service.js')).href;
  // A producer whose broker never answers: everything past 1 KiB goes to disk; it says how much,
  // then waits to be killed.
  const script = `
    import { AppendService } from ${JSON.stringify(mod)};
    const never = { append: () => ({ commitSent: false, write: async () => {}, commit: () => new Promise(() => {}), abort() {} }) };
    const svc = new AppendService(never, { maxBufferedBytes: 1024, disk: { dir: ${JSON.stringify(dir)} } });
    for (let i = 0; i < 20000; i++) svc.push('g/' + (i % 4), Buffer.from('record ' + i + ' ' + 'y'.repeat(80) + '\\n'));
    console.log(JSON.stringify(svc.figures()));
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  await until(() => out.includes('\n'));
  const figures = JSON.parse(out) as { diskBytes: number; diskFiles: number };
  assert.ok(figures.diskBytes > 1_000_000, `it buffered on disk (${figures.diskBytes} bytes)`);
  const held = openFilesIn(dir, child.pid!);
  assert.equal(held.length, figures.diskFiles);
  assert.ok(held.length >= 4 && held.every((l) => l.endsWith(' (deleted)')), held.join(', '));
  assert.deepEqual(readdirSync(dir), [], 'while it runs, the files have no name');
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  assert.deepEqual(readdirSync(dir), [], 'nothing left after the kill');
});

test('a buffer file that cannot be written (file size limit) fails its queue with one clear line, not silently', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const mod = pathToFileURL(join(import.meta.dirname, '../../../../src/lib/client/append-service.js')).href;
  // Under `ulimit -f 256` (256 KiB) a write past the limit fails with EFBIG (SIGXFSZ is ignored).
  // The broker comes back after the pushes; the queue must then fail, naming the write error.
  const script = `
    process.on('SIGXFSZ', () => {});
    import(${JSON.stringify(mod)}).then(async ({ AppendService }) => {
      let away = true;
      const broker = { append: () => { const a = { commitSent: false, write: async () => {}, commit: async () => { a.commitSent = true; if (away) throw Object.assign(new Error('14 UNAVAILABLE: connect ECONNREFUSED'), { code: 14, details: 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1' }); return { status: 0 }; }, abort() {} }; return a; } };
      const svc = new AppendService(broker, { maxBufferedBytes: 1024, lingerMs: 0, delay: () => 1, disk: { dir: ${JSON.stringify(dir)} } });
      let refused;
      for (let i = 0; i < 20000 && !refused; i++) {
        try { svc.push('h/1', Buffer.from('record ' + i + ' ' + 'z'.repeat(80) + '\\n')); } catch (err) { refused = err.message; }
      }
      away = false;
      const flushed = await svc.flush().then(() => 'ok', (err) => err.message);
      console.log(JSON.stringify({ refused, flushed, figures: svc.figures() }));
      await svc.close();
    });
  `;
  const child = spawn('bash', ['-c', 'ulimit -f 256 && exec "$0" --input-type=module -e "$1"', process.execPath, script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  const code = await new Promise((r) => child.once('exit', r));
  assert.equal(code, 0, out);
  const r = JSON.parse(out) as { refused?: string; flushed: string; figures: { diskBytes: number; diskFiles: number } };
  assert.match(r.refused ?? '', /^cannot write to an append buffer file in \S+: EFBIG/, 'later pushes are refused with the write error');
  assert.equal(r.flushed, r.refused, 'the queue failed with the same error when its append reached the lost records');
  assert.equal(r.figures.diskFiles, 0, 'the failed queue gave its file back');
  assert.equal(r.figures.diskBytes, 0);
});

test('a Publisher buffers to disk through its append options, keeps clocks in order per journal, and frees its files on close', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-abuf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const registry = new Registry();
  const broker = new FakeBroker();
  broker.away = true;
  const pub = new Publisher(broker, { append: { maxBufferedBytes: 2048, delay: fastDelay, disk: { dir }, metrics: new AppendMetrics(registry) } });
  const encoder = jsonEncoder<{ n: number; j: string }>((j) => ({ n: -1, j }));
  for (let n = 0; n < 3000; n++) pub.publishCommitted((m) => m.j, encoder, { n, j: `p/${n % 3}` });
  await until(() => broker.refused > 3);
  assert.match(await registry.metrics(), /^gazette_append_service_disk_buffer_bytes [1-9]\d*$/m);
  assert.ok(openFilesIn(dir).length >= 3, 'one file per journal queue at least');
  broker.away = false;
  await pub.flush();
  for (let j = 0; j < 3; j++) {
    const ns = broker
      .content(`p/${j}`)
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { n: number }).n);
    assert.deepEqual(ns, Array.from({ length: 1000 }, (_, i) => i * 3 + j), `p/${j}: each message once, in order`);
  }
  assert.match(await registry.metrics(), /^gazette_append_service_disk_buffer_bytes 0$/m);
  // Closing with records still buffered frees the files and rejects their waiters.
  broker.away = true;
  const last = pub.publishCommitted((m) => m.j, encoder, { n: 1, j: 'p/0' });
  for (let n = 0; n < 500; n++) pub.publishCommitted((m) => m.j, encoder, { n, j: 'p/1' });
  await until(() => openFilesIn(dir).length > 0);
  await pub.close();
  await assert.rejects(last.committed, /the append service is closed/);
  assert.deepEqual(openFilesIn(dir), []);
});
