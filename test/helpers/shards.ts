// Shared pieces of the `shards` end-to-end suites (test/integration/shards-*.test.ts,
// test/interop/shards-parity.test.ts): a load of NDJSON records appended to a sum app's sources
// with the totals each shard must end up with, waiting until shards have processed it, running
// our gazctl's shards commands against a consumer group, playing every shard's recovery log back
// with `shards recover` and comparing state.json with the input, and reading hints straight from
// etcd (independently of src/lib's hints code).

import assert from 'node:assert/strict';
import { mkdtemp, readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';

import { JournalClient, ShardClient, appendOnce } from '../../src/lib/index.js';
import {
  getKey,
  readJsonFileState,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { describeResult, runGazctl, type GazctlResult, type RunGazctlOptions } from './cli.js';
import { lcg } from './random.js';

// ---- our gazctl against a consumer group ----------------------------------------------------

/** Environment pointing our gazctl at `group` (consumer) and `cluster` (broker). */
export function shardsEnv(cluster: Cluster, group: ConsumerGroup): Record<string, string> {
  return { BROKER_ADDRESS: cluster.brokerAddress, CONSUMER_ADDRESS: group.address };
}

/** Runs our gazctl with CONSUMER_ADDRESS and BROKER_ADDRESS set (`opts.env` on top). */
export function gzs(cluster: Cluster, group: ConsumerGroup, args: string[], opts: RunGazctlOptions = {}): Promise<GazctlResult> {
  return runGazctl(args, { timeoutMs: 60_000, ...opts, env: { ...shardsEnv(cluster, group), ...(opts.env ?? {}) } });
}

/** Like {@link gzs}, asserting exit code 0. */
export async function gzsOk(cluster: Cluster, group: ConsumerGroup, args: string[], opts: RunGazctlOptions = {}): Promise<GazctlResult> {
  const r = await gzs(cluster, group, args, opts);
  assert.equal(r.code, 0, describeResult(args, r));
  return r;
}

// ---- load -------------------------------------------------------------------------------------

const KEYS = ['apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape'];

/**
 * Records appended to a sum app's sources, with the totals per key each shard must hold once it
 * has read through them. Every append is one atomic append (appendOnce, retried only when it
 * cannot have committed); an append that fails anyway is kept in `errors`, since its records may
 * or may not be in the journal: a test asserts `errors` is empty before comparing totals.
 */
export class SumLoad {
  readonly expected = new Map<string, Record<string, number>>();
  /** Write head of each source after our last append. */
  readonly heads = new Map<string, bigint>();
  readonly errors: string[] = [];
  records = 0;
  appends = 0;
  private readonly next: () => number;
  private loop: Promise<void> | undefined;
  private stopping = false;

  constructor(
    private readonly journals: JournalClient,
    readonly layout: SumAppLayout,
    seed = 20261204,
  ) {
    this.next = lcg(seed);
    for (const s of layout.shards) this.expected.set(s.id, {});
  }

  /** One append of `count` records to `journal` (a source of shard `shardId`). */
  async appendTo(shardId: string, journal: string, count: number): Promise<void> {
    const sums = this.expected.get(shardId)!;
    const pending: Record<string, number> = {};
    const lines: string[] = [];
    for (let i = 0; i < count; i++) {
      const key = KEYS[this.next() % KEYS.length]!;
      const value = (this.next() % 2001) - 1000;
      pending[key] = (pending[key] ?? 0) + value;
      lines.push(JSON.stringify({ key, value }));
    }
    try {
      const res = await appendOnce(this.journals, journal, [Buffer.from(lines.join('\n') + '\n')], { timeoutMs: 30_000 });
      for (const [k, v] of Object.entries(pending)) sums[k] = (sums[k] ?? 0) + v;
      const end = res.commit!.end;
      if ((this.heads.get(journal) ?? -1n) < end) this.heads.set(journal, end);
      this.records += count;
      this.appends++;
    } catch (e) {
      this.errors.push(`append to ${journal}: ${(e as Error).message}`);
    }
  }

  /** `perSource` records to every source of every shard, all shards at once. */
  async round(perSource: number): Promise<void> {
    await Promise.all(this.layout.shards.map(async (s) => {
      for (const j of s.sources) await this.appendTo(s.id, j, perSource);
    }));
  }

  /** Start appending rounds of `perSource` records every `intervalMs` until {@link stop}. */
  start(perSource = 5, intervalMs = 200): void {
    assert.equal(this.loop, undefined, 'load already running');
    this.stopping = false;
    this.loop = (async () => {
      while (!this.stopping) {
        const t = Date.now();
        await this.round(perSource);
        const wait = intervalMs - (Date.now() - t);
        if (wait > 0 && !this.stopping) await new Promise((r) => setTimeout(r, wait));
      }
    })();
  }

  /** Stop the loop and wait for its last round. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
    this.loop = undefined;
  }

  /** Wait until every shard has read through the last heads of its sources. */
  async waitProcessed(consumerAddress: string, timeoutMs = 60_000): Promise<void> {
    const shards = new ShardClient({ address: consumerAddress });
    try {
      await Promise.all(
        this.layout.shards.map((s) => {
          const readThrough = Object.fromEntries(s.sources.filter((j) => this.heads.has(j)).map((j) => [j, this.heads.get(j)!]));
          return shards.stat(s.id, { readThrough, timeoutMs });
        }),
      );
    } finally {
      shards.close();
    }
  }
}

/**
 * `shards recover` (ours) of every shard of `load.layout` into a fresh directory each; state.json's
 * totals must equal the input's exactly and its read-through offsets the last heads.
 */
export async function recoverAllAndCheck(cluster: Cluster, group: ConsumerGroup, load: SumLoad, round: string): Promise<void> {
  assert.deepEqual(load.errors, [], 'appends that failed (their records may or may not be in)');
  for (const s of load.layout.shards) {
    const dir = await mkdtemp(join(cluster.tempDir, `recover-${round}-${s.id}-`));
    const args = ['shards', 'recover', '--id', s.id, '--dir', dir, '--force'];
    await gzsOk(cluster, group, args, { timeoutMs: 60_000 });
    const st = await readJsonFileState(dir);
    assert.deepEqual(st.state, load.expected.get(s.id), `totals of ${s.id} (${round})`);
    for (const j of s.sources) {
      if (load.heads.has(j)) assert.equal(BigInt(st.offsets[j]!), load.heads.get(j), `read-through offset of ${j} in ${s.id}'s state.json (${round})`);
    }
  }
}

// ---- hints, straight from etcd ----------------------------------------------------------------

/** Live nodes of FSMHints JSON as the consumer stores it (Go's encoding/json; `live_nodes` null when none). */
export interface RawHints {
  log?: string;
  live_nodes: { fnode: number; segments: unknown[] }[] | null;
}

/** The hints stored under `key`, parsed, or undefined when the key is absent. */
export async function hintsAt(cluster: Cluster, key: string): Promise<RawHints | undefined> {
  const kv = await getKey(cluster.etcd.endpoint, key);
  if (!kv) return undefined;
  return JSON.parse(Buffer.from(kv.value).toString('utf8')) as RawHints;
}

/** Whether hints are present and name at least one live file. */
export function hasLiveNodes(h: RawHints | undefined): boolean {
  return h !== undefined && Array.isArray(h.live_nodes) && h.live_nodes.length > 0;
}

// ---- file:// store contents -------------------------------------------------------------------

/** Every file under `root`, as paths relative to it. */
export async function filesUnder(root: string): Promise<Set<string>> {
  const out = new Set<string>();
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else if ((await stat(p)).isFile()) out.add(relative(root, p));
    }
  };
  await walk(root);
  return out;
}
