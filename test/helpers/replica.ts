// A test host for our consumer's replicas: no consumer process and no allocator; the test writes
// the assignment keys itself and hands them to the replica, and status writes are guarded on the
// assignment's mod revision as the process's are.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';

import type { JournalClient } from '../../src/lib/index.js';
import type { Keyspace } from '../../src/lib/keyspace/index.js';
import { ReplicaStatus_Code, type ReplicaStatus, type ShardSpec } from '../../src/lib/protocol/gen/consumer/protocol.js';
import { journalLogSource, playLog, emptyHints } from '../../src/lib/recoverylog/index.js';
import type { FSMHints } from '../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { Replica, type ReplicaHost, type ReplicaLogger } from '../../src/core/consumer/replica.js';
import type { Application } from '../../src/core/consumer/app.js';
import { sumApp } from '../../src/core/consumer/sum-app.js';
import { pollUntil, readJsonFileState, type SumAppLayout } from '../../src/testing/index.js';
import type { SumLoad } from './shards.js';

export const PREFIX = '/test/replica';

export function testLogger(name: string, lines: string[]): ReplicaLogger {
  const out = (level: string) => (msg: string, f?: Record<string, unknown>) => {
    lines.push(`${name} ${level} ${msg} ${JSON.stringify(f ?? {}, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))}`);
  };
  return { debug: () => undefined, info: out('info'), warn: out('warn'), error: out('error') };
}

/** A member of the test: a host and the assignment key it holds for the shard. */
export class TestMember {
  readonly statuses: ReplicaStatus_Code[] = [];
  readonly logLines: string[] = [];
  replica: Replica | undefined;
  key = '';
  slot = 0;
  modRevision = 0n;
  createRevision = 0n;

  constructor(
    readonly name: string,
    private readonly ks: Keyspace,
    private readonly journals: JournalClient,
    private readonly spec: ShardSpec,
    private readonly app: Application = sumApp as unknown as Application,
  ) {}

  host(): ReplicaHost {
    return {
      ks: this.ks,
      journals: this.journals,
      app: this.app,
      log: testLogger(this.name, this.logLines),
      memberSpec: { process_spec: undefined, shard_limit: 0, exiting: false },
      etcdPrefix: PREFIX,
      setStatus: (_shard: string, status: ReplicaStatus, _assignment: { key: string; createRevision: bigint }) => this.setStatus(status),
    };
  }

  private async setStatus(status: ReplicaStatus): Promise<void> {
    const r = await this.ks.txn({
      compare: [{ key: this.key, target: 'modRevision', value: this.modRevision }],
      success: [{ put: this.key, value: JSON.stringify(status) }],
    });
    if (!r.succeeded) throw new Error(`assignment ${this.key} changed`);
    this.modRevision = r.revision;
    this.statuses.push(status.code);
    this.notify();
  }

  /** Creates (or moves) this member's assignment to `slot` and tells the replica. */
  async assign(slot: number): Promise<void> {
    if (this.key) await this.ks.delete(this.key);
    this.slot = slot;
    this.key = `${PREFIX}/assign/${this.spec.id}#local#${this.name}#${slot}`;
    this.modRevision = await this.ks.put(this.key, '');
    this.createRevision = this.modRevision;
    this.replica ??= new Replica(this.host(), this.spec.id, { hintsIntervalMs: 300 });
    this.notify();
  }

  private notify(): void {
    this.replica!.update({
      spec: this.spec,
      specRevision: 1n,
      assignmentKey: this.key,
      slot: this.slot,
      assignmentRevision: this.modRevision,
      assignmentCreateRevision: this.createRevision,
      route: { members: [], primary: -1, endpoints: [] },
    });
  }

  async waitFor(code: ReplicaStatus_Code, timeoutMs = 60_000): Promise<void> {
    await pollUntil(
      `${this.name} to be ${ReplicaStatus_Code[code]}`,
      async () => {
        const st = this.replica?.status();
        if (st?.code === ReplicaStatus_Code.FAILED) throw new Error(`${this.name} FAILED: ${st.errors.join('; ')}\n${this.logLines.join('\n')}`);
        return st?.code === code ? true : undefined;
      },
      { timeoutMs, intervalMs: 100, describe: () => this.logLines.slice(-20).join('\n') },
    );
  }

  async close(): Promise<void> {
    await this.replica?.close();
    if (this.key) await this.ks.delete(this.key);
  }
}


/** Plays a shard's log (from `hints`, default the whole log) with our player: totals and offsets must be exact. */
export async function checkLog(journals: JournalClient, tempDir: string, layout: SumAppLayout, load: SumLoad, round: string, hints?: FSMHints): Promise<void> {
  const shard = layout.shards[0]!;
  const dir = await mkdtemp(join(tempDir, `play-${round}-`));
  // A broker restarted moments ago may be in the log's route without its content, which it then
  // cannot serve until the content is persisted: play again until a read gets all of it.
  await pollUntil(
    `playback of ${shard.recoveryLog} (${round})`,
    async () => {
      try {
        await playLog(journalLogSource(journals, { head: 'write-head' }), hints ?? emptyHints(shard.recoveryLog), dir, { clearDir: true });
        return true;
      } catch (err) {
        if (/content ends at offset \d+, before the head/.test((err as Error).message)) return undefined;
        throw err;
      }
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const st = await readJsonFileState(dir);
  assert.deepEqual(st.state, load.expected.get(shard.id), `totals (${round})`);
  for (const j of shard.sources) assert.equal(BigInt(st.offsets[j]!), load.heads.get(j), `read-through of ${j} (${round})`);
}

/** Waits until `m`'s replica has read through the last appended heads. */
export async function waitReadThrough(m: TestMember, layout: SumAppLayout, load: SumLoad, timeoutMs = 60_000): Promise<void> {
  const want = new Map(layout.shards[0]!.sources.map((j) => [j, load.heads.get(j)!]));
  await m.replica!.waitForReadThrough(want, AbortSignal.timeout(timeoutMs));
}

void ReplicaStatus_Code;
