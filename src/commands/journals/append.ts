import { createReadStream } from 'node:fs';
import { GazctlCommand, journalsBaseFlags, UsageError } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { booleanOption, choiceOption, oclifFlags, options, stringOption } from '../../cli/options.js';
import { openJournalClient } from '../../cli/clients.js';
import { inputError } from '../../cli/input.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { RecordSplitter, keyOfRecord } from '../../lib/message/framing.js';
import { JournalSet, type Mapping } from '../../lib/message/mapping.js';
import { AppendService } from '../../lib/client/append-service.js';
import { type ListResponse } from '../../lib/protocol/gen/broker/protocol.js';

const FRAMINGS = ['none', 'lines', 'fixed'] as const;
const MAPPINGS = ['random', 'modulo', 'rendezvous', 'direct'] as const satisfies readonly Mapping[];

const OPTIONS = options({
  selector: selector(true),
  input: stringOption({ char: 'i', default: '-', showDefault: true, description: 'Input file, or - for stdin.', ini: { field: 'Input' } }),
  framing: choiceOption({ char: 'f', choices: FRAMINGS, default: 'none', showDefault: true, description: 'Record framing of the input.', ini: { field: 'Framing' } }),
  mapping: choiceOption({ char: 'm', choices: MAPPINGS, default: 'random', showDefault: true, description: 'How records map to journals.', ini: { field: 'Mapping' } }),
  base64: booleanOption({ description: 'Partition keys of lines framing are base64 (standard, padded).', ini: { field: 'Base64' } }),
});

export default class JournalsAppend extends GazctlCommand {
  static override summary = 'Append records from a file or stdin to journals.';
  static override description = `Appends input to the journals matching the selector.

--framing none (default) appends the whole input to one randomly chosen journal as a single atomic append: all of it commits, or nothing does.

--framing lines or fixed splits the input into records (newline-terminated lines, or fixed frames: magic 66 33 93 36, little-endian uint32 length, payload). Each record goes to one journal by --mapping: random, or by a partition key that precedes each record in the same framing (modulo and rendezvous hash the key with 32-bit FNV-1a; direct takes the key as the journal name). --base64 decodes line keys from base64. Records of one journal keep their input order and are batched into atomic appends; the command exits 0 only when every record has committed.`;
  static override examples = [
    { description: 'Append a file atomically to one journal', command: '<%= config.bin %> journals append -l name=acme/events -i events.ndjson' },
    { description: 'Spread lines randomly over journals', command: 'cat events.ndjson | <%= config.bin %> journals append -l app=billing --framing lines' },
    { description: 'Key each line (key line, then record line)', command: '<%= config.bin %> journals append -l app=billing --framing lines --mapping modulo -i keyed.txt' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const { selector, framing, mapping } = flags;
    if (framing === 'none' && mapping !== 'random') throw new UsageError('--framing none appends the whole input to one journal: use it with --mapping random');
    if (flags.base64 && (framing !== 'lines' || mapping === 'random')) throw new UsageError('--base64 requires --framing lines and a --mapping other than random');

    const client = openJournalClient({ ...this.serviceOptions('broker'), log: this.log_ });
    const ac = new AbortController();
    const watch = client.watch(selector, { signal: ac.signal })[Symbol.asyncIterator]();
    let watchdog: NodeJS.Timeout | undefined;
    try {
      const first = await watch.next();
      if (first.done) throw new GazctlError('cannot resolve the selector to journals: the listing ended');
      let set = journalSet(first.value);
      let snapshot = first.value;
      let lastProgress = Date.now();
      const svc = this.serviceOptions('broker');
      const stallMs = svc.timeoutMs > 0 ? svc.timeoutMs : 30_000;
      // An append can wait on the broker indefinitely (e.g. while its fragment store is
      // unhealthy). Say so, once, with the store's health, instead of hanging silently.
      let warned = false;
      watchdog = setInterval(() => {
        if (warned || Date.now() - lastProgress < stallMs) return;
        warned = true;
        void this.explainStall(client, snapshot, Math.round((Date.now() - lastProgress) / 1000));
      }, 1000);
      watchdog.unref();
      // Keep the journal set current while we append.
      void (async () => {
        try {
          for (;;) {
            const r = await watch.next();
            if (r.done) return;
            set = journalSet(r.value);
            snapshot = r.value;
          }
        } catch {
          /* the watch ends with the command */
        }
      })();

      const input = flags.input === '-' ? process.stdin : createReadStream(flags.input, { highWaterMark: 1 << 20 });
      // A failure of the input itself (missing file, EISDIR, …) surfaces from the loops below,
      // which read it; each names the input the same way.
      const records = input as AsyncIterable<Buffer>;

      if (framing === 'none') {
        const journal = set.pick('random', undefined);
        const appender = client.append(journal);
        try {
          for await (const chunk of readingInput(records, flags.input)) {
            await appender.write(chunk);
            lastProgress = Date.now();
          }
        } catch (err) {
          appender.abort();
          throw err;
        }
        const resp = await appender.commit();
        lastProgress = Date.now();
        this.log_.debug('appended', { journal, begin: resp.commit?.begin, end: resp.commit?.end });
        return;
      }

      let committed = 0;
      const service = new AppendService(async (journal, chunks) => {
        await client.appendBuffers(journal, chunks);
      }, {
        onCommitted: (_j, n) => {
          committed += n;
          lastProgress = Date.now();
        },
      });
      const splitter = new RecordSplitter(framing);
      const keyed = mapping !== 'random';
      let key: Buffer | undefined;
      const progress = process.stderr.isTTY ? setInterval(() => process.stderr.write(`\rcommitted ${(committed / 1048576).toFixed(1)} MiB`), 500) : undefined;
      try {
        for await (const chunk of readingInput(records, flags.input)) {
          if (!keyed && framing === 'lines' && set.size === 1) {
            const run = splitter.pushBulk(chunk);
            if (run) service.push(set.names[0]!, run);
          } else {
            for (const rec of splitter.push(chunk)) {
              if (keyed && key === undefined) {
                key = keyOfRecord(rec, framing, Boolean(flags.base64));
                continue;
              }
              const journal = set.pick(mapping, key);
              if (keyed) this.log_.debug('mapped partition key to journal', { journal, key: key!.toString('utf8') });
              key = undefined;
              service.push(journal, rec);
            }
          }
          await service.backpressure();
        }
        if (splitter.pending > 0) {
          await service.flush().catch(() => {});
          throw new GazctlError(`input ends inside a record (${splitter.pending} bytes after the last ${framing === 'lines' ? 'newline' : 'complete frame'}); records before it were appended`);
        }
        await service.flush();
      } finally {
        if (progress) {
          clearInterval(progress);
          process.stderr.write(`\rcommitted ${(committed / 1048576).toFixed(1)} MiB\n`);
        }
      }
    } finally {
      clearInterval(watchdog);
      ac.abort();
      client.close();
    }
  }

  private async explainStall(client: ReturnType<typeof openJournalClient>, snapshot: ListResponse, seconds: number): Promise<void> {
    const stores = [...new Set(snapshot.journals.map((j) => j.spec?.fragment?.stores[0]).filter((s): s is string => Boolean(s)))];
    const problems: string[] = [];
    for (const store of stores.slice(0, 5)) {
      try {
        const r = await client.lib.fragmentStoreHealth(store, undefined, { timeoutMs: 5000 });
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

function journalSet(resp: ListResponse): JournalSet {
  // Appends resume suspended journals, so every matched journal is a candidate.
  return new JournalSet(resp.journals.map((j) => j.spec!.name));
}
