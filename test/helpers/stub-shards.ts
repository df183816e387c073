// A scripted consumer for in-process tests of the shards commands: a Shard stub
// (src/testing/stubs.ts) that lists a fixed set of shards (selected by the include labels of the
// request's selector, the `id` meta-label among them) and answers GetHints from a table.
import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import {
  GetHintsResponse,
  ListResponse,
  Status,
  type GetHintsRequest,
  type ListRequest,
  type ShardSpec,
} from '../../src/lib/protocol/gen/consumer/protocol.js';
import type { FSMHints } from '../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { startShardStub, stubHeader, type StubServer } from '../../src/testing/stubs.js';

export interface StubShard {
  id: string;
  labels?: Record<string, string>;
  /** '' for a shard without a recovery log; default `recovery`. */
  recoveryLogPrefix?: string;
  primary?: FSMHints;
  /** One entry per backup slot; undefined where none is stored. */
  backups?: (FSMHints | undefined)[];
  /** GetHints answers this status instead. */
  hintsStatus?: Status;
}

export function shardSpec(s: StubShard): ShardSpec {
  const labels = { ...(s.labels ?? {}) };
  return {
    id: s.id,
    sources: [],
    recovery_log_prefix: s.recoveryLogPrefix ?? 'recovery',
    hint_prefix: '/hints',
    hint_backups: s.backups?.length ?? 0,
    max_txn_duration: { seconds: 1n, nanos: 0 },
    min_txn_duration: undefined,
    disable: false,
    hot_standbys: 0,
    labels: { labels: Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) => ({ name, value, prefix: false })) },
    disable_wait_for_ack: false,
    ring_buffer_size: 0,
    read_channel_size: 0,
  };
}

function matches(s: StubShard, req: ListRequest): boolean {
  const have: Record<string, string> = { ...(s.labels ?? {}), id: s.id };
  for (const l of req.selector?.include?.labels ?? []) {
    const v = have[l.name];
    if (v === undefined || (l.value !== '' && (l.prefix ? !v.startsWith(l.value) : v !== l.value))) return false;
  }
  return true;
}

/** Starts the stub; `shards` may be changed between runs. */
export function startStubConsumer(shards: StubShard[]): Promise<StubServer> {
  return startShardStub({
    list: (call: ServerUnaryCall<ListRequest, ListResponse>, cb: sendUnaryData<ListResponse>) => {
      const picked = shards.filter((s) => matches(s, call.request));
      cb(
        null,
        ListResponse.fromPartial({
          status: Status.OK,
          header: stubHeader(),
          shards: picked.map((s) => ({ spec: shardSpec(s), mod_revision: 10n, create_revision: 1n, route: { members: [], primary: -1, endpoints: [] }, status: [] })),
        }),
      );
    },
    getHints: (call: ServerUnaryCall<GetHintsRequest, GetHintsResponse>, cb: sendUnaryData<GetHintsResponse>) => {
      const s = shards.find((x) => x.id === call.request.shard);
      if (s === undefined) {
        cb(null, GetHintsResponse.fromPartial({ status: Status.SHARD_NOT_FOUND, header: stubHeader() }));
        return;
      }
      const res = GetHintsResponse.fromPartial({ status: s.hintsStatus ?? Status.OK, header: stubHeader() });
      // fromPartial would fill absent hints in; set them as given.
      res.primary_hints = { hints: s.primary };
      res.backup_hints = (s.backups ?? []).map((hints) => ({ hints }));
      cb(null, res);
    },
  });
}
