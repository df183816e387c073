// `gazctl health`: what is checked, under one deadline, and how the result reads. The probes (the
// RPCs and store checks) are passed in, so this logic runs the same against real clients (the
// command) and stubs (unit tests).
//
// Every check ends within the deadline: a probe still pending when it comes is abandoned (its
// signal aborted) and reported as not answering, which is how a service that accepts TCP and
// never answers shows up, instead of hanging the command.
import type { ListResponse_Journal } from '../lib/protocol/gen/broker/protocol.js';
import { JournalSpec_Suspend_Level } from '../lib/protocol/gen/broker/protocol.js';
import type { ListResponse_Shard } from '../lib/protocol/gen/consumer/protocol.js';
import { ReplicaStatus_Code } from '../lib/protocol/gen/consumer/protocol.js';
import { formatGoDuration } from '../lib/protocol/duration.js';
import type { EtcdMemberStatus } from '../lib/keyspace/status.js';
import { TransportError } from '../lib/protocol/errors.js';
import { setMaxListeners } from 'node:events';

/** The RPCs and checks health runs; each must stop soon after its signal aborts. */
export interface HealthProbes {
  /** The configured broker address. */
  brokerAddress: string;
  /** The configured consumer address; undefined: consumers are not checked. */
  consumerAddress?: string;
  /** etcd endpoints to check; empty: etcd is not checked. */
  etcdEndpoints: readonly string[];
  /** The journals the selector picks, from the configured broker. */
  listJournals(signal: AbortSignal): Promise<ListResponse_Journal[]>;
  /** Proves the broker at `endpoint` answers (a List of its own). */
  pingBroker(endpoint: string, signal: AbortSignal): Promise<void>;
  /** The shards the selector picks, from the configured consumer. */
  listShards(signal: AbortSignal): Promise<ListResponse_Shard[]>;
  /** Proves the consumer at `endpoint` answers. */
  pingConsumer(endpoint: string, signal: AbortSignal): Promise<void>;
  etcdStatus(endpoint: string, signal: AbortSignal): Promise<EtcdMemberStatus>;
  /** Why the brokers cannot use `store`, or undefined when they can. */
  storeHealth(store: string, signal: AbortSignal): Promise<string | undefined>;
  /**
   * A shard's read-through offsets (Stat at its primary), once it has read through `readThrough`
   * (empty: at once). With {@link HealthProbes.writeHead}, serving primaries are checked for
   * progress; without them (unit tests of other checks) they are not.
   */
  statShard?(id: string, readThrough: Record<string, bigint>, signal: AbortSignal): Promise<Record<string, bigint>>;
  /** A journal's write head (a metadata-only Read through the configured broker). */
  writeHead?(journal: string, signal: AbortSignal): Promise<bigint>;
}

export type Component = 'broker' | 'journals' | 'consumer' | 'shards' | 'shard' | 'etcd' | 'store';

/** One thing looked at: fine, a problem, or not checked (with why). */
export interface HealthCheck {
  component: Component;
  /** Which one: an address, a member, a store URL, a shard id; '' for a whole group. */
  subject: string;
  state: 'ok' | 'problem' | 'skipped';
  detail: string;
}

export interface HealthReport {
  healthy: boolean;
  checks: HealthCheck[];
  counts: { brokers: number; journals: number; consumers: number; shards: number; stores: number; etcd: number };
  /** Whether the consumers and etcd were looked at (for the summary). */
  consumersChecked: boolean;
  etcdChecked: boolean;
  /** How long the round took, in milliseconds. */
  elapsedMs: number;
}

/** How many journal or shard names a problem line shows before "and N more". */
export const NAMES_SHOWN = 3;
/** FAILED shards reported one per line; beyond this, one line counts the rest. */
export const FAILED_SHARDS_SHOWN = 10;

class Timeout extends Error {}

/**
 * `fn` bounded by `deadline` (epoch ms) and `outer`: rejects with Timeout once the deadline
 * passes, aborting the signal `fn` got so the RPC is cancelled rather than left running.
 */
async function bounded<T>(deadline: number, outer: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  const onOuter = () => ac.abort(outer?.reason);
  if (outer?.aborted) ac.abort(outer.reason);
  else outer?.addEventListener('abort', onOuter, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Timeout());
      ac.abort(new Timeout());
    }, Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([fn(ac.signal), expired]);
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
  }
}

/** One line of a failure: the error's message, its lines joined. */
function why(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.replace(/\s*\n\s*/g, '; ').trim() || 'no reason given';
}

/** The words of a failed probe: no answer in time, or what went wrong. */
function failure(err: unknown, budgetMs: number, what: string, endpoint?: string): string {
  if (err instanceof Timeout) return `${what} did not answer within ${formatGoDuration(BigInt(Math.max(1, Math.round(budgetMs))) * 1_000_000n)}`;
  let msg = why(err);
  if (err instanceof TransportError && err.reason === 'unresolved') {
    const svc = /^(broker|consumer)\b/.exec(msg)?.[1];
    if (svc) msg += ` (set --${svc}.address or ${svc.toUpperCase()}_ADDRESS; \`gazctl print-config\` shows the effective endpoints)`;
  }
  // The line names the endpoint already: "broker http://b:8080 is unreachable: …" reads "unreachable: …".
  if (endpoint) msg = msg.replace(new RegExp(`^(broker|consumer|etcd) ${endpoint.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:? (is )?`), '');
  return `${what} failed: ${msg}`;
}

/** "a, b, c and 4 more" */
export function someNames(names: readonly string[], shown = NAMES_SHOWN): string {
  const head = names.slice(0, shown).join(', ');
  return names.length > shown ? `${head} and ${names.length - shown} more` : head;
}

/** The journal's replication as the allocator wants it (suspension scales it down). */
export function desiredReplication(j: ListResponse_Journal): number {
  const level = j.spec?.suspend?.level ?? JournalSpec_Suspend_Level.NONE;
  if (level === JournalSpec_Suspend_Level.FULL) return 0;
  if (level === JournalSpec_Suspend_Level.PARTIAL) return 1;
  return j.spec?.replication ?? 0;
}

/** Route members as `zone/suffix`, keyed by endpoint. */
function routeEndpoints(routes: readonly ({ members: { zone: string; suffix: string }[]; endpoints: string[] } | undefined)[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of routes) {
    if (!r) continue;
    r.members.forEach((m, i) => {
      const ep = r.endpoints[i];
      if (ep && !out.has(ep)) out.set(ep, `${m.zone}/${m.suffix}`);
    });
  }
  return out;
}

/** The journal-level checks of a listing: primaries and route sizes. */
export function journalChecks(journals: readonly ListResponse_Journal[]): HealthCheck[] {
  const noPrimary: string[] = [];
  const short: string[] = [];
  for (const j of journals) {
    const want = desiredReplication(j);
    if (want === 0) continue; // fully suspended: no replicas by design
    const name = j.spec?.name ?? '?';
    const members = j.route?.members.length ?? 0;
    if ((j.route?.primary ?? -1) < 0) noPrimary.push(name);
    if (members < want) short.push(`${name} (${members} of ${want})`);
  }
  const out: HealthCheck[] = [];
  if (noPrimary.length) out.push({ component: 'journals', subject: '', state: 'problem', detail: `${noPrimary.length} without a primary broker: ${someNames(noPrimary)}` });
  if (short.length) out.push({ component: 'journals', subject: '', state: 'problem', detail: `${short.length} with fewer brokers than their replication: ${someNames(short)}` });
  if (!out.length) out.push({ component: 'journals', subject: '', state: 'ok', detail: `${journals.length} listed, each with a primary and its full replication` });
  return out;
}

/** The shard-level checks of a listing: FAILED replicas, enabled shards without a primary. */
export function shardChecks(shards: readonly ListResponse_Shard[]): HealthCheck[] {
  const out: HealthCheck[] = [];
  const failed: HealthCheck[] = [];
  const noPrimary: string[] = [];
  for (const s of shards) {
    const id = s.spec?.id ?? '?';
    const members = s.route?.members ?? [];
    s.status.forEach((st, i) => {
      if (st.code !== ReplicaStatus_Code.FAILED) return;
      const m = members[i];
      const on = m ? ` on ${m.zone}/${m.suffix}` : '';
      const errs = st.errors.length ? `: ${st.errors.map((e) => e.replace(/\s*\n\s*/g, '; ').trim()).join('; ')}` : '';
      failed.push({ component: 'shard', subject: id, state: 'problem', detail: `FAILED${on}${errs}` });
    });
    if (s.spec?.disable) continue;
    // Serving means its primary replica reached PRIMARY: one assigned but still recovering
    // (IDLE, BACKFILL) does not process yet. A FAILED primary is reported above.
    const pi = s.route?.primary ?? -1;
    const code = pi >= 0 ? (s.status[pi]?.code ?? ReplicaStatus_Code.IDLE) : undefined;
    if (code === undefined) noPrimary.push(id);
    else if (code !== ReplicaStatus_Code.PRIMARY && code !== ReplicaStatus_Code.FAILED) {
      const m = members[pi];
      noPrimary.push(`${id} (primary ${m ? `${m.zone}/${m.suffix} ` : ''}is ${ReplicaStatus_Code[code] ?? code})`);
    }
  }
  out.push(...failed.slice(0, FAILED_SHARDS_SHOWN));
  if (failed.length > FAILED_SHARDS_SHOWN) {
    out.push({ component: 'shards', subject: '', state: 'problem', detail: `${failed.length - FAILED_SHARDS_SHOWN} more FAILED replicas (see gazctl shards list -p -r)` });
  }
  if (noPrimary.length) out.push({ component: 'shards', subject: '', state: 'problem', detail: `${noPrimary.length} enabled without a serving primary: ${someNames(noPrimary)}` });
  if (!out.length) out.push({ component: 'shards', subject: '', state: 'ok', detail: `${shards.length} listed, none FAILED, each enabled one with a serving primary` });
  return out;
}

/** etcd checks of the members' statuses (and failures to get them). */
export function etcdChecks(results: readonly { endpoint: string; status?: EtcdMemberStatus; error?: string }[]): HealthCheck[] {
  const out: HealthCheck[] = [];
  for (const r of results) {
    if (!r.status) {
      out.push({ component: 'etcd', subject: r.endpoint, state: 'problem', detail: r.error ?? 'no status' });
      continue;
    }
    const s = r.status;
    if (s.leader === undefined) out.push({ component: 'etcd', subject: r.endpoint, state: 'problem', detail: `member ${s.memberId} has no leader` });
    // A member without a leader also lists "etcdserver: no leader" among its errors: one line says it.
    const errors = s.leader === undefined ? s.errors.filter((e) => !/no leader/i.test(e)) : s.errors;
    for (const e of errors) out.push({ component: 'etcd', subject: r.endpoint, state: 'problem', detail: `member ${s.memberId} reports: ${e}` });
    if (s.leader !== undefined && !s.errors.length) {
      out.push({ component: 'etcd', subject: r.endpoint, state: 'ok', detail: `member ${s.memberId} (etcd ${s.version}${s.isLearner ? ', learner' : ''}), leader ${s.leader}` });
    }
  }
  return out;
}

/**
 * Runs every check under one deadline (`deadline`, epoch ms) and reports. Never rejects for a
 * service's failure: every failure is a problem line. `signal` abandons the round (Ctrl-C).
 */
export async function checkHealth(p: HealthProbes, deadline: number, signal?: AbortSignal): Promise<HealthReport> {
  // Every probe in flight listens on `signal` (removed when it settles): one per shard and
  // member, more than EventTarget's default of 10 before it warns.
  if (signal) setMaxListeners(0, signal);
  const started = Date.now();
  const budget = () => Math.max(0, deadline - started);
  const checks: HealthCheck[] = [];
  const counts = { brokers: 0, journals: 0, consumers: 0, shards: 0, stores: 0, etcd: 0 };

  const brokers = async () => {
    let journals: ListResponse_Journal[];
    try {
      journals = await bounded(deadline, signal, (s) => p.listJournals(s));
    } catch (err) {
      checks.push({ component: 'broker', subject: p.brokerAddress, state: 'problem', detail: failure(err, budget(), 'List', p.brokerAddress) });
      checks.push({ component: 'store', subject: '', state: 'skipped', detail: 'not checked: no journal listing' });
      return;
    }
    counts.journals = journals.length;
    checks.push({ component: 'broker', subject: p.brokerAddress, state: 'ok', detail: `answered List (${plural(journals.length, 'journal')})` });
    checks.push(...journalChecks(journals));
    const members = routeEndpoints(journals.map((j) => j.route));
    // The configured address may be a member or a balancer in front of them: it counts once.
    counts.brokers = members.size + (members.has(p.brokerAddress) ? 0 : 1);
    members.delete(p.brokerAddress); // just answered
    const stores = [...new Set(journals.flatMap((j) => j.spec?.fragment?.stores ?? []))];
    counts.stores = stores.length;
    await Promise.all([
      ...[...members].map(async ([ep, id]) => {
        try {
          await bounded(deadline, signal, (s) => p.pingBroker(ep, s));
          checks.push({ component: 'broker', subject: `${id} (${ep})`, state: 'ok', detail: 'answered List' });
        } catch (err) {
          checks.push({ component: 'broker', subject: `${id} (${ep})`, state: 'problem', detail: failure(err, budget(), 'List', ep) });
        }
      }),
      ...stores.map(async (store) => {
        try {
          const bad = await bounded(deadline, signal, (s) => p.storeHealth(store, s));
          checks.push({ component: 'store', subject: store, state: bad === undefined ? 'ok' : 'problem', detail: bad === undefined ? 'healthy' : `unhealthy: ${bad.replace(/\s*\n\s*/g, '; ').trim() || 'no reason given'}` });
        } catch (err) {
          checks.push({ component: 'store', subject: store, state: 'problem', detail: failure(err, budget(), 'store health check') });
        }
      }),
    ]);
  };

  const consumers = async () => {
    if (p.consumerAddress === undefined) {
      checks.push({ component: 'consumer', subject: '', state: 'skipped', detail: 'not checked: no consumer address (--consumer.address, CONSUMER_ADDRESS or gazctl.ini)' });
      return;
    }
    let shards: ListResponse_Shard[];
    try {
      shards = await bounded(deadline, signal, (s) => p.listShards(s));
    } catch (err) {
      checks.push({ component: 'consumer', subject: p.consumerAddress, state: 'problem', detail: failure(err, budget(), 'List', p.consumerAddress) });
      return;
    }
    counts.shards = shards.length;
    checks.push({ component: 'consumer', subject: p.consumerAddress, state: 'ok', detail: `answered List (${plural(shards.length, 'shard')})` });
    checks.push(...shardChecks(shards));
    const members = routeEndpoints(shards.map((s) => s.route));
    counts.consumers = members.size + (members.has(p.consumerAddress) ? 0 : 1);
    members.delete(p.consumerAddress);
    await Promise.all([
      ...[...members].map(async ([ep, id]) => {
        try {
          await bounded(deadline, signal, (s) => p.pingConsumer(ep, s));
          checks.push({ component: 'consumer', subject: `${id} (${ep})`, state: 'ok', detail: 'answered List' });
        } catch (err) {
          checks.push({ component: 'consumer', subject: `${id} (${ep})`, state: 'problem', detail: failure(err, budget(), 'List', ep) });
        }
      }),
      progress(shards),
    ]);
  };

  // A serving primary cut off from its brokers still answers List and still shows PRIMARY (its
  // etcd lease is fine): what gives it away is that it reads nothing more. So each serving
  // primary with unread input (a source's write head beyond what the shard has read through)
  // must read through at least one more record of it before the deadline (a Stat with
  // read_through); one that is caught up has nothing to prove.
  const progress = async (shards: readonly ListResponse_Shard[]) => {
    if (!p.statShard || !p.writeHead) return;
    const statShard = p.statShard.bind(p);
    const writeHead = p.writeHead.bind(p);
    const heads = new Map<string, Promise<bigint>>();
    const headOf = (j: string) => {
      let h = heads.get(j);
      if (!h) heads.set(j, (h = bounded(deadline, signal, (s) => writeHead(j, s))));
      return h;
    };
    const serving = shards.filter((s) => !s.spec?.disable && (s.route?.primary ?? -1) >= 0 && s.status[s.route!.primary]?.code === ReplicaStatus_Code.PRIMARY);
    const stalled: HealthCheck[] = [];
    let behind = 0;
    await Promise.all(
      serving.map(async (s) => {
        const id = s.spec!.id;
        const m = s.route!.members[s.route!.primary];
        const on = m ? ` (primary ${m.zone}/${m.suffix})` : '';
        const sources = [...new Set((s.spec?.sources ?? []).map((src) => src.journal))];
        let at: Record<string, bigint>;
        let hs: bigint[];
        try {
          [at, hs] = await Promise.all([bounded(deadline, signal, (sg) => statShard(id, {}, sg)), Promise.all(sources.map(headOf))]);
        } catch (err) {
          stalled.push({ component: 'shard', subject: id, state: 'problem', detail: `${failure(err, budget(), 'Stat or write heads')}${on}` });
          return;
        }
        const want: Record<string, bigint> = {};
        const lag: string[] = [];
        sources.forEach((j, i) => {
          const r = at[j] ?? 0n;
          if (hs[i]! > r) {
            want[j] = r + 1n;
            lag.push(`${j} read through ${r} of ${hs[i]}`);
          }
        });
        if (lag.length === 0) return;
        behind++;
        try {
          await bounded(deadline, signal, (sg) => statShard(id, want, sg));
        } catch (err) {
          const what = err instanceof Timeout ? `made no progress within ${formatGoDuration(BigInt(Math.max(1, Math.round(budget()))) * 1_000_000n)}` : failure(err, budget(), 'Stat');
          stalled.push({ component: 'shard', subject: id, state: 'problem', detail: `${what}${on}: ${someNames(lag)}` });
        }
      }),
    );
    stalled.sort((a, b) => (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0));
    checks.push(...stalled.slice(0, FAILED_SHARDS_SHOWN));
    if (stalled.length > FAILED_SHARDS_SHOWN) {
      checks.push({ component: 'shards', subject: '', state: 'problem', detail: `${stalled.length - FAILED_SHARDS_SHOWN} more serving primaries making no progress` });
    }
    if (!stalled.length && serving.length) {
      checks.push({ component: 'shards', subject: '', state: 'ok', detail: `${serving.length} serving primaries: ${behind} with unread input made progress, ${serving.length - behind} caught up` });
    }
  };

  const etcd = async () => {
    if (p.etcdEndpoints.length === 0) {
      checks.push({ component: 'etcd', subject: '', state: 'skipped', detail: 'not checked: no etcd address (--etcd.address, ETCD_ADDRESS or gazctl.ini [etcd] Address)' });
      return;
    }
    counts.etcd = p.etcdEndpoints.length;
    const results = await Promise.all(
      p.etcdEndpoints.map(async (endpoint) => {
        try {
          return { endpoint, status: await bounded(deadline, signal, (s) => p.etcdStatus(endpoint, s)) };
        } catch (err) {
          return { endpoint, error: failure(err, budget(), 'Status', endpoint) };
        }
      }),
    );
    checks.push(...etcdChecks(results));
  };

  await Promise.all([brokers(), consumers(), etcd()]);
  checks.sort(byComponent);
  return {
    healthy: !checks.some((c) => c.state === 'problem'),
    checks,
    counts,
    consumersChecked: p.consumerAddress !== undefined,
    etcdChecked: p.etcdEndpoints.length > 0,
    elapsedMs: Date.now() - started,
  };
}

const ORDER: Component[] = ['broker', 'journals', 'store', 'consumer', 'shards', 'shard', 'etcd'];

/** Checks in a stable order (probes finish in any order): by component, then subject. */
function byComponent(a: HealthCheck, b: HealthCheck): number {
  return ORDER.indexOf(a.component) - ORDER.indexOf(b.component) || (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0);
}

/** One check as a line: `broker http://b:8080: List did not answer within 10s`. */
export function checkLine(c: HealthCheck): string {
  return c.subject ? `${c.component} ${c.subject}: ${c.detail}` : `${c.component}: ${c.detail}`;
}

export function problems(r: HealthReport): HealthCheck[] {
  return r.checks.filter((c) => c.state === 'problem');
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The last line: `healthy: 2 brokers, 3 journals, …` or `unhealthy: 3 problems`. */
export function summaryLine(r: HealthReport): string {
  const n = problems(r).length;
  if (n > 0) return `unhealthy: ${plural(n, 'problem')}`;
  const parts = [plural(r.counts.brokers, 'broker'), plural(r.counts.journals, 'journal'), plural(r.counts.stores, 'store')];
  parts.push(r.consumersChecked ? `${plural(r.counts.consumers, 'consumer')}, ${plural(r.counts.shards, 'shard')}` : 'consumers not checked');
  parts.push(r.etcdChecked ? plural(r.counts.etcd, 'etcd member') : 'etcd not checked');
  return `healthy: ${parts.join(', ')}`;
}

/** The text report: problems first, one per line; with `verbose` every other check too; the summary last. */
export function renderText(r: HealthReport, verbose: boolean): string {
  const lines = problems(r).map(checkLine);
  if (verbose) for (const c of r.checks) if (c.state !== 'problem') lines.push(`${c.state === 'ok' ? 'ok' : 'skipped'}: ${checkLine(c)}`);
  lines.push(summaryLine(r));
  return lines.join('\n') + '\n';
}

/** The JSON report (one document; `compact` puts it on one line, for --watch). */
export function renderJson(r: HealthReport, compact = false): string {
  const doc = {
    healthy: r.healthy,
    summary: summaryLine(r),
    problems: problems(r).map((c) => ({ component: c.component, subject: c.subject, detail: c.detail, line: checkLine(c) })),
    checks: r.checks,
    counts: r.counts,
    consumers_checked: r.consumersChecked,
    etcd_checked: r.etcdChecked,
    elapsed_ms: r.elapsedMs,
  };
  return JSON.stringify(doc, null, compact ? undefined : 2) + '\n';
}

/** What --watch compares rounds by: the set of problem lines. */
export function problemKey(r: HealthReport): string {
  return problems(r).map(checkLine).sort().join('\n');
}
