// What the consumer acceptance tests share: NDJSON input for the sum app with its expected totals,
// waiting until shards have read through it (Stat with read_through), and the check that
// `gazctl shards recover` of every shard (Go gazctl) gives a state.json with exactly those totals
// and offsets: nothing lost, nothing applied twice.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';

import { JournalClient, ShardClient, appendOnce } from '../../src/lib/index.js';
import { readJsonFileState, runGoGazctlShards, type Cluster, type ConsumerGroup, type SumAppLayout } from '../../src/testing/index.js';

const KEYS = ['apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape'];

export class SumsInput {
  private x: number;
  /** Expected totals per shard, per key. */
  readonly expected = new Map<string, Record<string, number>>();
  /** Write head of each source after our last append. */
  readonly heads = new Map<string, bigint>();
  readonly journals: JournalClient;
  records = 0;

  constructor(
    readonly cluster: Cluster,
    readonly layout: SumAppLayout,
    seed: number,
  ) {
    this.x = seed >>> 0;
    this.journals = new JournalClient({ address: cluster.brokerAddress });
    for (const s of layout.shards) this.expected.set(s.id, {});
  }

  /** Deterministic pseudo-random integers (a 32-bit LCG), so a failure can be replayed. */
  private next(): number {
    this.x = (Math.imul(this.x, 1664525) + 1013904223) >>> 0;
    return this.x;
  }

  /** Appends `perSource` records to every source (one atomic append each), noting the totals. */
  async round(perSource: number): Promise<void> {
    await Promise.all(
      this.layout.shards.map(async (s) => {
        const sums = this.expected.get(s.id)!;
        for (const journal of s.sources) {
          const lines: string[] = [];
          const add: Array<[string, number]> = [];
          for (let i = 0; i < perSource; i++) {
            const key = KEYS[this.next() % KEYS.length]!;
            const value = (this.next() % 2001) - 1000;
            add.push([key, value]);
            lines.push(JSON.stringify({ key, value }));
          }
          const res = await appendOnce(this.journals, journal, [Buffer.from(lines.join('\n') + '\n')], { timeoutMs: 60_000 });
          // Counted once the append committed: a failed append is not in the journal.
          for (const [k, v] of add) sums[k] = (sums[k] ?? 0) + v;
          this.records += perSource;
          this.heads.set(journal, res.commit!.end);
        }
      }),
    );
  }

  /** Waits until every shard has read through the heads of its sources (Stat with read_through). */
  async waitProcessed(group: ConsumerGroup, timeoutMs = 60_000): Promise<void> {
    const shards = new ShardClient({ address: group.address });
    try {
      await Promise.all(
        this.layout.shards.map((s) =>
          shards.stat(s.id, { readThrough: Object.fromEntries(s.sources.map((j) => [j, this.heads.get(j) ?? 0n])), timeoutMs }),
        ),
      );
    } finally {
      shards.close();
    }
  }

  /** Go gazctl `shards recover` of every shard; its state.json must hold the exact totals and offsets. */
  async recoverAndCheck(group: ConsumerGroup, round: string): Promise<void> {
    for (const s of this.layout.shards) {
      const dir = await mkdtemp(join(this.cluster.tempDir, `recover-${round}-${s.id}-`));
      const r = await runGoGazctlShards(['shards', 'recover', '--id', s.id, '--dir', dir], {
        consumerAddress: group.address,
        brokerAddress: this.cluster.brokerAddress,
        timeoutMs: 60_000,
      });
      assert.equal(r.code, 0, `shards recover ${s.id} (${round}): exit ${r.code}${r.timedOut ? ' (timed out)' : ''}\n${r.stderr}`);
      const st = await readJsonFileState(dir);
      const want = Object.fromEntries(Object.entries(this.expected.get(s.id)!).filter(() => true));
      // The sum app counts ACK records too (an empty key); plain NDJSON input has none.
      assert.deepEqual(st.state, want, `totals of ${s.id} (${round})`);
      for (const j of s.sources) assert.equal(BigInt(st.offsets[j] ?? 0), this.heads.get(j) ?? 0n, `read-through offset of ${j} (${round})`);
    }
  }

  close(): void {
    this.journals.close();
  }
}
