// Fragment objects as a store listing shows them: one row per stored object. The same fragment
// (begin, end and SHA-1 sum) may be stored several times, in several stores or under several
// path postfixes; each copy is its own object here.

import { parseFragmentPath } from '../protocol/fragment.js';

export interface FragmentObject {
  journal: string;
  /** First journal offset held (inclusive). */
  begin: bigint;
  /** Offset after the last one held (exclusive). */
  end: bigint;
  /** SHA-1 of the uncompressed content, 40 lowercase hex digits. */
  sum: string;
  /** URL of the store holding the object, e.g. `s3://bucket/prefix/`. */
  store: string;
  /** Object path relative to the store root: `<journal>/[<postfix>/]<content name>`. */
  path: string;
  /** Stored (possibly compressed) size in bytes. */
  size: number;
  /** Store modification time, unix seconds (0 when unknown). */
  modTime: number;
}

/**
 * Builds a {@link FragmentObject} from one listing entry. `rel` is the path below `<journal>/`
 * (an optional postfix, then the content name); it is checked by `parseFragmentPath`, which
 * throws a ValidationError for anything that is not a fragment name.
 */
export function fragmentObjectFromListing(
  journal: string,
  store: string,
  rel: string,
  size: number,
  modTime: number,
): FragmentObject {
  const f = parseFragmentPath(journal, rel);
  // The name was just checked to be `<begin>-<end>-<40 hex digits><ext>`, and no extension holds
  // a '-', so the sum can be taken from the text (cheaper than re-encoding the parsed digest).
  const slash = rel.lastIndexOf('/');
  const at = rel.indexOf('-', rel.indexOf('-', slash + 1) + 1) + 1;
  return {
    journal,
    begin: f.begin,
    end: f.end,
    sum: rel.slice(at, at + 40).toLowerCase(),
    store,
    path: `${journal}/${rel}`,
    size,
    modTime,
  };
}

/**
 * Parses the listing of one journal into {@link FragmentObject}s, checking each name exactly as
 * `parseFragmentPath` does but without validating the journal name (and the path postfix and
 * extension) again for every object: at listing scale that check is most of the cost.
 *
 * A name takes the fast path when it has the canonical shape (16 lowercase hex digits per
 * offset, a lowercase 40-digit sum) and its postfix and extension have already passed a full
 * `parseFragmentPath` for this journal; the fast path then checks what still varies per object
 * (offsets in int64 range, begin <= end). Anything else goes through `parseFragmentPath`, which
 * throws its ValidationError for a name that is not a fragment. Both paths accept and reject
 * exactly the same names.
 */
export class FragmentObjectParser {
  /** `<postfix>\u0000<extension>` pairs a full parse has accepted. */
  private readonly accepted = new Set<string>();

  constructor(readonly journal: string) {}

  parse(store: string, rel: string, size: number, modTime: number): FragmentObject {
    const slash = rel.lastIndexOf('/');
    const name = slash === -1 ? rel : rel.slice(slash + 1);
    const m = CANONICAL.exec(name);
    const key = m === null ? '' : `${slash === -1 ? '' : rel.slice(0, slash)}\u0000${m[4] ?? ''}`;
    if (m !== null && this.accepted.has(key)) {
      // First hex digit at most 7: the offset fits an int64, as a full parse requires.
      const b = m[1]!;
      const e = m[2]!;
      if (b.charCodeAt(0) <= 0x37 && e.charCodeAt(0) <= 0x37) {
        const begin = BigInt('0x' + b);
        const end = BigInt('0x' + e);
        if (begin <= end) {
          return { journal: this.journal, begin, end, sum: m[3]!, store, path: `${this.journal}/${rel}`, size, modTime };
        }
      }
    }
    const o = fragmentObjectFromListing(this.journal, store, rel, size, modTime);
    if (m !== null) this.accepted.add(key);
    return o;
  }
}

/** `<16 hex>-<16 hex>-<40 hex>[.ext]`, lowercase: the names brokers write. */
const CANONICAL = /^([0-9a-f]{16})-([0-9a-f]{16})-([0-9a-f]{40})(\.[^.\-/]*)?$/;

/** Groups objects by journal, keeping listing order within each journal. */
export function groupByJournal(objects: Iterable<FragmentObject>): Map<string, FragmentObject[]> {
  const out = new Map<string, FragmentObject[]>();
  for (const o of objects) {
    let list = out.get(o.journal);
    if (list === undefined) out.set(o.journal, (list = []));
    list.push(o);
  }
  return out;
}
