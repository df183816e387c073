// Small concurrency helpers of the whole library: bounded parallelism for work over many journals
// or fragments, and the one abortable sleep that retry loops (clients, keyspace watches and
// leases, the broker's persister) wait with.

/** The error an aborted operation rejects with (the signal's reason when it is an Error). */
export function abortError(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  const e = new Error('the operation was aborted');
  e.name = 'AbortError';
  return e;
}

/**
 * Sleeps `ms`. When `signal` aborts, first or meanwhile, it rejects at once with
 * {@link abortError}, so that a loop waiting between attempts ends where it waits; a loop that
 * would rather stop quietly checks `signal.aborted` after catching.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError(signal));
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `fn` over `items`, at most `limit` at a time; results in input order. The first failure rejects. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}
