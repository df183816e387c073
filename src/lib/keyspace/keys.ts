// Gazette's allocator keyspace layout in etcd, shared by brokers and consumers. Under a root R
// (a raw string prefix without a trailing slash, `/gazette/cluster` for brokers):
//
//   R/items/<id>                          the item's spec (JournalSpec or ShardSpec)
//   R/members/<zone>#<suffix>             a member's spec, under that member's session lease
//   R/assign/<id>#<zone>#<suffix>#<slot>  one replica of an item on a member, under the
//                                         member's lease; slot 0 is the primary
//
// `#` separates the parts. It is the lowest printable ASCII character that shells leave alone,
// and because ids and zones may not contain it or anything below it, sorting the encoded keys
// sorts members by (zone, suffix) and assignments by (item, zone, suffix, slot). The route of an
// item is therefore just its assignments in key order.
import { GazctlError } from '../protocol/errors.js';
import type { ProcessSpec_ID, Route } from '../protocol/gen/broker/protocol.js';

/** Root of the broker keyspace when none is configured. */
export const DEFAULT_BROKER_ROOT = '/gazette/cluster';

export const ITEMS_PREFIX = '/items/';
export const MEMBERS_PREFIX = '/members/';
export const ASSIGNMENTS_PREFIX = '/assign/';
export const KEY_SEPARATOR = '#';

/** A key that does not have the layout its prefix promises. */
export class KeyFormatError extends GazctlError {}

/** One replica slot of an item on a member, as named by an assignment key. */
export interface AssignmentKey {
  /** Item id: a journal name or a shard id. */
  item: string;
  zone: string;
  suffix: string;
  /** 0 for the primary. */
  slot: number;
}

function checkPart(what: string, s: string): void {
  if (s === '') throw new KeyFormatError(`${what} must not be empty`);
  for (let i = 0; i < s.length; i++) {
    // Code units at or below '#' would break the ordering argument above (and '#' the split).
    if (s.charCodeAt(i) <= 0x23) {
      throw new KeyFormatError(`${what} ${JSON.stringify(s)} has a character at or below '#' at index ${i}`);
    }
  }
}

/** `R/items/<id>`. */
export function itemKey(root: string, id: string): string {
  checkPart('item id', id);
  return root + ITEMS_PREFIX + id;
}

/** `R/members/<zone>#<suffix>`. */
export function memberKey(root: string, id: ProcessSpec_ID): string {
  checkPart('member zone', id.zone);
  checkPart('member suffix', id.suffix);
  return root + MEMBERS_PREFIX + id.zone + KEY_SEPARATOR + id.suffix;
}

/** `R/assign/<id>#`: the prefix of every assignment of one item. */
export function assignmentsPrefix(root: string, item: string): string {
  checkPart('item id', item);
  return root + ASSIGNMENTS_PREFIX + item + KEY_SEPARATOR;
}

/** `R/assign/<id>#<zone>#<suffix>#<slot>`. */
export function assignmentKey(root: string, a: AssignmentKey): string {
  if (!Number.isSafeInteger(a.slot)) throw new KeyFormatError(`assignment slot ${a.slot} is not an integer`);
  checkPart('member zone', a.zone);
  checkPart('member suffix', a.suffix);
  return assignmentsPrefix(root, a.item) + a.zone + KEY_SEPARATOR + a.suffix + KEY_SEPARATOR + String(a.slot);
}

function under(root: string, prefix: string, key: string, what: string): string {
  const p = root + prefix;
  if (!key.startsWith(p)) throw new KeyFormatError(`${what} ${JSON.stringify(key)} is not under ${JSON.stringify(p)}`);
  return key.slice(p.length);
}

/** The item id of `R/items/<id>`. */
export function parseItemKey(root: string, key: string): string {
  const rest = under(root, ITEMS_PREFIX, key, 'item key');
  if (rest.split(KEY_SEPARATOR).length !== 1) throw new KeyFormatError(`item key ${JSON.stringify(key)}: expected <id> without '#'`);
  return rest;
}

/** Zone and suffix of `R/members/<zone>#<suffix>`. */
export function parseMemberKey(root: string, key: string): ProcessSpec_ID {
  const parts = under(root, MEMBERS_PREFIX, key, 'member key').split(KEY_SEPARATOR);
  if (parts.length !== 2) throw new KeyFormatError(`member key ${JSON.stringify(key)}: expected <zone>#<suffix>`);
  return { zone: parts[0]!, suffix: parts[1]! };
}

/** The parts of `R/assign/<id>#<zone>#<suffix>#<slot>`. */
export function parseAssignmentKey(root: string, key: string): AssignmentKey {
  const parts = under(root, ASSIGNMENTS_PREFIX, key, 'assignment key').split(KEY_SEPARATOR);
  if (parts.length !== 4) {
    throw new KeyFormatError(`assignment key ${JSON.stringify(key)}: expected <item>#<zone>#<suffix>#<slot>`);
  }
  const [item, zone, suffix, slotText] = parts as [string, string, string, string];
  // The slot is a decimal integer with an optional sign, the grammar Go's strconv.Atoi takes.
  const slot = /^[+-]?[0-9]+$/.test(slotText) ? Number(slotText) : NaN;
  if (!Number.isSafeInteger(slot)) {
    throw new KeyFormatError(`assignment key ${JSON.stringify(key)}: slot ${JSON.stringify(slotText)} is not a decimal integer`);
  }
  return { item, zone, suffix, slot };
}

/**
 * The route the assignment keys of one item describe: members in the order given (callers pass
 * them in key order, as an etcd range returns them), primary = the index of the slot-0 member,
 * or -1 when there is none (should two claim slot 0, the later one). Endpoints are left empty; they come from the member specs.
 */
export function routeFromAssignments(assignments: readonly AssignmentKey[]): Route {
  let primary = -1;
  const members: ProcessSpec_ID[] = [];
  for (const a of assignments) {
    if (a.slot === 0) primary = members.length; // like upstream, a later slot 0 wins
    members.push({ zone: a.zone, suffix: a.suffix });
  }
  return { members, primary, endpoints: [] };
}
