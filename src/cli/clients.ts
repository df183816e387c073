// Builds the library clients from resolved CLI options, applying the CLI's --timeout to the
// calls that would otherwise wait for an unreachable service forever.
import { JournalClient } from '../lib/client/journal-client.js';
import { appendOnce, isRetryableQueuedAppendError } from '../lib/client/appender.js';
import type { Logger } from './log.js';
import type { ReaderOptions } from '../lib/client/reader.js';
import type { ApplyOptions } from '../lib/client/apply.js';
import type { ApplyRequest_Change, LabelSelector, ListResponse, ReadRequest } from '../lib/protocol/gen/broker/protocol.js';
import type { ServiceOptions } from './base.js';

export interface CliJournalClient {
  readonly lib: JournalClient;
  list(selector: LabelSelector): Promise<ListResponse>;
  /** Snapshots of the selected journals; the first one is bounded by --timeout. */
  watch(selector: LabelSelector, opts: { signal: AbortSignal }): AsyncGenerator<ListResponse, void, undefined>;
  apply(changes: ApplyRequest_Change[], opts?: ApplyOptions): ReturnType<JournalClient['apply']>;
  listFragments(journal: string, opts: Parameters<JournalClient['listFragments']>[1]): ReturnType<JournalClient['listFragments']>;
  read(req: Partial<ReadRequest> & { journal: string }, opts?: ReaderOptions): ReturnType<JournalClient['read']>;
  append(journal: string): ReturnType<JournalClient['append']>;
  /** Appends the buffers atomically, retrying transient failures. */
  appendBuffers(journal: string, data: Uint8Array[]): Promise<void>;
  close(): void;
}

export function openJournalClient(o: ServiceOptions & { log?: Logger }): CliJournalClient {
  const lib = new JournalClient({
    address: o.address,
    certFile: o.certFile,
    certKeyFile: o.certKeyFile,
    trustedCAFile: o.trustedCAFile,
    authKeys: o.authKeys,
    authToken: o.authToken,
    zone: o.zone,
    cacheSize: o.cacheSize,
    cacheTTLms: o.cacheTTLms,
  }, {
    // Like upstream, RPCs that wait for a service retry quietly; --log.level=debug shows them.
    onRetry: ({ op, attempt, delayMs, error }) =>
      o.log?.debug(`${op} failed (will retry)`, { attempt, delayMs, err: (error as Error)?.message ?? String(error) }),
  });
  const timeoutMs = o.timeoutMs > 0 ? o.timeoutMs : undefined;
  return {
    lib,
    list: (selector) => lib.list(selector, { timeoutMs }),
    async *watch(selector, opts) {
      // Fail fast (within --timeout) when the service is unreachable, then stream snapshots.
      await lib.list(selector, { timeoutMs, signal: opts.signal });
      yield* lib.watch(selector, opts);
    },
    apply: (changes, opts) => lib.apply(changes, { ...opts, timeoutMs }),
    listFragments: (journal, opts) => lib.listFragments(journal, { ...opts, timeoutMs }),
    read: (req, opts) =>
      lib.read(req, {
        onRetry: ({ journal, attempt, delayMs, error }) =>
          o.log?.warn('read failure (will retry)', { journal, attempt, delayMs, err: (error as Error)?.message ?? String(error) }),
        ...opts,
      }),
    append: (journal) => lib.append(journal),
    appendBuffers: async (journal, data) => {
      await appendOnce(lib, journal, data, {
        retryable: isRetryableQueuedAppendError,
        onRetry: (err, attempt, ms) =>
          o.log?.warn('append failed; retrying', { journal, attempt: attempt + 1, delayMs: ms, err: (err as Error).message }),
      });
    },
    close: () => lib.close(),
  };
}
