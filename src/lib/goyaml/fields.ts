// Small helpers shared by the journal and shard YAML formats: label lists and durations in both
// directions, and integer ranges.
import type { Node as YNode } from 'yaml';
import { durationToNanos, formatGoDuration, nanosToDuration } from '../protocol/duration.js';
import type { Label } from '../protocol/gen/broker/protocol.js';
import type { Duration } from '../protocol/gen/google/protobuf/duration.js';
import type { StrictDoc, YamlMapping, YamlValue } from './goyaml.js';

export const INT32: [bigint, bigint] = [-(1n << 31n), (1n << 31n) - 1n];
export const UINT32: [bigint, bigint] = [0n, (1n << 32n) - 1n];
export const INT64: [bigint, bigint] = [-(1n << 63n), (1n << 63n) - 1n];

/** Decodes a `labels:` list of `{name, value, prefix}` items; null ⇒ []. */
export function decodeLabels(doc: StrictDoc, node: YNode | null): Label[] {
  const items = doc.sequence(node, 'labels') ?? [];
  return items.map((item, i) => {
    const label: Label = { name: '', value: '', prefix: false };
    for (const e of doc.mapping(item, 'label', ['name', 'value', 'prefix'], `labels[${i}]`)) {
      const path = `labels[${i}].${e.key}`;
      if (e.key === 'name') label.name = doc.string(e.value, path);
      else if (e.key === 'value') label.value = doc.string(e.value, path);
      else label.prefix = doc.bool(e.value, path) ?? false;
    }
    return label;
  });
}

/** Encodes labels as yaml.v2 does: `name` and `value` always, `prefix` only when true. */
export function encodeLabels(labels: readonly Label[]): YamlValue[] {
  return labels.map((l) => {
    const m: YamlMapping = { name: l.name, value: l.value };
    if (l.prefix) m['prefix'] = true;
    return m;
  });
}

/** A Duration from nanoseconds, or undefined for zero. */
export function durationOrUndefined(ns: bigint): Duration | undefined {
  return ns === 0n ? undefined : nanosToDuration(ns);
}

export function nanos(d: Duration | undefined): bigint {
  return durationToNanos(d);
}

/** Sets `m[key]` to the Go duration string of `d` unless it is zero. */
export function putDuration(m: YamlMapping, key: string, d: Duration | undefined): void {
  const ns = durationToNanos(d);
  if (ns !== 0n) m[key] = formatGoDuration(ns);
}

export function cloneLabels(labels: readonly Label[] | undefined): Label[] {
  return (labels ?? []).map((l) => ({ ...l }));
}
