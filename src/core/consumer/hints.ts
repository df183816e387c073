// Recovery-log hints of a shard in etcd, as upstream's consumer keeps them:
// - `<hint_prefix>/<shard id>.primary`: hints the primary's recorder builds, stored on a timer
//   (and on an Apply carrying primary hints, by the service), guarded on the assignment still
//   existing with the create revision the primary saw.
// - `<hint_prefix>/<shard id>.backup.<i>` for i < hint_backups: hints verified by a completed
//   recovery. At each recovery the recovered hints go to `.backup.0` and the values there are
//   rotated one slot down, all in one transaction guarded on the assignment and on every slot
//   being as read (the last slot's value falls off).
// Values are JSON as Go's encoding/json writes FSMHints (encodeHints); reads also accept the
// binary protobuf encoding, as upstream does.
import type { FSMHints } from '../../lib/protocol/gen/recoverylog/recorded_op.js';
import type { GetHintsResponse, ShardSpec } from '../../lib/protocol/gen/consumer/protocol.js';
import { ValidationError } from '../../lib/protocol/errors.js';
import { decodeHints, encodeHints } from '../../lib/recoverylog/hints.js';
import type { Compare, Keyspace, TxnOp } from '../../lib/keyspace/client.js';
import type { KeyValue } from '../../lib/keyspace/kv.js';

/** The shard's recovery log, `<recovery_log_prefix>/<id>`, or '' when it has none. */
export function shardRecoveryLog(spec: Pick<ShardSpec, 'id' | 'recovery_log_prefix'>): string {
  return spec.recovery_log_prefix === '' ? '' : `${spec.recovery_log_prefix}/${spec.id}`;
}

/** Key of the hints the primary records. */
export function hintPrimaryKey(spec: Pick<ShardSpec, 'id' | 'hint_prefix'>): string {
  return `${spec.hint_prefix}/${spec.id}.primary`;
}

/** Keys of the backup hints, newest first. */
export function hintBackupKeys(spec: Pick<ShardSpec, 'id' | 'hint_prefix' | 'hint_backups'>): string[] {
  const out: string[] = [];
  for (let i = 0; i < spec.hint_backups; i++) out.push(`${spec.hint_prefix}/${spec.id}.backup.${i}`);
  return out;
}

/**
 * The put of an Apply change carrying primary hints (upstream writes them, as JSON, in the
 * same transaction as the upserted spec).
 */
export function primaryHintsPut(spec: Pick<ShardSpec, 'id' | 'hint_prefix'>, hints: FSMHints): TxnOp {
  return { put: hintPrimaryKey(spec), value: encodeHints(hints) };
}

/** The assignment a primary holds, guarding its hint writes. */
export interface HintsAssignment {
  /** The assignment's etcd key. */
  key: string;
  createRevision: bigint;
}

/** Hints read from etcd, with the key-values read (for guarded rotation). */
export interface FetchedHints {
  log: string;
  /** Primary hints, undefined when the key is absent. */
  primary: FSMHints | undefined;
  /** Backup hints by slot, undefined where absent. */
  backups: (FSMHints | undefined)[];
  /** The primary key-value, then one per backup slot (undefined where absent). */
  kvs: (KeyValue | undefined)[];
}

function decodeStored(kv: KeyValue, log: string): FSMHints {
  try {
    return decodeHints(kv.value, { log });
  } catch (err) {
    throw new ValidationError(`hints at ${kv.key}: ${(err as Error).message}`);
  }
}

/**
 * Reads and validates the primary and backup hints of `spec` (upstream's fetchHints): a stored
 * value that does not decode, fails validation or names another log than the shard's recovery
 * log is an error (ValidationError naming the key).
 */
export async function fetchHints(ks: Keyspace, spec: ShardSpec): Promise<FetchedHints> {
  const log = shardRecoveryLog(spec);
  const keys = [hintPrimaryKey(spec), ...hintBackupKeys(spec)];
  const kvs = await Promise.all(keys.map((k) => ks.get(k)));
  const hints = kvs.map((kv) => (kv ? decodeStored(kv, log) : undefined));
  return { log, primary: hints[0], backups: hints.slice(1), kvs };
}

/** The hints as GetHints answers (status OK; header and extension left to the service). */
export function hintsResponse(h: FetchedHints): Pick<GetHintsResponse, 'primary_hints' | 'backup_hints'> {
  return {
    primary_hints: { hints: h.primary },
    backup_hints: h.backups.map((hints) => ({ hints })),
  };
}

/** The hints recovery starts from: the primary's, else the newest backup, else empty hints of `log`. */
export function pickFirstHints(h: { primary: FSMHints | undefined; backups: (FSMHints | undefined)[] }, log: string): FSMHints {
  if (h.primary) return h.primary;
  for (const b of h.backups) if (b) return b;
  return { log, live_nodes: [], properties: [] };
}

/**
 * Stores the primary's recorded hints (upstream's storeRecordedHints), if the assignment still
 * exists as created. Returns whether they were written. Errors (etcd unavailable) are thrown:
 * recorded hints are advisory, and the caller may log them and retry on its next interval.
 */
export async function storeRecordedHints(ks: Keyspace, spec: ShardSpec, asn: HintsAssignment, hints: FSMHints): Promise<boolean> {
  const res = await ks.txn({
    compare: [{ key: asn.key, target: 'createRevision', result: '=', value: asn.createRevision }],
    success: [{ put: hintPrimaryKey(spec), value: encodeHints(hints) }],
  });
  return res.succeeded;
}

/**
 * Stores hints verified by a completed recovery into `.backup.0`, rotating what was there down
 * one slot in the same transaction (upstream's storeRecoveredHints). The transaction is guarded
 * on the assignment and on each slot it rotates being unchanged since read; a slot that was
 * empty ends the rotation. Throws when the transaction does not apply (a raced change: retry).
 */
export async function storeRecoveredHints(ks: Keyspace, spec: ShardSpec, asn: HintsAssignment, hints: FSMHints): Promise<void> {
  const backups = hintBackupKeys(spec);
  const fetched = await fetchHints(ks, spec);
  const compare: Compare[] = [{ key: asn.key, target: 'createRevision', result: '=', value: asn.createRevision }];
  const success: TxnOp[] = [];
  let value: string | Buffer | undefined = encodeHints(hints);
  for (let i = 0; i < backups.length && value !== undefined; i++) {
    success.push({ put: backups[i]!, value });
    const kv = fetched.kvs[i + 1];
    if (!kv) {
      compare.push({ key: backups[i]!, target: 'modRevision', result: '=', value: 0n });
      value = undefined;
    } else {
      compare.push({ key: backups[i]!, target: 'modRevision', result: '=', value: kv.modRevision });
      value = kv.value;
    }
  }
  const res = await ks.txn({ compare, success });
  if (!res.succeeded) throw new ValidationError(`storing recovered hints of shard ${spec.id}: the assignment or a backup hints key changed meanwhile`);
}
