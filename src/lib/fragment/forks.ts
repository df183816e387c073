// Fork chains: which stored fragments of a journal make up its history, and which are forks.
//
// A journal's stores can hold fragments that no longer belong to the journal's history: shorter
// copies persisted before a longer fragment superseded them, content written by a broker whose
// writes were later rolled back (reset-head, lost primaries), or fragments of an older run
// separated from the current one by missing offsets. This module tells them apart from offsets
// and sums alone, without reading any content.
//
// The main chain is walked backwards from the newest content:
//   1. start at the fragment with the greatest end (ties: the smallest begin);
//   2. step to a fragment whose end equals the current begin, taking the smallest begin (the one
//      reaching furthest back); repeat;
//   3. stop at offset 0, or where no fragment ends at the current begin.
// Objects with the same begin, end and sum are copies of one fragment (other stores, other path
// postfixes) and share its fate. Every fragment not on the chain is a fork:
//   * dead-end: everything it holds lies inside the chain's range [begin, end): the chain already
//     holds those offsets, so the fork can go (superseded shorter copies, divergent rewrites of
//     offsets the chain holds, fragments straddling two chain members, empty fragments);
//   * gap: it holds offsets before the chain's begin (or past its end): the only copy of those
//     offsets anywhere, so it is reported and never deleted;
//   * ambiguous: the whole journal is ambiguous when a chain step offers two fragments with the
//     same begin and end but different sums (offsets cannot say which is history), or when the
//     chain ends past the broker's write head (the broker would hand out offsets the stores
//     already hold; reset-head must move the head first). Then every fork is reported with this
//     kind and nothing is deletable.
// Chain members are never deletable.
//
// Pure functions, no I/O; offsets are bigint as on the wire.

import type { FragmentObject } from './objects.js';

export type ForkKind = 'dead-end' | 'gap' | 'ambiguous';

/** One distinct fragment of the chain with every stored copy of it. */
export interface ChainMember {
  begin: bigint;
  end: bigint;
  sum: string;
  copies: FragmentObject[];
}

/** One stored object that is not on the main chain. */
export interface Fork {
  kind: ForkKind;
  /** Why the object was classified so, in words an operator can act on. */
  reason: string;
  /**
   * The chain offset where the fork branches off: its begin when that lies inside the chain's
   * range, else the chain boundary nearest to it (the chain's begin for forks before the chain,
   * its end for forks past it).
   */
  divergesAt: bigint;
  /** True when a cleanup may delete this object (dead-ends of unambiguous journals only). */
  deletable: boolean;
  object: FragmentObject;
}

export interface JournalForks {
  journal: string;
  /** Range held by the main chain; {0, 0} for a journal with no (non-empty) fragments. */
  chain: { begin: bigint; end: bigint };
  /** Chain fragments in ascending offset order. */
  members: ChainMember[];
  /** Every object off the chain, ordered by begin, end, sum, store, path. */
  forks: Fork[];
  /** Set when the journal is ambiguous: why, and what to do. */
  ambiguous?: string;
  /** Objects a cleanup may delete (the `deletable` forks). */
  deletable: FragmentObject[];
}

export interface PlanForksOptions {
  /** The broker's write head for the journal, when known. */
  writeHead?: bigint;
}

interface Distinct {
  begin: bigint;
  end: bigint;
  sum: string;
  copies: FragmentObject[];
}

const cmpBig = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);
const cmpStr = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function cmpObject(a: FragmentObject, b: FragmentObject): number {
  return (
    cmpBig(a.begin, b.begin) ||
    cmpBig(a.end, b.end) ||
    cmpStr(a.sum, b.sum) ||
    cmpStr(a.store, b.store) ||
    cmpStr(a.path, b.path)
  );
}

const range = (b: bigint, e: bigint): string => `[${b}, ${e})`;

/** Distinct fragments among `candidates` with the smallest begin (ties broken by sum). */
function smallestBegin(candidates: Distinct[]): Distinct[] {
  let best: Distinct[] = [];
  for (const d of candidates) {
    if (best.length === 0 || d.begin < best[0]!.begin) best = [d];
    else if (d.begin === best[0]!.begin) best.push(d);
  }
  return best.sort((a, b) => cmpStr(a.sum, b.sum));
}

/** Index of the chain member holding `offset` (members are contiguous and ascending), or -1. */
function memberAt(members: ChainMember[], offset: bigint): number {
  let lo = 0;
  let hi = members.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const m = members[mid]!;
    if (offset < m.begin) hi = mid - 1;
    else if (offset >= m.end) lo = mid + 1;
    else return mid;
  }
  return -1;
}

function deadEndReason(d: Distinct, members: ChainMember[]): string {
  if (d.begin === d.end) return `empty fragment at offset ${d.begin}, inside the chain`;
  const i = memberAt(members, d.begin);
  const m = members[i]!;
  const mr = range(m.begin, m.end);
  if (m.begin === d.begin && m.end === d.end) {
    return `divergent write: chain fragment ${mr} holds the same offsets with sum ${m.sum}`;
  }
  if (m.begin === d.begin && d.end < m.end) {
    return `superseded: chain fragment ${mr} begins at the same offset and reaches further`;
  }
  if (d.end <= m.end) return `inside chain fragment ${mr}`;
  const j = memberAt(members, d.end - 1n);
  const last = members[j]!;
  return `overlaps chain fragments ${mr} to ${range(last.begin, last.end)}; the chain holds all its offsets`;
}

function gapReason(d: Distinct, chainBegin: bigint, chainEnd: bigint, hasChain: boolean): string {
  if (!hasChain) return `the journal has no chain; offsets ${range(d.begin, d.end)} are kept`;
  if (d.begin === d.end) return `empty fragment at offset ${d.begin}, outside the chain ${range(chainBegin, chainEnd)}; kept`;
  const parts: string[] = [];
  if (d.begin < chainBegin) {
    parts.push(`offsets ${range(d.begin, d.end < chainBegin ? d.end : chainBegin)} before the chain's begin ${chainBegin}`);
  }
  if (d.end > chainEnd) {
    parts.push(`offsets ${range(d.begin > chainEnd ? d.begin : chainEnd, d.end)} past the chain's end ${chainEnd}`);
  }
  return `holds ${parts.join(' and ')}, which the chain does not hold; kept`;
}

/**
 * Plans the main chain and the forks of one journal from every stored object of it (all stores,
 * all postfixes). `objects` must all belong to `journal`.
 */
export function planForks(journal: string, objects: readonly FragmentObject[], opts: PlanForksOptions = {}): JournalForks {
  // Collapse copies into distinct fragments. They are found by sum first (nearly always unique
  // to one fragment), then by offsets among the few fragments sharing a sum.
  const bySum = new Map<string, Distinct | Distinct[]>();
  const distinct: Distinct[] = [];
  for (const o of objects) {
    if (o.journal !== journal) {
      throw new Error(`fragment object ${o.store}${o.path} belongs to journal ${o.journal}, not ${journal}`);
    }
    const got = bySum.get(o.sum);
    let d: Distinct | undefined;
    if (got === undefined) {
      d = undefined;
    } else if (Array.isArray(got)) {
      d = got.find((x) => x.begin === o.begin && x.end === o.end);
    } else if (got.begin === o.begin && got.end === o.end) {
      d = got;
    }
    if (d === undefined) {
      d = { begin: o.begin, end: o.end, sum: o.sum, copies: [] };
      distinct.push(d);
      if (got === undefined) bySum.set(o.sum, d);
      else if (Array.isArray(got)) got.push(d);
      else bySum.set(o.sum, [got, d]);
    }
    d.copies.push(o);
  }

  // Index non-empty fragments by end. Empty ones hold no offsets and can't extend a chain.
  const byEnd = new Map<bigint, Distinct[]>();
  let newest: Distinct[] = [];
  for (const d of distinct) {
    if (d.begin >= d.end) continue;
    let list = byEnd.get(d.end);
    if (list === undefined) byEnd.set(d.end, (list = []));
    list.push(d);
    if (newest.length === 0 || d.end > newest[0]!.end) newest = [d];
    else if (d.end === newest[0]!.end) newest.push(d);
  }

  const reasons: string[] = [];
  const chainRev: Distinct[] = [];
  const take = (candidates: Distinct[]): Distinct => {
    const best = smallestBegin(candidates);
    const pick = best[0]!;
    if (best.length > 1 && reasons.length === 0) {
      reasons.push(
        `fragments ${range(pick.begin, pick.end)} with different sums (${best.map((d) => d.sum).join(', ')}) ` +
          `both continue the chain; which one is the journal's history cannot be told from offsets`,
      );
    }
    chainRev.push(pick);
    return pick;
  };
  if (newest.length > 0) {
    let cur = take(newest).begin;
    while (cur > 0n) {
      const prev = byEnd.get(cur);
      if (prev === undefined) break;
      cur = take(prev).begin;
    }
  }
  const members: ChainMember[] = chainRev.reverse().map((d) => ({ begin: d.begin, end: d.end, sum: d.sum, copies: [...d.copies].sort(cmpObject) }));
  const onChain = new Set<Distinct>(chainRev);
  const hasChain = members.length > 0;
  const chainBegin = hasChain ? members[0]!.begin : 0n;
  const chainEnd = hasChain ? members[members.length - 1]!.end : 0n;

  if (hasChain && opts.writeHead !== undefined && chainEnd > opts.writeHead) {
    reasons.push(
      `the chain ends at ${chainEnd}, past the broker's write head ${opts.writeHead}; ` +
        `run reset-head on the journal first`,
    );
  }
  const ambiguous = reasons.length > 0 ? reasons.join('; ') : undefined;

  const forks: Fork[] = [];
  const deletable: FragmentObject[] = [];
  for (const d of distinct) {
    if (onChain.has(d)) continue;
    const inside = hasChain && d.begin >= chainBegin && d.end <= chainEnd;
    const divergesAt = !hasChain ? d.begin : d.begin < chainBegin ? chainBegin : d.begin > chainEnd ? chainEnd : d.begin;
    let kind: ForkKind;
    let reason: string;
    if (ambiguous !== undefined) {
      kind = 'ambiguous';
      reason = `journal is ambiguous: ${ambiguous}`;
    } else if (inside) {
      kind = 'dead-end';
      reason = deadEndReason(d, members);
    } else {
      kind = 'gap';
      reason = gapReason(d, chainBegin, chainEnd, hasChain);
    }
    const del = kind === 'dead-end';
    for (const o of d.copies) {
      forks.push({ kind, reason, divergesAt, deletable: del, object: o });
      if (del) deletable.push(o);
    }
  }
  forks.sort((a, b) => cmpObject(a.object, b.object));
  deletable.sort(cmpObject);

  const out: JournalForks = { journal, chain: { begin: chainBegin, end: chainEnd }, members, forks, deletable };
  if (ambiguous !== undefined) out.ambiguous = ambiguous;
  return out;
}

/**
 * {@link planForks} for every journal of a flat listing. `writeHeads` gives the broker's write
 * head per journal where known. Results are ordered by journal name.
 */
export function planForksAll(
  byJournal: ReadonlyMap<string, readonly FragmentObject[]>,
  writeHeads: ReadonlyMap<string, bigint> = new Map(),
): JournalForks[] {
  const names = [...byJournal.keys()].sort(cmpStr);
  return names.map((j) => {
    const writeHead = writeHeads.get(j);
    return planForks(j, byJournal.get(j)!, writeHead === undefined ? {} : { writeHead });
  });
}

// ---- rendering ------------------------------------------------------------------------------

/** Plain JSON-ready shape of one fork (offsets stay bigint; see {@link forksReportJson}). */
export interface ForkReportRow {
  kind: ForkKind;
  begin: bigint;
  end: bigint;
  sum: string;
  store: string;
  path: string;
  size: number;
  mod_time: number;
  diverges_at: bigint;
  deletable: boolean;
  reason: string;
}

export interface JournalForksReport {
  journal: string;
  chain: { begin: bigint; end: bigint };
  ambiguous?: string;
  forks: ForkReportRow[];
}

/** The report shape: `{journals: [{journal, chain: {begin, end}, [ambiguous], forks: [...]}]}`. */
export function forksReport(results: readonly JournalForks[]): { journals: JournalForksReport[] } {
  return {
    journals: results.map((r) => {
      const j: JournalForksReport = { journal: r.journal, chain: { ...r.chain }, forks: [] };
      if (r.ambiguous !== undefined) j.ambiguous = r.ambiguous;
      j.forks = r.forks.map((f) => ({
        kind: f.kind,
        begin: f.object.begin,
        end: f.object.end,
        sum: f.object.sum,
        store: f.object.store,
        path: f.object.path,
        size: f.object.size,
        mod_time: f.object.modTime,
        diverges_at: f.divergesAt,
        deletable: f.deletable,
        reason: f.reason,
      }));
      return j;
    }),
  };
}

/**
 * The report as JSON text. Offsets are written as exact JSON integers (they are int64 and may
 * exceed what a JS number holds exactly); mod_time is unix seconds.
 */
export function forksReportJson(results: readonly JournalForks[], indent?: number): string {
  const text = JSON.stringify(
    forksReport(results),
    (_k, v: unknown) => (typeof v === 'bigint' ? `\u0000${v.toString()}` : v),
    indent,
  );
  // Strings can't hold NUL in journal names, store URLs or paths, so the marker is unambiguous.
  return text.replace(/"\\u0000(-?\d+)"/g, '$1');
}
