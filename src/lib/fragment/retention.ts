// Retention plans: which stored fragment objects of a journal are older than its retention.
//
// Age is measured from each object's store modification time, in every store of the journal
// (copies of one fragment in two stores age separately). An object has expired when
// `now - modTime >= retention`, the same boundary Gazette's own prune uses. Unlike Gazette's
// prune, a retention of 0 (or none) keeps everything rather than expiring everything, and
// objects whose modification time is unknown (0) are kept.
//
// Whatever its age, the fragment holding the journal's newest content (the greatest end) is
// kept, in every store and under every postfix: an idle journal whose last write is older than
// its retention must not lose the fragment its write head rests on.
//
// Pure functions, no I/O.

import type { FragmentObject } from './objects.js';

export interface StoreTotals {
  store: string;
  count: number;
  bytes: number;
}

export interface JournalRetention {
  journal: string;
  /** Retention applied, nanoseconds (0 keeps everything). */
  retention: bigint;
  /**
   * Objects with a modification time at or before this (unix seconds) have expired;
   * undefined when nothing can expire (retention 0 or unset).
   */
  cutoff?: number;
  /** End of the newest content; objects ending here are always kept. */
  newestEnd: bigint;
  /** Expired objects, ordered by store, then path. */
  expired: FragmentObject[];
  /** Objects old enough to expire that are kept because they hold the newest content. */
  keptNewest: FragmentObject[];
  /** Expired objects per store, ordered by store URL. */
  byStore: StoreTotals[];
  count: number;
  bytes: number;
}

export interface RetentionPlan {
  journals: JournalRetention[];
  /** Expired objects per store over every journal, ordered by store URL. */
  byStore: StoreTotals[];
  count: number;
  bytes: number;
}

const NS_PER_MS = 1_000_000n;
const NS_PER_S = 1_000_000_000n;

const cmpStr = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The greatest end among fragments holding content (any end when every fragment is empty). */
function newestEndOf(objects: readonly FragmentObject[]): bigint {
  let withContent = -1n;
  let any = -1n;
  for (const o of objects) {
    if (o.end > any) any = o.end;
    if (o.end > o.begin && o.end > withContent) withContent = o.end;
  }
  return withContent >= 0n ? withContent : any >= 0n ? any : 0n;
}

function totalsByStore(objects: readonly FragmentObject[]): StoreTotals[] {
  const m = new Map<string, StoreTotals>();
  for (const o of objects) {
    let t = m.get(o.store);
    if (t === undefined) m.set(o.store, (t = { store: o.store, count: 0, bytes: 0 }));
    t.count++;
    t.bytes += o.size;
  }
  return [...m.values()].sort((a, b) => cmpStr(a.store, b.store));
}

/**
 * Plans retention for one journal. `retention` is nanoseconds (as Go durations are carried here;
 * 0n or undefined keeps everything); `nowMs` is the current time in unix milliseconds.
 */
export function planRetention(
  journal: string,
  objects: readonly FragmentObject[],
  retention: bigint | undefined,
  nowMs: number,
): JournalRetention {
  const ret = retention ?? 0n;
  const newestEnd = newestEndOf(objects);
  const expired: FragmentObject[] = [];
  const keptNewest: FragmentObject[] = [];
  let cutoff: number | undefined;
  if (ret > 0n) {
    // now - mod >= ret  <=>  mod <= now - ret, with mod in whole seconds: mod <= floor((now - ret) / 1 s).
    const t = BigInt(Math.floor(nowMs)) * NS_PER_MS - ret;
    cutoff = t < 0n ? -1 : Number(t / NS_PER_S);
  }
  for (const o of objects) {
    if (o.journal !== journal) {
      throw new Error(`fragment object ${o.store}${o.path} belongs to journal ${o.journal}, not ${journal}`);
    }
    if (cutoff === undefined || o.modTime === 0 || o.modTime > cutoff) continue;
    if (o.end === newestEnd) keptNewest.push(o);
    else expired.push(o);
  }
  const order = (a: FragmentObject, b: FragmentObject): number => cmpStr(a.store, b.store) || cmpStr(a.path, b.path);
  expired.sort(order);
  keptNewest.sort(order);
  const byStore = totalsByStore(expired);
  const plan: JournalRetention = {
    journal,
    retention: ret > 0n ? ret : 0n,
    newestEnd,
    expired,
    keptNewest,
    byStore,
    count: expired.length,
    bytes: byStore.reduce((n, t) => n + t.bytes, 0),
  };
  if (cutoff !== undefined) plan.cutoff = cutoff;
  return plan;
}

export interface JournalRetentionInput {
  journal: string;
  objects: readonly FragmentObject[];
  /** The journal's retention in nanoseconds (its spec's `fragment.retention`). */
  retention?: bigint;
}

/** {@link planRetention} over many journals, with totals per store. Journals ordered by name. */
export function planRetentionAll(inputs: Iterable<JournalRetentionInput>, nowMs: number): RetentionPlan {
  const journals = [...inputs]
    .sort((a, b) => cmpStr(a.journal, b.journal))
    .map((i) => planRetention(i.journal, i.objects, i.retention, nowMs));
  const m = new Map<string, StoreTotals>();
  for (const j of journals) {
    for (const t of j.byStore) {
      let acc = m.get(t.store);
      if (acc === undefined) m.set(t.store, (acc = { store: t.store, count: 0, bytes: 0 }));
      acc.count += t.count;
      acc.bytes += t.bytes;
    }
  }
  const byStore = [...m.values()].sort((a, b) => cmpStr(a.store, b.store));
  return {
    journals,
    byStore,
    count: byStore.reduce((n, t) => n + t.count, 0),
    bytes: byStore.reduce((n, t) => n + t.bytes, 0),
  };
}
