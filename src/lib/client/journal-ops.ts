// Operator actions that are single empty appends: moving a journal's write head to the end of its
// fragment index (reset-head) and asking a broker to suspend a journal. Both use the public
// JournalClient API only.
//
// Background. Brokers refuse appends with INDEX_HAS_GREATER_OFFSET when the fragment index (what
// the stores hold) reaches past the offset the replicating brokers agreed on, which happens when
// etcd or R brokers of a journal were lost: writing at the brokers' offset could write an offset
// twice. An empty append that names an explicit offset equal to the index end makes the primary
// re-synchronise its pipeline there; an explicit offset that is not the journal's current maximum
// is refused with WRONG_APPEND_OFFSET and changes nothing, so the reset is safe on journals that
// are healthy and being written (such a refusal means someone else appended first).
//
// Suspension. An append's `suspend` mode decides what it does to a suspended journal: the default
// (SUSPEND_RESUME) resumes it, SUSPEND_KEEP leaves a partial suspension in place (newer brokers
// only: v0.103.0 refuses the value as "invalid Suspend variant" before doing anything),
// SUSPEND_IF_FLUSHED / SUSPEND_NOW request a suspension.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { AppendRequest_Suspend, JournalSpec_Suspend_Level, Status, type AppendResponse, type FragmentsResponse__Fragment, type JournalSpec } from '../protocol/gen/broker/protocol.js';
import { BrokerStatusError } from '../protocol/errors.js';
import { grpcCode } from './retry.js';
import type { Appender, AppendOptions } from './appender.js';

/** What these helpers need from a client (a JournalClient satisfies it). */
export interface OpsClient {
  append(journal: string, opts?: AppendOptions): Appender;
}

/** The end of the fragment index, from a ListFragments answer (0 when there are none). */
export function indexEnd(fragments: FragmentsResponse__Fragment[]): bigint {
  let end = 0n;
  for (const f of fragments) if (f.spec && f.spec.end > end) end = f.spec.end;
  return end;
}

/** The suspension level of a spec (NONE when absent). */
export function suspendLevel(spec: JournalSpec | undefined): JournalSpec_Suspend_Level {
  return spec?.suspend?.level ?? JournalSpec_Suspend_Level.NONE;
}

export type ResetOutcome =
  /** The broker accepted the empty append: the write head is at `head`. */
  | { kind: 'reset'; head: bigint }
  /** WRONG_APPEND_OFFSET: the journal was written meanwhile, so it is consistent already. */
  | { kind: 'raced' }
  /** SUSPEND_KEEP was asked for and the broker does not know it (nothing happened). */
  | { kind: 'keep-unsupported'; detail: string };

/**
 * Sends one empty append at `offset` (the index end). With `keepSuspension`, the append carries
 * SUSPEND_KEEP so a partial suspension stays; a broker that does not know the mode is reported as
 * `keep-unsupported`. Without it SUSPEND_NO_RESUME is sent: on a journal that is not suspended it
 * acts exactly like the default mode the v0.103.0 gazctl sends, and should the journal have been
 * suspended since it was listed, the broker answers SUSPENDED (thrown) instead of resuming it.
 * Other failures throw (BrokerStatusError / TransportError). No retries: one attempt, as upstream.
 */
export async function resetHeadAt(
  client: OpsClient,
  journal: string,
  offset: bigint,
  opts: { keepSuspension: boolean; signal?: AbortSignal },
): Promise<ResetOutcome> {
  const a = client.append(journal, {
    offset,
    suspend: opts.keepSuspension ? AppendRequest_Suspend.SUSPEND_KEEP : AppendRequest_Suspend.SUSPEND_NO_RESUME,
    signal: opts.signal,
  });
  let res: AppendResponse;
  try {
    res = await a.commit();
  } catch (err) {
    a.abort();
    if (err instanceof BrokerStatusError && err.status === Status.WRONG_APPEND_OFFSET) return { kind: 'raced' };
    if (opts.keepSuspension && isUnknownSuspendMode(err)) return { kind: 'keep-unsupported', detail: (err as Error).message };
    throw err;
  }
  return { kind: 'reset', head: res.commit?.end ?? offset };
}

/**
 * Whether `err` is a broker's refusal of the append's suspend mode at request validation (the Go
 * broker answers such requests with a plain gRPC error whose text names the field).
 */
export function isUnknownSuspendMode(err: unknown): boolean {
  const code = grpcCode(err);
  const e = err as { message?: unknown; details?: unknown } | undefined;
  const text = `${String(e?.message ?? '')} ${String(e?.details ?? '')}`;
  if (code !== undefined && code !== GrpcStatus.UNKNOWN && code !== GrpcStatus.INVALID_ARGUMENT) return false;
  return /invalid Suspend variant/i.test(text);
}

export type SuspendOutcome =
  /** Status OK: the broker did what the mode allows (which may be nothing, see below). */
  | { kind: 'ok'; /** etcd revision the broker answered at. */ revision: bigint }
  /** Status SUSPENDED: the journal is (now or already) suspended. */
  | { kind: 'suspended' };

/**
 * Asks the broker to suspend `journal`: SUSPEND_IF_FLUSHED, or SUSPEND_NOW with `force`. The
 * broker suspends fully when the index is empty; partially when every fragment is persisted and
 * the newest is older than the flush interval (always, with force); otherwise it leaves the
 * journal as it is and answers OK. Both OK and SUSPENDED are success. One attempt.
 */
export async function requestSuspend(client: OpsClient, journal: string, opts: { force: boolean; signal?: AbortSignal }): Promise<SuspendOutcome> {
  const a = client.append(journal, {
    suspend: opts.force ? AppendRequest_Suspend.SUSPEND_NOW : AppendRequest_Suspend.SUSPEND_IF_FLUSHED,
    signal: opts.signal,
  });
  try {
    const res = await a.commit();
    return { kind: 'ok', revision: res.header?.etcd?.revision ?? 0n };
  } catch (err) {
    a.abort();
    if (err instanceof BrokerStatusError && err.status === Status.SUSPENDED) return { kind: 'suspended' };
    throw err;
  }
}

