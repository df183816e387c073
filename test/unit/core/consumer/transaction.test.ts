// The transaction loop's batching (issue #29 follow-up, docs/consumer.md "Keeping up"): records
// that arrive while a commit is in flight are consumed meanwhile and committed together by the
// next transaction, so a shard's commits per second are bounded by its store's commit latency,
// not by how often its sources are appended to. The loop runs here against stubs: a source
// whose chunks the test pushes, a store whose commits resolve when the test says so. Nothing is
// timed: the test waits for conditions (messages consumed, commits started), never for a clock.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JournalClient } from '../../../../src/lib/client/journal-client.js';
import type { Publisher } from '../../../../src/lib/client/publisher.js';
import type { ReadChunk } from '../../../../src/lib/client/reader.js';
import { JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import type { Checkpoint } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import type { Application, MessageDecoder, Shard, Store } from '../../../../src/core/consumer/app.js';
import { emptyCheckpoint } from '../../../../src/core/consumer/store.js';
import { Progress, runTransactions } from '../../../../src/core/consumer/transaction.js';

const SOURCE = 'keepup/input/part-000';

/** A source journal whose content the test appends; reads block until there is some. */
class StubSource {
  private chunks: ReadChunk[] = [];
  private head = 0n;
  private wake: (() => void) | undefined;

  /** Appends `n` newline-framed records as one chunk (one append). */
  append(n: number, tag: string): void {
    const lines = Array.from({ length: n }, (_, i) => `${tag}-${i}\n`).join('');
    const content = Buffer.from(lines);
    this.chunks.push({ offset: this.head, content });
    this.head += BigInt(content.length);
    this.wake?.();
  }

  get writeHead(): bigint {
    return this.head;
  }

  client(): JournalClient {
    const self = this;
    return {
      read(req: { journal: string; offset?: bigint }, opts: { signal?: AbortSignal } = {}) {
        assert.equal(req.journal, SOURCE);
        return (async function* () {
          let next = 0;
          while (!opts.signal?.aborted) {
            if (next < self.chunks.length) {
              yield self.chunks[next++]!;
              continue;
            }
            await new Promise<void>((resolve) => {
              self.wake = resolve;
              opts.signal?.addEventListener('abort', () => resolve(), { once: true });
            });
          }
        })();
      },
    } as unknown as JournalClient;
  }
}

/** A store whose every commit waits until the test resolves it. */
class HeldStore implements Store {
  readonly commits: Array<{ checkpoint: Checkpoint; messages: number; resolve: () => void }> = [];
  consumed = 0;
  private consumedAtLastCommit = 0;
  private onCommit: (() => void) | undefined;

  async restoreCheckpoint(): Promise<Checkpoint> {
    return emptyCheckpoint();
  }

  startCommit(_shard: unknown, checkpoint: Checkpoint): Promise<void> {
    const messages = this.consumed - this.consumedAtLastCommit;
    this.consumedAtLastCommit = this.consumed;
    return new Promise<void>((resolve) => {
      this.commits.push({ checkpoint, messages, resolve });
      this.onCommit?.();
    });
  }

  destroy(): void {}

  /** Resolves once `n` commits have started. */
  async commitsStarted(n: number): Promise<void> {
    while (this.commits.length < n) await new Promise<void>((resolve) => (this.onCommit = resolve));
  }
}

const decoder: MessageDecoder<string> = {
  framing: 'lines',
  decode: (rec) => rec.toString('utf8').trimEnd(),
  uuid: () => new Uint8Array(16),
};

/** Yields to the event loop until `cond` holds (each round lets reads and the loop run). */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 100_000) assert.fail(`never happened: ${what}`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

function start(source: StubSource, store: HeldStore, signal: AbortSignal, completed: Array<[number, number]> = []): Promise<void> {
  const app: Application<HeldStore, string> = {
    newStore: () => store,
    newMessage: () => decoder,
    consume: (_shard, s) => {
      s.consumed++;
    },
    finalizeTxn: () => undefined,
  };
  const publisher = {
    pending: () => [],
    buildAckIntents: () => [],
    writeAckIntents: async () => new Map<string, bigint>(),
  } as unknown as Publisher;
  return runTransactions({
    shard: { id: 'keepup-000' } as Shard,
    app: app as unknown as Application,
    store,
    journals: source.client(),
    sources: [{ journal: SOURCE, min_offset: 0n }],
    checkpoint: emptyCheckpoint(),
    minTxnMs: 0,
    // Long enough never to end a transaction here: the commit resolving is what ends it.
    maxTxnMs: 3_600_000,
    progress: new Progress(),
    publisher,
    journalSpec: async (name) => JournalSpec.fromPartial({ name }),
    completed: (messages, bytes) => completed.push([messages, bytes]),
    signal,
    log: { warn: () => undefined, debug: () => undefined },
  });
}

describe('consumer transactions: batching while a commit is in flight', () => {
  it('takes every record queued during a commit into the next transaction, committed once the previous one resolved', async () => {
    const source = new StubSource();
    const store = new HeldStore();
    const stop = new AbortController();
    const completed: Array<[number, number]> = [];
    const running = start(source, store, stop.signal, completed);
    try {
      // One append of 5 records: the first transaction commits it, and its commit is held.
      source.append(5, 'a');
      await store.commitsStarted(1);
      assert.equal(store.commits[0]!.messages, 5);

      // Ten more appends of 5 records each while that commit is in flight: all are consumed
      // meanwhile, and no second commit starts before the first resolved.
      for (let i = 0; i < 10; i++) source.append(5, `b${i}`);
      await until(() => store.consumed === 55, 'the 50 records appended during the commit consumed');
      assert.equal(store.commits.length, 1, 'a second commit started while the first was in flight');

      // The first commit resolves: the next transaction commits the 50 records together.
      store.commits[0]!.resolve();
      await store.commitsStarted(2);
      assert.equal(store.commits[1]!.messages, 50, 'records per transaction after a commit in flight');
      assert.equal(store.commits[1]!.checkpoint.sources[SOURCE]?.read_through, source.writeHead);
      // Completed transactions are reported (the gazette_shard_* counters): messages and bytes.
      store.commits[1]!.resolve();
      await until(() => completed.length === 2, 'both transactions reported completed');
      assert.deepEqual(completed, [
        [5, 5 * 'a-0\n'.length],
        [50, Number(source.writeHead) - 5 * 'a-0\n'.length],
      ]);
    } finally {
      stop.abort();
      for (const c of store.commits) c.resolve(); // a failed assertion must not leave the loop waiting
      await running;
    }
  });

  it('a backlog read chunk by chunk: held commits leave at most two transactions for it', async () => {
    const source = new StubSource();
    const store = new HeldStore();
    for (let i = 0; i < 20; i++) source.append(5, `c${i}`);
    const stop = new AbortController();
    const running = start(source, store, stop.signal);
    try {
      // The first transaction commits once the queue is momentarily empty (the reader hands
      // chunks over one at a time); the rest is read and consumed while that commit is held.
      await store.commitsStarted(1);
      await until(() => store.consumed === 100, 'the backlog consumed');
      assert.equal(store.commits.length, 1);
      store.commits[0]!.resolve();
      await store.commitsStarted(2);
      assert.equal(store.commits[0]!.messages + store.commits[1]!.messages, 100);
      assert.equal(store.commits[1]!.checkpoint.sources[SOURCE]?.read_through, source.writeHead);
    } finally {
      stop.abort();
      for (const c of store.commits) c.resolve(); // a failed assertion must not leave the loop waiting
      await running;
    }
  });
});
