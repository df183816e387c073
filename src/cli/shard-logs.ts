// The I/O of `shards prune-log` and `shards recover` around the recovery-log library
// (src/lib/recoverylog): a shard client made from the shards options, each shard's recovery log
// and hints, the checks a log must pass before anything of it is deleted (its spec, its stores'
// health as the brokers see it, not suspended), and the deletes of planned fragments in their
// backing stores with gazctl's own store credentials (--file-root for file:// stores), as
// `journals prune` deletes.
import type { JournalClient } from '../lib/client/journal-client.js';
import { ShardClient } from '../lib/client/shard-client.js';
import { mapLimit } from '../lib/concurrency.js';
import { BrokerStatusError } from '../lib/protocol/errors.js';
import { fragmentContentPath } from '../lib/protocol/fragment.js';
import { JournalSpec_Suspend_Level, Status, type Fragment, type JournalSpec } from '../lib/protocol/gen/broker/protocol.js';
import type { GetHintsResponse, ShardSpec } from '../lib/protocol/gen/consumer/protocol.js';
import type { FSMHints } from '../lib/protocol/gen/recoverylog/recorded_op.js';
import { StoreNotFoundError } from '../lib/stores/index.js';
import { unreachableNote, type ServiceOptions } from './base.js';
import type { StoreSet } from './fragments-plan.js';
import type { Logger } from './log.js';
import { Progress } from './progress.js';

/** A ShardClient for the resolved consumer options, with --timeout as its time budget. */
export function makeShardClient(svc: ServiceOptions, log: Logger): ShardClient {
  let told = false;
  return new ShardClient(svc, {
    timeoutMs: svc.timeoutMs,
    onRetry: ({ op, attempt, delayMs, error }) => {
      log.debug(`${op} failed (will retry)`, { attempt, delayMs, err: (error as Error)?.message ?? String(error) });
      const note = told ? undefined : unreachableNote(svc, error, attempt, Boolean(process.stderr.isTTY));
      if (note !== undefined) {
        told = true;
        process.stderr.write(note.replace(/^gazctl: broker /, 'gazctl: consumer '));
      }
    },
  });
}

/** A shard's recovery log, `<recovery_log_prefix>/<id>`; undefined for a shard without one. */
export function recoveryLogOf(spec: Pick<ShardSpec, 'id' | 'recovery_log_prefix'>): string | undefined {
  return spec.recovery_log_prefix === '' ? undefined : `${spec.recovery_log_prefix}/${spec.id}`;
}

/** Where a set of hints came from: `primary`, or `backup.<n>` (etcd `<hint_prefix>/<id>.backup.<n>`). */
export type HintSource = 'primary' | `backup.${number}`;

export interface ShardHints {
  id: string;
  /** The shard's own recovery log. */
  log: string;
  response: GetHintsResponse;
  primary: FSMHints | undefined;
  /** One entry per backup slot, undefined where none is stored. */
  backups: (FSMHints | undefined)[];
}

/** GetHints of each shard (8 at a time), in the order given. */
export async function fetchShardHints(client: ShardClient, shards: { id: string; log: string }[], signal?: AbortSignal): Promise<ShardHints[]> {
  return mapLimit(shards, 8, async (s) => {
    const response = await client.getHints(s.id, { signal });
    return {
      id: s.id,
      log: s.log,
      response,
      primary: response.primary_hints?.hints,
      backups: response.backup_hints.map((b) => b.hints),
    };
  });
}

/**
 * The hints `shards recover` plays: the primary hints when stored, else the first stored backup
 * (backup.0 first), else none (a full replay of the log from its start).
 */
export function pickRecoveryHints(r: Pick<GetHintsResponse, 'primary_hints' | 'backup_hints'>): { source: HintSource; hints: FSMHints } | undefined {
  if (r.primary_hints?.hints) return { source: 'primary', hints: r.primary_hints.hints };
  const i = r.backup_hints.findIndex((b) => b.hints !== undefined);
  return i === -1 ? undefined : { source: `backup.${i}`, hints: r.backup_hints[i]!.hints! };
}

// ---- the gate of a log ----------------------------------------------------------------------

export type LogGate =
  | { ok: true; spec: JournalSpec }
  | { ok: false; kind: 'not-found' | 'unhealthy' | 'suspended' | 'error'; reason: string; spec?: JournalSpec };

/**
 * Whether fragments of `log` may be pruned: its spec can be fetched, it is not fully suspended,
 * and every store of its spec passes the brokers' health check (without the delete probe).
 * Health answers are kept per store for the run (logs of one app share their stores).
 */
export class LogGates {
  private readonly health = new Map<string, Promise<string | undefined>>();

  constructor(private readonly client: JournalClient, private readonly signal?: AbortSignal) {}

  async check(log: string): Promise<LogGate> {
    let spec: JournalSpec | undefined;
    try {
      const res = await this.client.list({ include: { labels: [{ name: 'name', value: log, prefix: false }] }, exclude: { labels: [] } }, { signal: this.signal });
      spec = res.journals.find((j) => j.spec?.name === log)?.spec;
    } catch (e) {
      return { ok: false, kind: 'error', reason: `cannot fetch the journal spec: ${(e as Error).message}` };
    }
    if (spec === undefined) return { ok: false, kind: 'not-found', reason: 'the journal does not exist' };
    if (spec.suspend?.level === JournalSpec_Suspend_Level.FULL) return { ok: false, kind: 'suspended', reason: 'the journal is suspended', spec };
    for (const store of new Set(spec.fragment?.stores ?? [])) {
      let p = this.health.get(store);
      if (p === undefined) {
        p = this.client.fragmentStoreHealth(store, undefined, { signal: this.signal }).then(
          (r) => (r.status === Status.OK ? undefined : `fragment store ${store} is unhealthy: ${oneLine(r.store_health_error)}`),
          (e: Error) => `cannot check fragment store ${store}: ${e.message}`,
        );
        this.health.set(store, p);
      }
      const bad = await p;
      if (bad !== undefined) return { ok: false, kind: 'unhealthy', reason: bad, spec };
    }
    return { ok: true, spec };
  }
}

/** Whether `err` says the journal is suspended (ListFragments of a fully suspended journal). */
export function isSuspended(err: unknown): boolean {
  return err instanceof BrokerStatusError && err.status === Status.SUSPENDED;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, '; ').trim() || 'no reason given';
}

// ---- deletes --------------------------------------------------------------------------------

export type DeleteOutcome =
  | { result: 'deleted' }
  /** The object was not there any more (deleted by a broker's retention, or an earlier run). */
  | { result: 'gone' }
  /** The store refused: no permission, no credentials, or no such bucket. */
  | { result: 'denied'; error: string }
  | { result: 'failed'; error: string };

/** What a fragment's object is called in its backing store. */
export function fragmentObject(f: Fragment): { store: string; path: string } {
  return { store: f.backing_store, path: fragmentContentPath(f) };
}

/**
 * Removes each fragment's object from its backing store, `concurrency` at a time, ticking
 * `progress` (one item and the fragment's content bytes each). Never throws for a fragment: each
 * gets its outcome.
 */
export async function deleteFragments(
  stores: StoreSet,
  fragments: readonly Fragment[],
  opts: { concurrency?: number; progress?: Progress; signal?: AbortSignal } = {},
): Promise<DeleteOutcome[]> {
  return mapLimit(fragments, opts.concurrency ?? 32, async (f): Promise<DeleteOutcome> => {
    const { store: url, path } = fragmentObject(f);
    let out: DeleteOutcome;
    const store = stores.get(url);
    if (opts.signal?.aborted) out = { result: 'failed', error: 'interrupted' };
    else if (store instanceof Error) out = { result: 'failed', error: store.message };
    else {
      const unreachable = await stores.reachable(store);
      if (unreachable !== undefined) out = { result: 'failed', error: unreachable };
      else {
        try {
          await store.remove(path);
          out = { result: 'deleted' };
        } catch (e) {
          if (e instanceof StoreNotFoundError) out = { result: 'gone' };
          else if (store.isAuthError(e)) out = { result: 'denied', error: (e as Error).message };
          else out = { result: 'failed', error: (e as Error).message };
        }
      }
    }
    opts.progress?.tick(1, Number(f.end - f.begin));
    return out;
  });
}
