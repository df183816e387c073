// Label-set algebra used by the spec hierarchies: union, intersection and subtraction, grouped
// by label name. Inputs are expected sorted by name (as valid label sets are); the operations walk
// both lists in step, grouping adjacent labels of the same name, exactly like upstream's merge
// join, so results for unsorted input are deterministic and identical to Go's.
import type { Label } from './gen/broker/protocol.js';

/**
 * Joins two label lists on name: calls `group` with each name's run of labels on either side, as
 * index ranges [l0, l1) of lhs and [r0, r1) of rhs (one of them empty when only one side has it).
 */
function joinByName(lhs: readonly Label[], rhs: readonly Label[], group: (l0: number, l1: number, r0: number, r1: number) => void): void {
  let l = 0;
  let r = 0;
  while (l < lhs.length || r < rhs.length) {
    let c: number;
    if (l === lhs.length) c = 1;
    else if (r === rhs.length) c = -1;
    else if (lhs[l]!.name === rhs[r]!.name) c = 0;
    else c = byteCompare(lhs[l]!.name, rhs[r]!.name) < 0 ? -1 : 1;

    let lEnd = l;
    let rEnd = r;
    if (c <= 0) while (lEnd < lhs.length && lhs[lEnd]!.name === lhs[l]!.name) lEnd++;
    if (c >= 0) while (rEnd < rhs.length && rhs[rEnd]!.name === rhs[r]!.name) rEnd++;
    group(l, lEnd, r, rEnd);
    l = lEnd;
    r = rEnd;
  }
}

/** Whether lhs[l0, l1) and rhs[r0, r1) hold the same values in the same order. */
function sameValues(lhs: readonly Label[], l0: number, l1: number, rhs: readonly Label[], r0: number, r1: number): boolean {
  if (l1 - l0 !== r1 - r0) return false;
  for (let i = 0; i < l1 - l0; i++) if (lhs[l0 + i]!.value !== rhs[r0 + i]!.value) return false;
  return true;
}

function pushCopies(out: Label[], from: readonly Label[], i0: number, i1: number): void {
  for (let i = i0; i < i1; i++) {
    const x = from[i]!;
    out.push({ name: x.name, value: x.value, prefix: x.prefix });
  }
}

/** Labels of `lhs`, plus those of `rhs` whose name `lhs` lacks (lhs wins per name). */
export function unionLabels(lhs: readonly Label[], rhs: readonly Label[]): Label[] {
  const out: Label[] = [];
  joinByName(lhs, rhs, (l0, l1, r0, r1) => (l1 > l0 ? pushCopies(out, lhs, l0, l1) : pushCopies(out, rhs, r0, r1)));
  return out;
}

/** Names present on both sides with identical value lists (values taken from lhs). */
export function intersectLabels(lhs: readonly Label[], rhs: readonly Label[]): Label[] {
  const out: Label[] = [];
  joinByName(lhs, rhs, (l0, l1, r0, r1) => {
    if (sameValues(lhs, l0, l1, rhs, r0, r1)) pushCopies(out, lhs, l0, l1);
  });
  return out;
}

/** Labels of `lhs` except names whose value list equals `rhs`'s for that name. */
export function subtractLabels(lhs: readonly Label[], rhs: readonly Label[]): Label[] {
  const out: Label[] = [];
  joinByName(lhs, rhs, (l0, l1, r0, r1) => {
    if (!sameValues(lhs, l0, l1, rhs, r0, r1)) pushCopies(out, lhs, l0, l1);
  });
  return out;
}

/** Compares strings by UTF-8 bytes, as Go compares strings. */
export function byteCompare(a: string, b: string): number {
  if (a === b) return 0;
  // Below U+D800 UTF-16 code units order as the UTF-8 bytes of their characters do; from the
  // first difference on, only surrogates (characters above U+FFFF) and U+E000-U+FFFF can order
  // differently, and those go through the UTF-8 bytes.
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x < 0xd800 && y < 0xd800) return x < y ? -1 : 1;
    return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
  }
  // One is a prefix of the other and orders first (also where the prefix ends in a high
  // surrogate that the longer one pairs: alone it is EF BF BD, below a pair's leading F0-F4).
  return a.length < b.length ? -1 : 1;
}
