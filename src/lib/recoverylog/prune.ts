// Planning the pruning of recovery logs: which fragments of a log some hints still need for
// playback, and which can go. Pure: listing shards, hints and fragments and deleting objects is
// the caller's.
//
// Every hint set (a shard's primary hints and each of its backups) is folded into its live
// segments; the last one is made open-ended, because playback reads on from it to the log's head.
// A fragment is needed when it overlaps any segment of its log. A shard whose hints are not all
// there (a backup slot never written, hints without live files) protects every log it could need.
import type { Fragment } from '../protocol/gen/broker/protocol.js';
import type { FSMHints, Segment } from '../protocol/gen/recoverylog/recorded_op.js';
import { ValidationError } from '../protocol/errors.js';
import { liveSegments } from './segments.js';

/** A shard as the planner sees it: its own recovery log and its hints (undefined: missing). */
export interface ShardHints {
  id: string;
  /** The shard's recovery log (`<recovery_log_prefix>/<id>`). */
  log: string;
  primary?: FSMHints;
  /** backup.0, backup.1, … (undefined: that slot holds nothing). */
  backups: (FSMHints | undefined)[];
}

export interface CollectedSegments {
  /** Per log, the segments that must be kept (from every hint set naming the log, side by side). */
  segmentsByLog: Map<string, Segment[]>;
  /** Logs that must not be pruned at all, with the reasons. */
  skipped: Map<string, string[]>;
}

function logsNamed(h: FSMHints): string[] {
  const out = new Set([h.log]);
  for (const n of h.live_nodes) for (const s of n.segments) out.add(s.log || h.log);
  return [...out];
}

/**
 * The live segments of every hint set of `shards`, by log (the last segment of each set made
 * open-ended, last_offset 0), and the logs to skip. A shard with a hint set missing or without
 * live files skips its own log and every log its present hints name (Go's gazctl skips only the
 * shard's own log). Throws ValidationError for hints that do not fold or name another log than
 * the shard's.
 */
export function collectLiveSegments(shards: readonly ShardHints[]): CollectedSegments {
  const segmentsByLog = new Map<string, Segment[]>();
  const skipped = new Map<string, string[]>();
  const skip = (log: string, why: string) => {
    const l = skipped.get(log);
    if (l) l.push(why);
    else skipped.set(log, [why]);
  };
  for (const shard of shards) {
    const sources: [string, FSMHints | undefined][] = [
      ...shard.backups.map((h, i): [string, FSMHints | undefined] => [`backup.${i}`, h]),
      ['primary', shard.primary],
    ];
    const missing = sources.find(([, h]) => !h || h.live_nodes.length === 0);
    if (missing) {
      const [name, h] = missing;
      const why = `shard ${shard.id}: ${!h ? `has not written its ${name} hints` : `its ${name} hints have no live files`}`;
      const logs = new Set([shard.log]);
      for (const [, p] of sources) if (p) for (const l of logsNamed(p)) logs.add(l);
      for (const l of logs) skip(l, why);
      continue;
    }
    for (const [name, h] of sources) {
      const hints = h!;
      if (hints.log !== shard.log) throw new ValidationError(`shard ${shard.id}: its ${name} hints name log ${hints.log}, not its recovery log ${shard.log}`);
      let segs: Segment[];
      try {
        segs = liveSegments(hints);
      } catch (err) {
        throw new ValidationError(`shard ${shard.id}: ${name} hints: ${(err as Error).message}`);
      }
      segs[segs.length - 1]!.last_offset = 0n;
      for (const s of segs) {
        const l = segmentsByLog.get(s.log);
        if (l) l.push(s);
        else segmentsByLog.set(s.log, [s]);
      }
    }
  }
  return { segmentsByLog, skipped };
}

export type FragmentDecisionKind =
  /** Overlaps a live segment (or the log has no segments at all). */
  | 'keep'
  /**
   * Needed by no segment, but not persisted (mod_time 0): never deleted. It is the sign that a
   * shard using this log is missing from the selection.
   */
  | 'keep-unpersisted'
  /** Needed by no segment: may be deleted from its store. */
  | 'delete';

export interface FragmentDecision {
  fragment: Fragment;
  decision: FragmentDecisionKind;
  /** Why, in words (for an audit record). */
  reason: string;
}

function showSegment(s: Segment): string {
  return `[${s.first_offset}, ${s.last_offset === 0n ? 'head' : s.last_offset}) (seq ${s.first_seq_no}..${s.last_seq_no}, author ${s.author})`;
}

/** Whether fragment `f` holds any byte of segment `s` (an end of 0 is open). */
export function overlaps(s: Segment, f: Fragment): boolean {
  return (s.first_offset < f.end || f.end === 0n) && (s.last_offset > f.begin || s.last_offset === 0n);
}

/**
 * Decides, fragment by fragment, whether the live `segments` of `log` need it. `decide` allocates
 * nothing (a long log has a hundred thousand fragments); `reason` words a decision for a record.
 */
export class LogFragmentPlanner {
  private readonly mine: readonly Segment[];
  /** One reason string for every deleted fragment. */
  private readonly unneeded: string;

  constructor(
    readonly log: string,
    segments: readonly Segment[],
  ) {
    const mine = segments.filter((s) => s.log === log || s.log === '');
    if (mine.length !== segments.length) throw new ValidationError(`planning ${log}: segments of another log were given`);
    this.mine = mine;
    this.unneeded = `needed by none of the ${mine.length} hinted segments of ${log}`;
  }

  decide(fragment: Fragment): FragmentDecisionKind {
    const mine = this.mine;
    if (mine.length === 0) return 'keep';
    for (let i = 0; i < mine.length; i++) if (overlaps(mine[i]!, fragment)) return 'keep';
    return fragment.mod_time === 0n ? 'keep-unpersisted' : 'delete';
  }

  /** Why `fragment` got `decision` (what decide returned for it). */
  reason(fragment: Fragment, decision: FragmentDecisionKind): string {
    if (decision === 'delete') return this.unneeded;
    if (decision === 'keep-unpersisted') return 'not persisted yet and needed by no hinted segment: a shard using this log is probably missing from the selection';
    const s = this.mine.find((x) => overlaps(x, fragment));
    return s ? `overlaps hinted segment ${showSegment(s)}` : `no live segments for log ${this.log}: everything is kept`;
  }
}

/** Decides, for every fragment of `log`, whether the live `segments` of that log need it. */
export function planLogFragments(log: string, segments: readonly Segment[], fragments: readonly Fragment[]): FragmentDecision[] {
  const planner = new LogFragmentPlanner(log, segments);
  return fragments.map((fragment): FragmentDecision => {
    const decision = planner.decide(fragment);
    return { fragment, decision, reason: planner.reason(fragment, decision) };
  });
}
