import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { GazctlCommand, journalsBaseFlags, UsageError } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { booleanOption, oclifFlags, optionalStringOption, options, stringOption, timeOption, type OptionSet } from '../../cli/options.js';
import { Mutex, Output } from '../../cli/output.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { JournalSpec_Suspend_Level, type Fragment } from '../../lib/protocol/gen/broker/protocol.js';
import type { JournalClient } from '../../lib/client/journal-client.js';
import { gzipInflatePath } from '../../lib/client/direct/gzip-object.js';
import { openCommandStore } from '../../cli/stores.js';

const OPTIONS = options({
  selector: selector(true),
  block: booleanOption({ char: 'b', description: 'At the write head, wait for new content instead of exiting.', ini: { field: 'Block' } }),
  tail: booleanOption({ description: 'Start journals without an --offsets entry at their write head instead of offset 0.', ini: { field: 'Tail' } }),
  output: stringOption({ char: 'o', default: '-', showDefault: true, description: 'File to write (created or truncated), or - for stdout.', ini: { field: 'Output' } }),
  offsets: optionalStringOption({ description: 'JSON file of {"journal": offset} to start from; must exist.', ini: { field: 'OffsetsPath' } }),
  'offsets-out': optionalStringOption({ description: 'Where to write the final offsets on exit (may equal --offsets).', ini: { field: 'OffsetsOutPath' } }),
  'file-root': optionalStringOption({ description: 'Local directory rooting file:// fragment stores, for direct reads with --broker.cache.size > 0.', ini: { field: 'FileRoot' } }),
  from: timeOption({ description: 'Skip persisted fragments modified before this time (unix seconds, RFC 3339, or a duration ago such as 24h).', ini: { field: 'FromUnix' } }),
  to: timeOption({
    description: 'Read only the persisted fragments modified at or before this time (and at or after --from), then stop: no unpersisted content.',
    ini: { field: 'ToUnix' },
  }),
});

export default class JournalsRead extends GazctlCommand {
  static override summary = 'Read the content of journals.';
  static override description = `Reads every journal matching the selector and writes its bytes to stdout or --output. Content from several journals is interleaved a fragment at a time, so whole appends are never split.

Without --block, each journal is read up to its current write head and the command exits. With --block it keeps waiting for new content until interrupted (Ctrl-C), picking up journals that start matching later.

Time window: --from skips persisted fragments modified before it. With --to as well, only the persisted fragments whose store modification time lies in [--from, --to] are read, journal by journal in offset order, and the read stops there (content not yet persisted is left out): "--from 24h --to 0s" reads what was persisted in the last day. Times are unix seconds, RFC 3339 times (2024-05-01T00:00:00Z) or durations ago (24h, 90m).

Offsets: --offsets loads a JSON object {"journal": offset} of where to start; --offsets-out writes the offsets reached on exit, so a cron job can resume exactly where it stopped. --tail starts journals without a recorded offset at their write head: "--tail --offsets-out f" without --block records the current heads.`;
  static override examples = [
    { description: 'Dump a journal', command: '<%= config.bin %> journals read -l name=acme/events > events.ndjson' },
    { description: 'Follow new appends', command: '<%= config.bin %> journals read -l app=billing --block --tail' },
    { description: 'What was persisted yesterday (UTC), then stop', command: '<%= config.bin %> journals read -l app=billing --from 2024-05-01T00:00:00Z --to 2024-05-01T23:59:59Z -o day.out' },
    { description: 'Incremental export that resumes where it stopped', command: '<%= config.bin %> journals read -l name:prefix=acme/ --offsets state.json --offsets-out state.json -o batch.out' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  /**
   * The time-window read: per journal (in listing order), the persisted fragments whose mod time
   * lies in [from, to] as the broker indexes them, read in offset order from the journal's start
   * offset, each gap-free run of them with a read that ends at the run's end.
   */
  private async readWindow(
    client: JournalClient,
    flags: { selector: import('../../lib/protocol/gen/broker/protocol.js').LabelSelector; from: number; to: number; 'file-root'?: string },
    offsets: Map<string, bigint>,
    out: Output,
    storeFor: (url: string) => import('../../lib/stores/index.js').FragmentStore,
    counted: (n: number) => void,
  ): Promise<void> {
    const ac = new AbortController();
    const onSignal = () => ac.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      const listing = await client.list(flags.selector, { signal: ac.signal }).catch((err: Error) => {
        throw new GazctlError(`cannot resolve the selector to journals: ${err.message}`, { cause: err });
      });
      const journals = listing.journals.filter((j) => j.spec?.suspend?.level !== JournalSpec_Suspend_Level.FULL).map((j) => j.spec!.name);
      if (journals.length === 0) this.log_.warn('no journals were matched by the selector');
      for (const journal of journals) {
        if (ac.signal.aborted) break;
        const listed = await client.listFragments(journal, { beginModTime: BigInt(flags.from), endModTime: BigInt(flags.to), signal: ac.signal });
        const fragments = listed.map((f) => f.spec!).filter((f) => f.mod_time !== 0n);
        const start = offsets.get(journal) ?? 0n;
        this.log_.info('read started', { journal, offset: start, fragments: fragments.length });
        let offset = start;
        for (const run of fragmentRuns(fragments)) {
          if (run.end <= offset || ac.signal.aborted) continue;
          const reader = client.read(
            { journal, offset: run.begin > offset ? run.begin : offset, end_offset: run.end, begin_mod_time: BigInt(flags.from) },
            { signal: ac.signal, fileRoot: flags['file-root'], openStore: storeFor, unreachableTimeoutMs: this.serviceOptions('broker').timeoutMs },
          );
          try {
            for await (const chunk of reader) {
              if (chunk.content.length === 0) continue;
              const n = chunk.content.length;
              // The chunk's buffer goes back to the read once it is written out.
              await out.write(chunk.content, chunk.release);
              counted(n);
            }
          } catch (err) {
            throw err instanceof GazctlError ? err : new GazctlError(`error reading ${journal}: ${(err as Error).message}`, { cause: err });
          }
          offset = reader.offset;
          offsets.set(journal, offset);
        }
        offsets.set(journal, offset);
        this.log_.info('read finished', { journal, offset });
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const { selector } = flags;
    const svc = this.serviceOptions('broker');
    const windowed = flags.to > 0;
    if (windowed && flags.block) throw new UsageError('--to reads a closed time window: it cannot be combined with --block');
    if (windowed && flags.tail) throw new UsageError('--to reads a closed time window: it cannot be combined with --tail');
    if (windowed && flags.from > flags.to) throw new UsageError(`--from (${flags.from}) is after --to (${flags.to})`);
    if (flags['file-root'] && svc.cacheSize <= 0) {
      this.log_.warn('--file-root has no effect without --broker.cache.size > 0 (brokers proxy all reads)');
    }
    // Which inflate a direct read of GZIP fragments uses: the native module, or zlib and why.
    if (svc.cacheSize > 0 && this.log_.enabled('debug')) this.log_.debug('direct reads inflate GZIP fragments', { with: gzipInflatePath() });

    const offsets = new Map<string, bigint>();
    if (flags.offsets) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(readFileSync(flags.offsets, 'utf8'));
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        throw new GazctlError(`cannot load --offsets ${flags.offsets}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        throw new GazctlError(`--offsets ${flags.offsets}: expected a JSON object of journal names to offsets`);
      }
      for (const [k, v] of Object.entries(parsed)) {
        if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
          throw new GazctlError(`--offsets ${flags.offsets}: offset of ${JSON.stringify(k)} must be a non-negative integer`);
        }
        offsets.set(k, BigInt(v));
      }
      if (flags['offsets-out'] && flags['offsets-out'] === flags.offsets) {
        // A crash must leave the path missing rather than stale.
        renameSync(flags.offsets, flags.offsets + '.previous');
      }
    }
    const out = new Output(flags.output);
    // Progress on a terminal when the content goes to a file.
    let bytesRead = 0;
    const progress =
      process.stderr.isTTY && flags.output !== '-'
        ? setInterval(() => process.stderr.write(`\rread ${(bytesRead / 1048576).toFixed(1)} MiB`), 500)
        : undefined;
    const client = this.journalClient(svc);
    // Fragments without a signed URL in an s3:// store are read through the S3 client.
    const storeFor = (url: string) => openCommandStore(url, flags['file-root']);
    if (windowed) {
      let failure: unknown;
      try {
        await this.readWindow(client, flags, offsets, out, storeFor, (n) => (bytesRead += n));
      } catch (err) {
        failure = err;
      } finally {
        client.close();
        if (progress) {
          clearInterval(progress);
          process.stderr.write(`\rread ${(bytesRead / 1048576).toFixed(1)} MiB\n`);
        }
        await out.close();
      }
      if (failure) throw failure;
      if (flags['offsets-out']) writeOffsets(flags['offsets-out'], offsets);
      return;
    }
    // A read retried during an outage (e.g. while its journal fails over to a new primary) says
    // once what it waits for, then stays quiet until it reads again.
    const waiting = new Set<string>();
    const ac = new AbortController();
    const onSignal = () => ac.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);

    const mutex = new Mutex();
    const running = new Map<string, { ac: AbortController; done: Promise<void> }>();
    const started = new Set<string>();
    let fatal: Error | undefined;
    let allDone!: () => void;
    const finished = new Promise<void>((r) => (allDone = r));
    let sawFirst = false;

    const startReader = (journal: string) => {
      started.add(journal);
      const start = offsets.get(journal) ?? (flags.tail ? -1n : 0n);
      const rac = new AbortController();
      const signal = AbortSignal.any([ac.signal, rac.signal]);
      this.log_.info('read started', { journal, offset: start });
      const reader = client.read(
        { journal, offset: start, block: flags.block, begin_mod_time: BigInt(flags.from) },
        {
          signal,
          fileRoot: flags['file-root'],
          openStore: storeFor,
          // --timeout bounds the time without any reachable broker (a killed broker or proxy),
          // not the read: a blocking read with brokers that answer waits for content for ever.
          unreachableTimeoutMs: svc.timeoutMs,
          onUnavailable: ({ journal: j, offset, writeHead }) =>
            this.log_.warn(
              `read of ${j} stops at offset ${offset}, below its write head ${writeHead}: the broker has no fragment there yet (content not yet persisted by the brokers that hold it, or removed from the store)`,
              { journal: j, offset, writeHead },
            ),
          onRetry: ({ journal: j, attempt, delayMs, error }) => {
            const fields = { journal: j, attempt, delayMs, err: (error as Error)?.message ?? String(error) };
            if (waiting.has(j)) return this.log_.debug('read failure (will retry)', fields);
            waiting.add(j);
            this.log_.warn(`read failure (will retry): reading ${j} is waiting for a broker to serve it`, fields);
          },
        },
      );
      const done = (async () => {
        let release: (() => void) | undefined;
        let fragmentEnd = -1n;
        try {
          for await (const chunk of reader) {
            if (chunk.fragment && release === undefined) {
              release = await mutex.lock();
              fragmentEnd = chunk.fragment.end;
            } else if (release === undefined && chunk.content.length > 0) {
              release = await mutex.lock();
              fragmentEnd = chunk.offset + BigInt(chunk.content.length);
            }
            if (chunk.content.length > 0) {
              waiting.delete(journal);
              const n = chunk.content.length;
              // The chunk's buffer goes back to the read once it is written out.
              await out.write(chunk.content, chunk.release);
              bytesRead += n;
            }
            offsets.set(journal, reader.offset);
            if (release && reader.offset >= fragmentEnd) {
              release();
              release = undefined;
            }
          }
        } catch (err) {
          if (!signal.aborted) {
            fatal ??= err instanceof GazctlError ? err : new GazctlError(`error reading ${journal}: ${(err as Error).message}`, { cause: err });
            ac.abort();
          }
        } finally {
          release?.();
          offsets.set(journal, reader.offset);
          this.log_.info('read finished', { journal, offset: reader.offset });
          running.delete(journal);
          if (running.size === 0 && sawFirst) allDone();
        }
      })();
      running.set(journal, { ac: rac, done });
    };

    const watching = (async () => {
      try {
        for await (const snapshot of client.watchJournals(selector, { signal: ac.signal })) {
          const names = new Set<string>();
          for (const j of snapshot.journals) {
            if (j.spec?.suspend?.level === JournalSpec_Suspend_Level.FULL) continue;
            names.add(j.spec!.name);
          }
          if (!sawFirst && names.size === 0) this.log_.warn('no journals were matched by the selector');
          for (const [name, r] of running) if (!names.has(name)) r.ac.abort();
          for (const name of names) {
            if (!running.has(name) && !started.has(name)) startReader(name);
          }
          sawFirst = true;
          if (running.size === 0) allDone();
        }
      } catch (err) {
        if (!ac.signal.aborted) {
          fatal ??= new GazctlError(`cannot resolve the selector to journals: ${(err as Error).message}`, { cause: err });
          ac.abort();
        }
      }
      allDone();
    })();

    ac.signal.addEventListener('abort', () => allDone());
    await finished;
    ac.abort();
    await Promise.allSettled([...running.values()].map((r) => r.done));
    await watching;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    client.close();
    if (progress) {
      clearInterval(progress);
      process.stderr.write(`\rread ${(bytesRead / 1048576).toFixed(1)} MiB\n`);
    }
    await out.close();
    if (fatal) throw fatal;
    if (flags['offsets-out']) writeOffsets(flags['offsets-out'], offsets);
  }
}

/** Offset ranges of gap-free runs of `fragments` (sorted by begin). */
export function fragmentRuns(fragments: Fragment[]): { begin: bigint; end: bigint }[] {
  const runs: { begin: bigint; end: bigint }[] = [];
  for (const f of [...fragments].sort((a, b) => (a.begin < b.begin ? -1 : a.begin > b.begin ? 1 : 0))) {
    const last = runs.at(-1);
    if (last && f.begin <= last.end) {
      if (f.end > last.end) last.end = f.end;
    } else runs.push({ begin: f.begin, end: f.end });
  }
  return runs;
}

function writeOffsets(path: string, offsets: Map<string, bigint>): void {
  const keys = [...offsets.keys()].sort();
  const body = '{' + keys.map((k) => `${JSON.stringify(k)}:${offsets.get(k)!.toString()}`).join(',') + '}\n';
  try {
    writeFileSync(path + '.temp', body);
    renameSync(path + '.temp', path);
  } catch (err) {
    throw new GazctlError(`cannot write --offsets-out ${path}: ${(err as Error).message}`);
  }
}
