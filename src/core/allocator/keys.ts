// Key layout of the allocator keyspace, shared by brokers and consumers. Everything lives under a
// root prefix R (a raw string prefix without a trailing slash):
//
//   R/items/<id>                                   one key per item (journal or shard spec)
//   R/members/<zone>#<suffix>                      one key per member, under the member's lease
//   R/assign/<item id>#<zone>#<suffix>#<slot>      one key per replica, under the member's lease
//
// '#' separates the parts. It is the lowest printable ASCII character that shells leave alone,
// and because nothing in a part may sort at or below it, ordering keys as plain strings orders
// members by (zone, suffix) and assignments by (item, zone, suffix): the allocator relies on that.
// Slot 0 is the primary; other slots carry no meaning beyond their order.
//
// These helpers are local to the allocator for now; they are meant to move into the keyspace
// module once it exists.

export const SEP = '#';
export const ITEMS = '/items/';
export const MEMBERS = '/members/';
export const ASSIGN = '/assign/';

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

/** Thrown by the format helpers when a part contains a character at or below '#'. */
export class KeyPartError extends Error {}

function checkPart(what: string, part: string): void {
  for (let i = 0; i < part.length; i++) {
    if (part.charCodeAt(i) <= 0x23) {
      throw new KeyPartError(`${what} ${JSON.stringify(part)} has a character at or below '#' (index ${i})`);
    }
  }
}

export function itemKey(root: string, id: string): string {
  checkPart('item id', id);
  return root + ITEMS + id;
}

export function memberKey(root: string, zone: string, suffix: string): string {
  checkPart('member zone', zone);
  checkPart('member suffix', suffix);
  return root + MEMBERS + zone + SEP + suffix;
}

/** Prefix shared by every assignment key of one item (ends with the separator). */
export function itemAssignmentsPrefix(root: string, id: string): string {
  checkPart('item id', id);
  return root + ASSIGN + id + SEP;
}

export function assignmentKey(root: string, a: AssignmentName): string {
  checkPart('member zone', a.zone);
  checkPart('member suffix', a.suffix);
  if (!Number.isInteger(a.slot) || a.slot < 0) throw new KeyPartError(`slot ${a.slot} is not a non-negative integer`);
  return itemAssignmentsPrefix(root, a.itemId) + a.zone + SEP + a.suffix + SEP + String(a.slot);
}

/** The member key an assignment belongs to. */
export function assignmentMemberKey(root: string, a: { zone: string; suffix: string }): string {
  return root + MEMBERS + a.zone + SEP + a.suffix;
}

/**
 * Parses a key under `root`. Returns the parsed key, or a string saying why it does not parse.
 * Like upstream, the split on '#' must give exactly the expected number of parts; the slot must be
 * a decimal integer. Stricter than upstream's parser: empty parts and parts with a character below
 * '#' are refused too (upstream accepts them when reading but can never write such keys).
 */
export function parseKey(root: string, key: string): ParsedKey | string {
  if (!key.startsWith(root)) return 'not under the root prefix';
  const rest = key.slice(root.length);
  if (rest.startsWith(ITEMS)) {
    const p = rest.slice(ITEMS.length).split(SEP);
    if (p.length !== 1) return 'expected <id> in item key';
    return badParts(p) ?? { kind: 'item', id: p[0]! };
  }
  if (rest.startsWith(MEMBERS)) {
    const p = rest.slice(MEMBERS.length).split(SEP);
    if (p.length !== 2) return 'expected <zone>#<suffix> in member key';
    return badParts(p) ?? { kind: 'member', zone: p[0]!, suffix: p[1]! };
  }
  if (rest.startsWith(ASSIGN)) {
    const p = rest.slice(ASSIGN.length).split(SEP);
    if (p.length !== 4) return 'expected <item id>#<zone>#<suffix>#<slot> in assignment key';
    const bad = badParts(p);
    if (bad) return bad;
    if (!/^\d+$/.test(p[3]!)) return `slot ${JSON.stringify(p[3])} is not a decimal integer`;
    const slot = Number(p[3]);
    if (!Number.isSafeInteger(slot)) return `slot ${p[3]} is out of range`;
    return { kind: 'assignment', itemId: p[0]!, zone: p[1]!, suffix: p[2]!, slot };
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

/**
 * Orders strings as etcd orders keys: by their UTF-8 bytes. That equals UTF-16 code-unit order
 * except that astral characters (surrogate pairs) sort after U+E000..U+FFFF, fixed up here.
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return byteRank(x) < byteRank(y) ? -1 : 1;
  }
  return a.length < b.length ? -1 : 1;
}

function byteRank(c: number): number {
  if (c < 0xd800) return c;
  return c < 0xe000 ? c + 0x2000 : c - 0x800; // surrogates above U+E000..U+FFFF
}
