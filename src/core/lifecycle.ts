// The start-up and exit habits a broker and a consumer daemon share: waiting out a failing etcd
// call instead of exiting, and the graceful exit on a signal (hand the items over, then exit 0;
// a second signal exits at once with 1).

import type { Logger } from './log.js';

/** Calls `fn` until it succeeds (backoff 250 ms doubling to 2 s), or until `stop` aborts. */
export async function retrying<T>(log: Logger, what: string, fn: () => Promise<T>, stop: AbortSignal): Promise<T> {
  let delay = 250;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (stop.aborted) throw e;
      if (attempt === 1 || attempt % 10 === 0) log.warn(`${what} failed; retrying`, { err: (e as Error).message, attempt });
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 2000);
    }
  }
}

export interface Shutdown {
  /** The process's exit code, once it is decided. */
  readonly exited: Promise<number>;
  /** A signal (or another request to exit) arrived: the first drains, a second exits at once. */
  signal(name: string): void;
  /** Ends the process with `code` now (start-up failed). */
  exit(code: number): void;
}

/** The graceful exit of a daemon holding `what` (journals, shards), which `drain` hands over. */
export function gracefulShutdown(log: Logger, what: string, drain: () => Promise<void>): Shutdown {
  let signals = 0;
  let exit!: (code: number) => void;
  const exited = new Promise<number>((r) => (exit = r));
  return {
    exited,
    exit,
    signal(name: string) {
      signals++;
      if (signals > 1) {
        log.warn('second signal; exiting now', { signal: name });
        exit(1);
        return;
      }
      log.info(`signalled; handing off ${what} before exiting`, { signal: name });
      void drain().then(
        () => exit(0),
        (e: unknown) => {
          log.error('exit hand-off failed', { err: (e as Error).message });
          exit(1);
        },
      );
    },
  };
}
