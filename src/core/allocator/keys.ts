// The allocator's view of the keyspace layout (items, members, assignments under a root R): the
// formats themselves live in the library's keyspace module, shared with the harness and the
// clients; this module adapts them to the allocator's shapes and adds its stricter reading.
//
// Ordering keys as plain strings orders members by (zone, suffix) and assignments by (item,
// zone, suffix): the allocator relies on that (see the keyspace module for why it holds).
import {
  ASSIGNMENTS_PREFIX,
  KEY_SEPARATOR,
  KeyFormatError,
  MEMBERS_PREFIX,
  ITEMS_PREFIX,
  assignmentKey as formatAssignmentKey,
  assignmentsPrefix,
  itemKey,
  memberKey as formatMemberKey,
  parseAssignmentKey,
  parseItemKey,
  parseMemberKey,
} from '../../lib/keyspace/keys.js';
import { compareStrings } from '../../lib/protocol/labels.js';

export { itemKey, compareStrings };
/** Thrown by the format helpers for a part that cannot be written into a key. */
export { KeyFormatError as KeyPartError };

export interface MemberName {
  zone: string;
  suffix: string;
}

export interface AssignmentName {
  itemId: string;
  zone: string;
  suffix: string;
  slot: number;
}

export type ParsedKey =
  | { kind: 'item'; id: string }
  | ({ kind: 'member' } & MemberName)
  | ({ kind: 'assignment' } & AssignmentName);

export function memberKey(root: string, zone: string, suffix: string): string {
  return formatMemberKey(root, { zone, suffix });
}

/** Prefix shared by every assignment key of one item (ends with the separator). */
export function itemAssignmentsPrefix(root: string, id: string): string {
  return assignmentsPrefix(root, id);
}

export function assignmentKey(root: string, a: AssignmentName): string {
  if (!Number.isInteger(a.slot) || a.slot < 0) throw new KeyFormatError(`slot ${a.slot} is not a non-negative integer`);
  return formatAssignmentKey(root, { item: a.itemId, zone: a.zone, suffix: a.suffix, slot: a.slot });
}

/** The member key an assignment belongs to. */
export function assignmentMemberKey(root: string, a: { zone: string; suffix: string }): string {
  return root + MEMBERS_PREFIX + a.zone + KEY_SEPARATOR + a.suffix;
}

/**
 * Parses a key under `root`. Returns the parsed key, or a string saying why it does not parse.
 * On top of the keyspace module's reading (upstream's: the split on '#' gives exactly the
 * expected parts, the slot is an integer), empty parts, parts with a character below '#' and
 * signed slots are refused: upstream tolerates them when reading but never writes such keys, so
 * the allocator ignores them rather than act on them.
 */
export function parseKey(root: string, key: string): ParsedKey | string {
  if (!key.startsWith(root)) return 'not under the root prefix';
  const rest = key.slice(root.length);
  try {
    if (rest.startsWith(ITEMS_PREFIX)) {
      const id = parseItemKey(root, key);
      return badParts([id]) ?? { kind: 'item', id };
    }
    if (rest.startsWith(MEMBERS_PREFIX)) {
      const m = parseMemberKey(root, key);
      return badParts([m.zone, m.suffix]) ?? { kind: 'member', zone: m.zone, suffix: m.suffix };
    }
    if (rest.startsWith(ASSIGNMENTS_PREFIX)) {
      const slotText = rest.slice(rest.lastIndexOf(KEY_SEPARATOR) + 1);
      const a = parseAssignmentKey(root, key);
      const bad = badParts([a.item, a.zone, a.suffix]);
      if (bad) return bad;
      if (!/^\d+$/.test(slotText)) return `slot ${JSON.stringify(slotText)} is not a decimal integer`;
      return { kind: 'assignment', itemId: a.item, zone: a.zone, suffix: a.suffix, slot: a.slot };
    }
  } catch (err) {
    if (err instanceof KeyFormatError) return err.message;
    throw err;
  }
  return 'unexpected key prefix (not items/, members/ or assign/)';
}

function badParts(parts: string[]): string | undefined {
  for (const p of parts) {
    if (p.length === 0) return 'empty part in key';
    for (let i = 0; i < p.length; i++) {
      if (p.charCodeAt(i) < 0x23) return `character below '#' in key part ${JSON.stringify(p)}`;
    }
  }
  return undefined;
}
