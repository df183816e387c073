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
