import { accessSync, constants as fsConstants, createReadStream, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { GazctlCommand, journalsBaseFlags, UsageError } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { booleanOption, choiceOption, oclifFlags, optionalStringOption, options, sizeOption, stringOption, type OptionSet } from '../../cli/options.js';
import { formatOption } from '../../cli/render.js';
import { inputError } from '../../cli/input.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { JournalClient } from '../../lib/client/journal-client.js';
import type { JournalWatch } from '../../lib/client/watch.js';
import { RecordSplitter, keyOfRecord } from '../../lib/message/framing.js';
import { JournalSet, type Mapping } from '../../lib/message/mapping.js';
import { AppendService, AppendSourceError, appendStream, type AppendRetryInfo } from '../../lib/client/append-service.js';
import type { AppendMetrics } from '../../lib/client/append-metrics.js';
import { type ListResponse } from '../../lib/protocol/gen/broker/protocol.js';

const FRAMINGS = ['none', 'lines', 'fixed'] as const;
const MAPPINGS = ['random', 'modulo', 'rendezvous', 'direct'] as const satisfies readonly Mapping[];

const OPTIONS = options({
  selector: selector(true),
  input: stringOption({ char: 'i', default: '-', showDefault: true, description: 'Input file, or - for stdin.', ini: { field: 'Input' } }),
  framing: choiceOption({ char: 'f', choices: FRAMINGS, default: 'none', showDefault: true, description: 'Record framing of the input.', ini: { field: 'Framing' } }),
  mapping: choiceOption({ char: 'm', choices: MAPPINGS, default: 'random', showDefault: true, description: 'How records map to journals.', ini: { field: 'Mapping' } }),
  base64: booleanOption({ description: 'Partition keys of lines framing are base64 (standard, padded).', ini: { field: 'Base64' } }),
  format: formatOption(['text', 'json']),
  'buffer-dir': optionalStringOption({
    description: 'With --framing lines or fixed: once 4 MiB wait to be appended (brokers slow or away), buffer further records in temporary files in this directory instead of pausing the input. The files are unlinked as soon as they are created, so nothing is left behind.',
    ini: null,
  }),
  'buffer-disk-limit': sizeOption({ default: '1GiB', showDefault: true, description: 'With --buffer-dir: bytes on disk past which reading the input pauses (for at most --timeout, then the command fails).', ini: null }),
  'metrics-addr': optionalStringOption({ description: 'Serve Prometheus metrics of the append buffers at http://HOST:PORT/metrics while appending (port 0: any free port, logged at info level).', ini: null }),
});

/** What this run committed to one journal (-o json). */
interface Committed {
  appends: number;
  bytes: number;
  /** Begin of the first and end of the last commit (other writers' appends may lie between). */
  begin: bigint;
  end: bigint;
}

export default class JournalsAppend extends GazctlCommand {
  static override summary = 'Append records from a file or stdin to journals.';
  static override description = `Appends input to the journals matching the selector.

--framing none (default) appends the whole input to one randomly chosen journal as a single atomic append: all of it commits, or nothing does.

--framing lines or fixed splits the input into records (newline-terminated lines, or fixed frames: magic 66 33 93 36, little-endian uint32 length, payload). Each record goes to one journal by --mapping: random, or by a partition key that precedes each record in the same framing (modulo and rendezvous hash the key with 32-bit FNV-1a; direct takes the key as the journal name). --base64 decodes line keys from base64. Records of one journal keep their input order and are batched into atomic appends; the command exits 0 only when every record has committed.

-o json prints, once every record has committed, {"journals":[{"journal","appends","bytes","begin","end"}]} on stdout: per journal written, the appends and content bytes this run committed, the begin offset of its first commit and the end offset of its last (exact integers; other writers' appends may lie between them).

A long-running producer (input from a pipe) can ride out slow or unavailable brokers with --buffer-dir: records past 4 MiB in memory go to temporary files there (up to --buffer-disk-limit), and --metrics-addr serves how much is buffered (see docs/append-buffering.md).`;
  static override examples = [
    { description: 'Append a file atomically to one journal', command: '<%= config.bin %> journals append -l name=acme/events -i events.ndjson' },
    { description: 'Spread lines randomly over journals', command: 'cat events.ndjson | <%= config.bin %> journals append -l app=billing --framing lines' },
    { description: 'Key each line (key line, then record line)', command: '<%= config.bin %> journals append -l app=billing --framing lines --mapping modulo -i keyed.txt' },
    { description: 'Where the content went, for a script', command: '<%= config.bin %> journals append -l name=acme/events -i events.ndjson -o json' },
    {
      description: 'Buffer up to 20 GiB on disk while brokers are away, with metrics',
      command: 'tail -F app.log | <%= config.bin %> journals append -l app=logs --framing lines --buffer-dir /var/spool/gazctl --buffer-disk-limit 20GiB --metrics-addr :9464 --timeout 0',
    },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const { selector, framing, mapping } = flags;
    if (framing === 'none' && mapping !== 'random') throw new UsageError('--framing none appends the whole input to one journal: use it with --mapping random');
    if (flags.base64 && (framing !== 'lines' || mapping === 'random')) throw new UsageError('--base64 requires --framing lines and a --mapping other than random');
    const bufferDir = flags['buffer-dir'] || undefined;
    if (bufferDir !== undefined) {
      if (framing === 'none') throw new UsageError('--buffer-dir buffers records: use it with --framing lines or fixed');
      checkBufferDir(bufferDir);
    }
    const metricsAddr = flags['metrics-addr'] || undefined;
    const listen = metricsAddr === undefined ? undefined : parseListenAddress(metricsAddr);

    const svc = this.serviceOptions('broker');
    let metrics: AppendMetrics | undefined;
    let server: Server | undefined;
    if (listen) ({ metrics, server } = await this.serveMetrics(listen, metricsAddr!));
    const client = this.journalClient(svc);
    const watch = client.watchJournals(selector);
    let watchdog: NodeJS.Timeout | undefined;
    // A retried append says once per journal and outage what it waits for.
    const waiting = new Set<string>();
    const onRetry = (i: AppendRetryInfo) => {
      const fields = { journal: i.journal, attempt: i.attempt + 1, delayMs: i.delayMs, err: (i.error as Error)?.message ?? String(i.error) };
      if (waiting.has(i.journal)) return this.log_.debug('append failed; retrying', fields);
      waiting.add(i.journal);
      this.log_.warn(`append to ${i.journal} is waiting for ${i.waitingFor}`, fields);
    };
    const done = new Map<string, Committed>();
    const onCommit = (journal: string, bytes: number, commit: { begin: bigint; end: bigint } | undefined) => {
      if (waiting.delete(journal)) this.log_.warn(`append to ${journal} resumed`);
      const c = done.get(journal);
      const begin = commit?.begin ?? 0n;
      const end = commit?.end ?? 0n;
      if (c) {
        c.appends++;
        c.bytes += bytes;
        if (end > c.end) c.end = end;
      } else done.set(journal, { appends: 1, bytes, begin, end });
    };
    try {
      let first;
      try {
        first = await watch.ready();
      } catch (err) {
        throw new GazctlError(`cannot resolve the selector to journals: ${(err as Error).message}`, { cause: err });
      }
      let set = journalSet(first);
      let lastProgress = Date.now();
      const stallMs = svc.timeoutMs > 0 ? svc.timeoutMs : 30_000;
      // An append can wait on the broker indefinitely (e.g. while its fragment store is
      // unhealthy). Say so, once, with the store's health, instead of hanging silently.
      let warned = false;
      // Nothing waiting to be appended (a pipe that is quiet for a while) is not a stall.
      let idle = () => false;
      watchdog = setInterval(() => {
        if (idle()) lastProgress = Date.now();
        if (warned || Date.now() - lastProgress < stallMs) return;
        warned = true;
        void this.explainStall(client, watch, Math.round((Date.now() - lastProgress) / 1000));
      }, 1000);
      watchdog.unref();
      // Keep the journal set current while we append.
      watch.on('change', () => {
        if (watch.snapshot) set = journalSet(watch.snapshot);
      });
      watch.done.catch(() => {
        /* the listing stays as last seen */
      });

      const input = flags.input === '-' ? process.stdin : createReadStream(flags.input, { highWaterMark: 1 << 18 });
      // A failure of the input itself (missing file, EISDIR, …) surfaces from the loops below,
      // which read it; each names the input the same way.
      const records = input as AsyncIterable<Buffer>;

      if (framing === 'none') {
        const journal = set.pick('random', undefined);
        let resp;
        try {
          resp = await appendStream(client, journal, readingInput(records, flags.input), {
            timeoutMs: svc.timeoutMs,
            onRetry,
            onWrite: () => (lastProgress = Date.now()),
          });
        } catch (err) {
          // The input's own failures are already worded by readingInput.
          throw err instanceof AppendSourceError ? err.cause : err;
        }
        const c = resp.commit;
        onCommit(journal, c ? Number(c.end - c.begin) : 0, c);
        lastProgress = Date.now();
        this.log_.debug('appended', { journal, begin: resp.commit?.begin, end: resp.commit?.end });
        if (flags.format === 'json') process.stdout.write(committedJson(done));
        return;
      }

      let committed = 0;
      const service = new AppendService(client, {
        timeoutMs: svc.timeoutMs,
        disk: bufferDir === undefined ? undefined : { dir: bufferDir, maxBytes: flags['buffer-disk-limit'] },
        metrics,
        onRetry,
        onCommitted: (j, n, res) => {
          onCommit(j, n, res.commit);
          committed += n;
          lastProgress = Date.now();
        },
      });
      idle = () => {
        const f = service.figures();
        return f.memoryBytes === 0 && f.diskBytes === 0 && f.inflightBytes === 0;
      };
      const splitter = new RecordSplitter(framing);
      const keyed = mapping !== 'random';
      let key: Buffer | undefined;
      const progress = process.stderr.isTTY ? setInterval(() => process.stderr.write(`\rcommitted ${(committed / 1048576).toFixed(1)} MiB`), 500) : undefined;
      try {
        for await (const chunk of readingInput(records, flags.input)) {
          if (!keyed && framing === 'lines' && set.size === 1) {
            for (const run of splitter.pushBulkParts(chunk)) service.push(set.names[0]!, run);
          } else {
            for (const rec of splitter.push(chunk)) {
              if (keyed && key === undefined) {
                try {
                  key = keyOfRecord(rec, framing, Boolean(flags.base64));
                } catch (err) {
                  throw flags.base64 ? new GazctlError(`--base64: ${(err as Error).message}`) : err;
                }
                continue;
              }
              const journal = set.pick(mapping, key);
              if (keyed) this.log_.debug('mapped partition key to journal', { journal, key: key!.toString('utf8') });
              key = undefined;
              service.push(journal, rec);
            }
          }
          // With a disk buffer, a wait means the disk limit was reached: give up after --timeout
          // (records buffered so far are lost with the process, so say so loudly).
          await service.backpressure({ timeoutMs: bufferDir === undefined ? 0 : svc.timeoutMs });
        }
        if (splitter.pending > 0) {
          await service.flush().catch(() => {});
          throw new GazctlError(`input ends inside a record (${splitter.pending} bytes after the last ${framing === 'lines' ? 'newline' : 'complete frame'}); records before it were appended`);
        }
        await service.flush();
        if (flags.format === 'json') process.stdout.write(committedJson(done));
      } finally {
        if (progress) {
          clearInterval(progress);
          process.stderr.write(`\rcommitted ${(committed / 1048576).toFixed(1)} MiB\n`);
        }
        await service.close();
      }
    } finally {
      clearInterval(watchdog);
      watch.close();
      client.close();
      server?.close();
    }
  }

  /** Starts the /metrics endpoint (prom-client is loaded only for it). */
  private async serveMetrics(listen: { host: string; port: number }, text: string): Promise<{ metrics: AppendMetrics; server: Server }> {
    const [{ Registry, collectDefaultMetrics }, { AppendMetrics }, { createServer }] = await Promise.all([
      import('prom-client'),
      import('../../lib/client/append-metrics.js'),
      import('node:http'),
    ]);
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const metrics = new AppendMetrics(registry);
    const server = createServer((req, res) => {
      if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n');
        return;
      }
      registry.metrics().then(
        (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
        (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err) => reject(new GazctlError(`cannot serve metrics at ${text}: ${err.message}`, { cause: err })));
      server.listen(listen.port, listen.host || undefined, () => resolve());
    });
    server.unref();
    const a = server.address();
    const where = a && typeof a === 'object' ? `${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` : text;
    this.log_.info(`serving metrics at http://${where}/metrics`, { addr: where });
    return { metrics, server };
  }

  private async explainStall(client: JournalClient, watch: JournalWatch, seconds: number): Promise<void> {
    const snapshot: ListResponse = watch.snapshot ?? { status: 0, header: undefined, journals: [] };
    const stores = [...new Set(snapshot.journals.map((j) => j.spec?.fragment?.stores[0]).filter((s): s is string => Boolean(s)))];
    const problems: string[] = [];
    for (const store of stores.slice(0, 5)) {
      try {
        const r = await client.fragmentStoreHealth(store, undefined, { timeoutMs: 5000 });
        if (r.store_health_error) problems.push(`fragment store ${store} is unhealthy: ${r.store_health_error}`);
      } catch (err) {
        problems.push(`fragment store ${store}: ${(err as Error).message}`);
      }
    }
    const why = problems.length ? problems.join('; ') : 'the brokers have not committed it yet (check broker logs)';
    process.stderr.write(`gazctl: warning: appends have made no progress for ${seconds}s and are still waiting: ${why}\n`);
  }
}

/** The chunks of `input`; a failure reading it becomes `cannot read <path>: <why>`. */
async function* readingInput(input: AsyncIterable<Buffer>, path: string): AsyncGenerator<Buffer> {
  const it = input[Symbol.asyncIterator]();
  for (;;) {
    let r: IteratorResult<Buffer>;
    try {
      r = await it.next();
    } catch (err) {
      throw inputError(path, err);
    }
    if (r.done) return;
    yield r.value;
  }
}

/** `host:port`, `[v6]:port` or `:port` (every interface). */
function parseListenAddress(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new UsageError(`--metrics-addr: expected HOST:PORT (or :PORT), got ${JSON.stringify(text)}`);
  return { host: m[1] ?? m[2] ?? '', port };
}

/** Fails early (one line, before any input is read) on a buffer directory we cannot use. */
function checkBufferDir(dir: string): void {
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    throw new GazctlError(`--buffer-dir ${dir}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such directory' : (err as Error).message}`);
  }
  if (!isDir) throw new GazctlError(`--buffer-dir ${dir}: not a directory`);
  try {
    accessSync(dir, fsConstants.W_OK | fsConstants.X_OK);
  } catch {
    throw new GazctlError(`--buffer-dir ${dir}: not writable`);
  }
}

function journalSet(resp: ListResponse): JournalSet {
  // Appends resume suspended journals, so every matched journal is a candidate.
  return new JournalSet(resp.journals.map((j) => j.spec!.name));
}

/** The -o json document (see the description), journals by name. */
function committedJson(done: ReadonlyMap<string, Committed>): string {
  const journals = [...done]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([journal, c]) => `{"journal":${JSON.stringify(journal)},"appends":${c.appends},"bytes":${c.bytes},"begin":${c.begin},"end":${c.end}}`);
  return `{"journals":[${journals.join(',')}]}\n`;
}
