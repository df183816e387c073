// Label-set algebra used by the spec hierarchies: union, intersection and subtraction, grouped
// by label name. Inputs are expected sorted by name (as valid label sets are); the operations walk
// both lists in step, grouping adjacent labels of the same name, exactly like upstream's merge
// join, so results for unsorted input are deterministic and identical to Go's.
import type { Label } from './gen/broker/protocol.js';

interface Group {
  left: Label[];
  right: Label[];
}

/** Joins two label lists on name, yielding each name's run of labels on either side. */
function* joinByName(lhs: readonly Label[], rhs: readonly Label[]): Generator<Group> {
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
    yield { left: lhs.slice(l, lEnd), right: rhs.slice(r, rEnd) };
    l = lEnd;
    r = rEnd;
  }
}

function sameValues(g: Group): boolean {
  return g.left.length === g.right.length && g.left.every((x, i) => x.value === g.right[i]!.value);
}

const copy = (ls: Label[]) => ls.map((x) => ({ ...x }));

/** Labels of `lhs`, plus those of `rhs` whose name `lhs` lacks (lhs wins per name). */
export function unionLabels(lhs: readonly Label[], rhs: readonly Label[]): Label[] {
  const out: Label[] = [];
  for (const g of joinByName(lhs, rhs)) out.push(...copy(g.left.length ? g.left : g.right));
  return out;
}

/** Names present on both sides with identical value lists (values taken from lhs). */
export function intersectLabels(lhs: readonly Label[], rhs: readonly Label[]): Label[] {
  const out: Label[] = [];
  for (const g of joinByName(lhs, rhs)) if (sameValues(g)) out.push(...copy(g.left));
  return out;
}

/** Labels of `lhs` except names whose value list equals `rhs`'s for that name. */
export function subtractLabels(lhs: readonly Label[], rhs: readonly Label[]): Label[] {
  const out: Label[] = [];
  for (const g of joinByName(lhs, rhs)) if (!sameValues(g)) out.push(...copy(g.left));
  return out;
}

/** Compares strings by UTF-8 bytes, as Go compares strings. */
export function byteCompare(a: string, b: string): number {
  if (a === b) return 0;
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
