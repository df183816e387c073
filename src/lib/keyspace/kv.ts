// etcd key/values as the keyspace hands them out, decoded from etcd3's wire objects, and the range
// end that selects every key under a prefix. Kept apart from the client so that the watch and
// the client can both use them without importing each other.
import type { IKeyValue } from 'etcd3';

export interface KeyValue {
  key: string;
  value: Buffer;
  createRevision: bigint;
  modRevision: bigint;
  version: bigint;
  /** Lease id, 0 when the key has none. */
  lease: bigint;
}

/** The first key after every key that starts with `prefix` (etcd's range end for a prefix). */
export function prefixRangeEnd(prefix: string | Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i] = end[i]! + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // all 0xff (or empty): range to the end of the keyspace
}

/** @internal An int64 as etcd3 hands it out (a decimal string), as a bigint. */
export const big = (s: string | number | undefined): bigint => (s === undefined || s === '' ? 0n : BigInt(s));

/** @internal */
export function decodeKv(kv: IKeyValue): KeyValue {
  return {
    key: Buffer.from(kv.key).toString('utf8'),
    value: Buffer.from(kv.value ?? []),
    createRevision: big(kv.create_revision),
    modRevision: big(kv.mod_revision),
    version: big(kv.version),
    lease: big(kv.lease),
  };
}
