// The plan of `shards prune-log`, from the shards' hints to what happens to each fragment of each
// recovery log: which logs are skipped and why (the library's rules over the hints, then the
// checks of each log's spec and stores), which fragments are deleted and which kept, and the
// audit document of a run. The decisions themselves are the library's (src/lib/recoverylog);
// this module does the listing I/O around them and keeps what the operator and the audit see.
import type { Fragment, FragmentsResponse__Fragment } from '../lib/protocol/gen/broker/protocol.js';
import type { FSMHints, Segment } from '../lib/protocol/gen/recoverylog/recorded_op.js';
import { sumToHex } from '../lib/protocol/fragment.js';
import { LogFragmentPlanner, collectLiveSegments, encodeHints } from '../lib/recoverylog/index.js';
import { fragmentObject, isSuspended, type DeleteOutcome, type HintSource, type LogGates, type ShardHints } from './shard-logs.js';
import { jsonWithBigints } from './fragments-plan.js';
import type { Logger } from './log.js';

export interface UsedHints {
  shard: string;
  source: HintSource;
  hints: FSMHints;
}

export interface PlannedFragment {
  fragment: Fragment;
  object: { store: string; path: string };
  reason: string;
}

export type LogStatus =
  /** Fragments are to be deleted. */
  | 'planned'
  /** Nothing to delete. */
  | 'nothing'
  /** Not examined further, for `reason` (missing hints, unhealthy store, suspended…). Not a failure. */
  | 'skipped'
  /** Nothing of it is deleted, for `problem` (the run ends with exit 1). */
  | 'refused'
  /** Deletes were run (see outcomes). */
  | 'pruned';

export interface LogPlan {
  log: string;
  status: LogStatus;
  reason?: string;
  /** A failure the operator must hear of (exit 1). */
  problem?: string;
  /** Shards whose own log this is, or whose hints name it. */
  shards: string[];
  hints: UsedHints[];
  liveSegments: Segment[];
  delete: PlannedFragment[];
  keep: PlannedFragment[];
  deleteBytes: bigint;
  keepBytes: bigint;
  /** Parallel to `delete`, once the deletes ran. */
  outcomes?: DeleteOutcome[];
}

export interface PrunePlan {
  shards: number;
  logs: LogPlan[];
}

export interface PlanDeps {
  gates: Pick<LogGates, 'check'>;
  listFragments: (log: string) => Promise<FragmentsResponse__Fragment[]>;
  log: Logger;
}

/** Each present set of hints of a shard with where it came from: backups first, then primary (upstream's order). */
function hintSets(s: ShardHints): { source: HintSource; hints: FSMHints | undefined }[] {
  return [...s.backups.map((hints, i) => ({ source: `backup.${i}` as HintSource, hints })), { source: 'primary' as HintSource, hints: s.primary }];
}

/** The logs a set of hints names: its own and those of its segments (forks). */
function logsNamedBy(h: FSMHints): Set<string> {
  const out = new Set<string>([h.log]);
  for (const n of h.live_nodes) for (const s of n.segments) if (s.log !== '') out.add(s.log);
  return out;
}

/**
 * A planned fragment whose object name is worked out when first asked for (deletes, the audit,
 * debug logs): a dry run's table never needs it, and for 100,000 fragments the names took about
 * a quarter of the run.
 */
class Planned implements PlannedFragment {
  private cached: PlannedFragment['object'] | undefined;
  constructor(
    readonly fragment: Fragment,
    readonly reason: string,
  ) {}
  get object(): PlannedFragment['object'] {
    return (this.cached ??= fragmentObject(this.fragment));
  }
}

export async function buildPrunePlan(shards: ShardHints[], deps: PlanDeps): Promise<PrunePlan> {
  const collected = collectLiveSegments(shards.map((s) => ({ id: s.id, log: s.log, primary: s.primary, backups: s.backups })));
  const names = new Set<string>([...collected.segmentsByLog.keys(), ...collected.skipped.keys()]);
  const logs: LogPlan[] = [];
  for (const log of [...names].sort()) {
    const users = shards.filter((s) => s.log === log || hintSets(s).some((h) => h.hints !== undefined && logsNamedBy(h.hints).has(log)));
    const plan: LogPlan = {
      log,
      status: 'nothing',
      shards: users.map((s) => s.id),
      hints: users.flatMap((s) => hintSets(s).flatMap((h) => (h.hints === undefined ? [] : [{ shard: s.id, source: h.source, hints: h.hints }]))),
      liveSegments: collected.segmentsByLog.get(log) ?? [],
      delete: [],
      keep: [],
      deleteBytes: 0n,
      keepBytes: 0n,
    };
    logs.push(plan);
    const skipped = collected.skipped.get(log);
    if (skipped !== undefined) {
      plan.status = 'skipped';
      plan.reason = skipped.join('; ');
      deps.log.info('will skip pruning recovery log journal', { journal: log, reason: plan.reason });
      continue;
    }
    const gate = await deps.gates.check(log);
    if (!gate.ok) {
      plan.status = 'skipped';
      plan.reason = gate.reason;
      deps.log.info('skipping recovery log', { journal: log, reason: gate.reason });
      continue;
    }
    let listed: FragmentsResponse__Fragment[];
    try {
      listed = await deps.listFragments(log);
    } catch (e) {
      if (isSuspended(e)) {
        plan.status = 'skipped';
        plan.reason = 'the journal is suspended';
        continue;
      }
      plan.status = 'refused';
      plan.problem = `cannot list its fragments: ${(e as Error).message}; nothing of it is deleted`;
      continue;
    }
    const planner = new LogFragmentPlanner(log, plan.liveSegments);
    const debug = deps.log.enabled('debug');
    // Sizes are summed as numbers while offsets and sums stay exact (below 2^53), sparing two
    // bigints per fragment; anything else is summed again as bigints.
    let deleteBytes = 0;
    let keepBytes = 0;
    let exact = true;
    let unpersisted = 0;
    let firstUnpersisted: Fragment | undefined;
    for (let i = 0; i < listed.length; i++) {
      const f = listed[i]!.spec;
      if (f === undefined) continue;
      const decision = planner.decide(f);
      const p: PlannedFragment = new Planned(f, planner.reason(f, decision));
      const begin = Number(f.begin);
      const end = Number(f.end);
      const size = end - begin;
      if (!(Number.isSafeInteger(begin) && Number.isSafeInteger(end) && size >= 0)) exact = false;
      if (debug) deps.log.debug(decision === 'delete' ? 'pruning fragment' : 'keeping fragment', { log, name: p.object.path, begin: f.begin, end: f.end, mod: f.mod_time, reason: p.reason });
      if (decision === 'delete') {
        plan.delete.push(p);
        deleteBytes += size;
      } else {
        plan.keep.push(p);
        keepBytes += size;
        if (decision === 'keep-unpersisted' && unpersisted++ === 0) firstUnpersisted = f;
      }
    }
    if (exact && Number.isSafeInteger(deleteBytes) && Number.isSafeInteger(keepBytes)) {
      plan.deleteBytes = BigInt(deleteBytes);
      plan.keepBytes = BigInt(keepBytes);
    } else {
      for (const p of plan.delete) plan.deleteBytes += p.fragment.end - p.fragment.begin;
      for (const p of plan.keep) plan.keepBytes += p.fragment.end - p.fragment.begin;
    }
    if (firstUnpersisted !== undefined) {
      const f = firstUnpersisted;
      plan.status = 'refused';
      plan.problem =
        `${unpersisted} unpersisted fragment(s) overlap no live segment (first: [${f.begin}, ${f.end})): the selector does not include every shard that uses this log; nothing of it is deleted`;
      continue;
    }
    plan.status = plan.delete.length > 0 ? 'planned' : 'nothing';
  }
  return { shards: shards.length, logs };
}

/** The union of the segments' offset ranges, e.g. `[0, 1200) [5000, head)`. */
export function renderRanges(segments: readonly Segment[]): string {
  const ranges = segments.map((s) => [s.first_offset, s.last_offset === 0n ? -1n : s.last_offset] as [bigint, bigint]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const merged: [bigint, bigint][] = [];
  for (const r of ranges) {
    const last = merged[merged.length - 1];
    if (last && (last[1] === -1n || r[0] <= last[1])) {
      if (last[1] !== -1n && (r[1] === -1n || r[1] > last[1])) last[1] = r[1];
    } else merged.push([...r]);
  }
  return merged.map(([a, b]) => `[${a}, ${b === -1n ? 'head' : b})`).join(' ') || '-';
}


/** The audit document of a run (-o json). */
export function pruneAudit(plan: PrunePlan, run: { dryRun: boolean; deleted: boolean; problems: string[] }): string {
  const raws: string[] = [];
  // Hints go in as the consumer stores them in etcd (Go's JSON), spliced into the document as is.
  const raw = (h: FSMHints) => `\u0001${raws.push(encodeHints(h)) - 1}`;
  const totals = { shards: plan.shards, logs: plan.logs.length, logs_skipped: 0, logs_refused: 0, fragments: 0, fragments_deleted: 0, fragments_kept: 0, bytes: 0n, bytes_deleted: 0n, bytes_kept: 0n, permission_denied: 0, failed: 0 };
  const logs = plan.logs.map((l) => {
    if (l.status === 'skipped') totals.logs_skipped++;
    if (l.status === 'refused') totals.logs_refused++;
    const fragment = (p: PlannedFragment, action: 'delete' | 'keep', outcome?: DeleteOutcome) => {
      const f = p.fragment;
      totals.fragments++;
      totals.bytes += f.end - f.begin;
      const done = outcome?.result === 'deleted' || outcome?.result === 'gone';
      if (done) {
        totals.fragments_deleted++;
        totals.bytes_deleted += f.end - f.begin;
      } else {
        totals.fragments_kept++;
        totals.bytes_kept += f.end - f.begin;
      }
      if (outcome?.result === 'denied') totals.permission_denied++;
      if (outcome?.result === 'failed') totals.failed++;
      return {
        begin: f.begin,
        end: f.end,
        sum: sumToHex(f.sum),
        backing_store: f.backing_store,
        path: p.object.path,
        mod_time: f.mod_time,
        action,
        reason: p.reason,
        result: action === 'keep' ? 'kept' : outcome === undefined ? 'not-run' : outcome.result,
        ...(outcome !== undefined && 'error' in outcome ? { error: outcome.error } : {}),
      };
    };
    return {
      log: l.log,
      status: l.status,
      ...(l.reason !== undefined ? { reason: l.reason } : {}),
      ...(l.problem !== undefined ? { problem: l.problem } : {}),
      shards: l.shards,
      hints: l.hints.map((h) => ({ shard: h.shard, source: h.source, hints: raw(h.hints) })),
      live_segments: l.liveSegments,
      fragments: [...l.delete.map((p, i) => fragment(p, 'delete', l.outcomes?.[i])), ...l.keep.map((p) => fragment(p, 'keep'))].sort((a, b) => (a.begin < b.begin ? -1 : a.begin > b.begin ? 1 : 0)),
      bytes: { total: l.deleteBytes + l.keepBytes, delete: l.deleteBytes, keep: l.keepBytes },
    };
  });
  const text = jsonWithBigints({ dry_run: run.dryRun, deleted: run.deleted, logs, totals, problems: run.problems });
  return text.replace(/"\\u0001(\d+)"/g, (_m, i: string) => raws[Number(i)]!);
}
