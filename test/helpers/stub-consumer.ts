// A scripted consumer for in-process tests of the shards commands: a Shard stub
// (src/testing/stubs.ts) that lists a set of shards (filtered by the request's selector, the `id`
// meta-label included, as consumers do), answers Stat with each shard's read-through offsets,
// GetHints from a table, and Apply (OK by default), recording each Apply request.
//
// Shards are given either whole (`stubShard(stubShardSpec(...))`, for listing and apply tests) or
// as short descriptors (`StubShard`, for the recovery-log commands, which care about hints):
// `fromStubShards` turns descriptors into a listing and a hints table.
import {
  ApplyResponse,
  GetHintsResponse,
  ListResponse,
  StatResponse,
  Status,
  type ApplyRequest,
  type ListResponse_Shard,
  type ReplicaStatus,
  type ShardSpec,
} from '../../src/lib/protocol/gen/consumer/protocol.js';
import type { FSMHints } from '../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { selectorMatchesShard } from '../../src/lib/protocol/selector.js';
import { nanosToDuration } from '../../src/lib/protocol/duration.js';
import { normalizeShardSpec } from '../../src/lib/shardspace/shardspace.js';
import { startShardStub, stubHeader, type StubServer } from '../../src/testing/stubs.js';

/** What GetHints answers for one shard. */
export interface StubHints {
  primary?: FSMHints;
  /** One entry per backup slot; undefined where none is stored. */
  backups?: (FSMHints | undefined)[];
  /** GetHints answers this status instead of OK. */
  status?: Status;
}

export interface StubConsumer extends StubServer {
  /** The shards listed; tests may replace them between runs. */
  shards: ListResponse_Shard[];
  /** Read-through offsets per shard id, for Stat (SHARD_NOT_FOUND when absent). */
  readThrough: Map<string, Record<string, bigint>>;
  /** GetHints answers per shard id (SHARD_NOT_FOUND when absent). */
  hints: Map<string, StubHints>;
  /** Apply requests received, in order. */
  applied: ApplyRequest[];
  /** List requests answered since the stub started or the count was last reset. */
  lists: number;
  /** Decides each Apply's answer (the default is OK at revision 200 + its index). */
  answer?: (req: ApplyRequest, index: number) => ApplyResponse;
  /** Called at each List with the updated `lists`, before it is answered. */
  onList?: (n: number) => void;
}

/** A full, valid ShardSpec with `extra` over it. */
export function stubShardSpec(id: string, extra: Partial<ShardSpec> = {}): ShardSpec {
  return normalizeShardSpec({
    id,
    sources: [{ journal: 'in/a', min_offset: 0n }],
    max_txn_duration: nanosToDuration(1_000_000_000n),
    hot_standbys: 1,
    labels: { labels: [{ name: 'app', value: 'word-count', prefix: false }] },
    ...extra,
  });
}

/** A listed shard: `members` as [suffix, status] pairs, the first one primary. */
export function stubShard(spec: ShardSpec, revision: bigint, members: [string, ReplicaStatus][] = []): ListResponse_Shard {
  return {
    spec,
    mod_revision: revision,
    route: { members: members.map(([suffix]) => ({ zone: 'local', suffix })), primary: members.length ? 0 : -1, endpoints: [] },
    status: members.map(([, s]) => s),
    create_revision: revision,
  };
}

/** A shard described by what the recovery-log commands look at. */
export interface StubShard {
  id: string;
  primary?: FSMHints;
  /** One entry per backup slot; undefined where none is stored. */
  backups?: (FSMHints | undefined)[];
  labels?: Record<string, string>;
  /** '' for a shard without a recovery log; default `recovery`. */
  recoveryLogPrefix?: string;
  /** GetHints answers this status instead. */
  hintsStatus?: Status;
}

/** The listing and hints table of shards given as descriptors (hint prefix /hints, no sources). */
export function fromStubShards(list: StubShard[]): { shards: ListResponse_Shard[]; hints: Map<string, StubHints> } {
  const shards = list.map((s) => {
    const labels = Object.entries(s.labels ?? {})
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, value]) => ({ name, value, prefix: false }));
    const spec = normalizeShardSpec({
      id: s.id,
      recovery_log_prefix: s.recoveryLogPrefix ?? 'recovery',
      hint_prefix: '/hints',
      hint_backups: s.backups?.length ?? 0,
      max_txn_duration: nanosToDuration(1_000_000_000n),
      labels: { labels },
    });
    return { ...stubShard(spec, 10n), create_revision: 1n };
  });
  const hints = new Map(list.map((s) => [s.id, { primary: s.primary, backups: s.backups, status: s.hintsStatus }] as const));
  return { shards, hints };
}

export async function startStubConsumer(shards: ListResponse_Shard[], hints: Map<string, StubHints> = new Map()): Promise<StubConsumer> {
  const state: Partial<StubConsumer> = { shards, hints, readThrough: new Map(), applied: [], lists: 0 };
  const stub = await startShardStub({
    list: (call, cb) => {
      // Counted whether or not onList is set: a test counts the lists of its own run.
      const n = ++state.lists!;
      state.onList?.(n);
      const matched = state.shards!.filter((s) => selectorMatchesShard(call.request.selector, s.spec!));
      cb(null, ListResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 100n + BigInt(n) }), shards: matched }));
    },
    stat: (call, cb) => {
      const rt = state.readThrough!.get(call.request.shard);
      if (!rt) return cb(null, StatResponse.fromPartial({ status: Status.SHARD_NOT_FOUND, header: stubHeader() }));
      cb(null, StatResponse.fromPartial({ status: Status.OK, header: stubHeader(), read_through: rt }));
    },
    getHints: (call, cb) => {
      const h = state.hints!.get(call.request.shard);
      if (h === undefined) return cb(null, GetHintsResponse.fromPartial({ status: Status.SHARD_NOT_FOUND, header: stubHeader() }));
      const res = GetHintsResponse.fromPartial({ status: h.status ?? Status.OK, header: stubHeader() });
      // fromPartial would fill absent hints in; set them as given.
      res.primary_hints = { hints: h.primary };
      res.backup_hints = (h.backups ?? []).map((x) => ({ hints: x }));
      cb(null, res);
    },
    apply: (call, cb) => {
      const applied = state.applied!;
      applied.push(call.request);
      const i = applied.length - 1;
      cb(null, state.answer ? state.answer(call.request, i) : ApplyResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 200n + BigInt(i) }) }));
    },
  });
  return Object.assign(state, stub) as StubConsumer;
}
