// Segments: ranges of a recovery log (by sequence number and by byte offset) written by one
// author, and the ordered, non-overlapping set they fold into.
import type { FSMHints, Segment } from '../protocol/gen/recoverylog/recorded_op.js';
import { ValidationError } from '../protocol/errors.js';
import { validateJournalName } from '../protocol/validate/names.js';

/** A copy of `s`. */
export function copySegment(s: Segment): Segment {
  return { ...s };
}

function describe(s: Segment): string {
  return `{author ${s.author}, seq ${s.first_seq_no}..${s.last_seq_no}, offsets ${s.first_offset}..${s.last_offset === 0n ? 'open' : s.last_offset}, log ${s.log || '(hints log)'}}`;
}

/** Throws ValidationError when `s` is not a consistent segment (its log must be set). */
export function validateSegment(s: Segment): void {
  if (s.author === 0) throw new ValidationError('segment author is zero');
  if (s.first_seq_no <= 0n) throw new ValidationError('segment first_seq_no <= 0');
  if (s.first_offset < 0n) throw new ValidationError('segment first_offset < 0');
  if (s.last_seq_no < s.first_seq_no) throw new ValidationError('segment last_seq_no < first_seq_no');
  if (s.last_offset !== 0n && s.last_offset <= s.first_offset) throw new ValidationError('segment last_offset <= first_offset');
  try {
    validateJournalName(s.log);
  } catch (err) {
    throw new ValidationError(`segment log: ${(err as Error).message}`);
  }
}

const NOT_MERGEABLE = Symbol('not mergeable');

/**
 * Merges two segments into one, or says they stay apart (NOT_MERGEABLE), or throws when
 * together they are inconsistent. The checks run in a fixed order; the first that matches decides.
 */
function merge(x: Segment, y: Segment): Segment | typeof NOT_MERGEABLE {
  // a starts first; on equal starts, a is the longer one.
  const [a, b] = x.first_seq_no > y.first_seq_no || (x.first_seq_no === y.first_seq_no && x.last_seq_no < y.last_seq_no) ? [y, x] : [x, y];
  const sameLog = a.log === b.log;
  const bad = (why: string): never => {
    throw new ValidationError(`inconsistent segments (${why}): ${describe(a)} and ${describe(b)}`);
  };
  // 1-2: offsets must grow with sequence numbers, and an open end may only be followed by open ends.
  if (a.first_seq_no < b.first_seq_no && sameLog && a.first_offset > b.first_offset) bad('first_offset decreases');
  if (a.first_seq_no < b.first_seq_no && a.last_offset === 0n && b.last_offset !== 0n) bad('an open-ended segment precedes a closed one');
  // 3: a segment with an open end cannot be followed in another log.
  if (a.last_offset === 0n && !sameLog) bad('an open-ended segment precedes one of another log');
  // 4-5: last offsets grow with last sequence numbers.
  if (sameLog && a.last_seq_no <= b.last_seq_no && b.last_offset !== 0n && b.last_offset < a.last_offset) bad('last_offset decreases');
  if (sameLog && a.last_seq_no >= b.last_seq_no && a.last_offset !== 0n && a.last_offset < b.last_offset) bad('last_offset decreases');
  // 6: the same first op has one checksum.
  if (a.first_seq_no === b.first_seq_no && a.first_checksum !== b.first_checksum) bad('first_checksum differs');
  // 7-9: a gap, or adjacent segments of different authors or logs, stay apart.
  if (a.last_seq_no + 1n < b.first_seq_no) return NOT_MERGEABLE;
  if (a.last_seq_no + 1n === b.first_seq_no && a.author !== b.author) return NOT_MERGEABLE;
  if (a.last_seq_no + 1n === b.first_seq_no && !sameLog) return NOT_MERGEABLE;
  // 10-11: overlapping segments must agree on author and log.
  if (a.author !== b.author) bad('overlapping segments of different authors');
  if (!sameLog) bad('overlapping segments of different logs');
  // 12: merge into a copy of a.
  const m = { ...a };
  if (m.first_seq_no === b.first_seq_no && m.first_offset < b.first_offset) m.first_offset = b.first_offset; // the tighter lower bound
  if (m.last_seq_no === b.last_seq_no && m.last_offset === 0n) m.last_offset = b.last_offset;
  if (m.last_seq_no < b.last_seq_no) {
    m.last_seq_no = b.last_seq_no;
    m.last_offset = b.last_offset;
  }
  return m;
}

/**
 * Segments ordered by first_seq_no, with disjoint sequence ranges; within one log, offsets grow
 * with sequence numbers, and only a suffix may be open-ended (last_offset 0).
 */
export class SegmentSet {
  private readonly items: Segment[] = [];

  /** The segments, in order (copies). */
  get segments(): Segment[] {
    return this.items.map(copySegment);
  }

  get length(): number {
    return this.items.length;
  }

  /** Adds `segment` (its log must be set), merging it with its neighbours; throws ValidationError when inconsistent. */
  add(segment: Segment): void {
    validateSegment(segment);
    const s = this.items;
    let seg = copySegment(segment);
    // First entry starting at or after seg.
    let lo = 0;
    let hi = s.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (s[mid]!.first_seq_no >= seg.first_seq_no) hi = mid;
      else lo = mid + 1;
    }
    let begin = lo;
    if (begin > 0) {
      const m = merge(s[begin - 1]!, seg);
      if (m !== NOT_MERGEABLE) {
        seg = m;
        begin--;
      }
    }
    let end = begin;
    for (; end < s.length; end++) {
      const m = merge(s[end]!, seg);
      if (m === NOT_MERGEABLE) break;
      seg = m;
    }
    s.splice(begin, end - begin, seg);
  }
}

/**
 * Every segment of every live node of `hints`, folded into a SegmentSet (a segment without a
 * log belongs to hints.log). Throws ValidationError on inconsistent hints, or when the last
 * segment is not in hints.log.
 */
export function liveSegments(hints: FSMHints): Segment[] {
  const set = new SegmentSet();
  for (const node of hints.live_nodes) {
    for (const seg of node.segments) set.add({ ...seg, log: seg.log || hints.log });
  }
  const out = set.segments;
  const last = out[out.length - 1];
  if (last && last.log !== hints.log) {
    throw new ValidationError(`the last hinted segment is in log ${last.log}, not in the hints' log ${hints.log}`);
  }
  return out;
}
