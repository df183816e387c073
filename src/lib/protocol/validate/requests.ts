// Apply requests of the journal and shard services: each change names one item, upserts carry a
// valid spec, and revisions are in range.
import { type ApplyRequest } from '../gen/broker/protocol.js';
import type { ApplyRequest as ShardApplyRequest } from '../gen/consumer/protocol.js';
import { fail, prefixed, q, within } from './common.js';
import { validateJournalName, validateShardID } from './names.js';
import { validateJournalSpec, validateShardSpec } from './specs.js';

function checkRevision(rev: bigint, isDelete: boolean): string | undefined {
  if (rev === -1n) return undefined;
  if (isDelete && rev <= 0n) {
    return `expect_mod_revision ${rev} is invalid for a delete (expected > 0, or -1 to skip the check)`;
  }
  if (rev < 0n) return `expect_mod_revision ${rev} is invalid (expected 0 to create, > 0, or -1 to skip the check)`;
  return undefined;
}

/**
 * Validates a broker ApplyRequest: each change is exactly one of upsert/delete, with valid
 * revisions and specs. With `namesValidated` the caller vouches that every journal name the
 * changes carry has already passed validateJournalName (a hierarchy's terminals are checked
 * while its shape is), so that check is not made a second time.
 */
export function validateJournalApplyRequest(req: ApplyRequest, opts?: { namesValidated?: boolean }): void {
  const checkNames = opts?.namesValidated !== true;
  // Subjects (`changes[i]`) are built only when a check fails.
  const changes = req.changes;
  for (let i = 0; i < changes.length; i++) {
    const ch = changes[i]!;
    if (ch.upsert && ch.delete !== '') {
      fail(`sets both upsert (journal ${q(ch.upsert.name)}) and delete (journal ${q(ch.delete)}); expected exactly one`, changeAt(i));
    }
    if (ch.upsert) {
      try {
        validateJournalSpec(ch.upsert, checkNames);
      } catch (e) {
        throw prefixed(e, changeAt(i));
      }
      const p = checkRevision(ch.expect_mod_revision, false);
      if (p) fail(p, `${changeAt(i)}: journal ${q(ch.upsert.name)}`);
    } else if (ch.delete !== '') {
      if (checkNames) {
        try {
          validateJournalName(ch.delete);
        } catch (e) {
          throw prefixed(e, changeAt(i));
        }
      }
      const p = checkRevision(ch.expect_mod_revision, true);
      if (p) fail(p, `${changeAt(i)}: delete journal ${q(ch.delete)}`);
    } else {
      fail('sets neither upsert nor delete; expected exactly one', changeAt(i));
    }
  }
}

function changeAt(i: number): string {
  return `changes[${i}]`;
}

/** Validates a consumer ApplyRequest: like the broker's, plus primary_hints only with an upsert. */
export function validateShardApplyRequest(req: ShardApplyRequest): void {
  req.changes.forEach((ch, i) => {
    const at = `changes[${i}]`;
    if (ch.upsert && ch.delete !== '') {
      fail(`sets both upsert (shard ${q(ch.upsert.id)}) and delete (shard ${q(ch.delete)}); expected exactly one`, at);
    }
    if (ch.upsert) {
      within(at, () => validateShardSpec(ch.upsert!));
      const p = checkRevision(ch.expect_mod_revision, false);
      if (p) fail(p, `${at}: shard ${q(ch.upsert.id)}`);
      const hints = ch.primary_hints;
      if (hints) {
        const log = ch.upsert.recovery_log_prefix === '' ? '' : `${ch.upsert.recovery_log_prefix}/${ch.upsert.id}`;
        if (log === '') fail('primary_hints given but the shard has no recovery log', `${at}: shard ${q(ch.upsert.id)}`);
        if (hints.log !== log) {
          fail(`primary_hints log ${q(hints.log)} does not match the shard's recovery log ${q(log)}`, `${at}: shard ${q(ch.upsert.id)}`);
        }
      }
    } else if (ch.delete !== '') {
      within(at, () => validateShardID(ch.delete));
      const p = checkRevision(ch.expect_mod_revision, true);
      if (p) fail(p, `${at}: delete shard ${q(ch.delete)}`);
      if (ch.primary_hints) fail('primary_hints are only allowed with an upsert', `${at}: delete shard ${q(ch.delete)}`);
    } else {
      fail('sets neither upsert nor delete; expected exactly one', at);
    }
  });
}
