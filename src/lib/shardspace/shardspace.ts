// The shard set YAML format ("shardspace"): a `common` partial ShardSpec shared by a list of
// `shards`. Decode strictly, validate, flatten into consumer Apply changes, build from a List
// response (hoisting common fields), and encode exactly like Go gazctl.
import type { Node as YNode } from 'yaml';
import { ValidationError } from '../protocol/errors.js';
import type {
  ApplyRequest,
  ApplyRequest_Change,
  ListResponse_Shard,
  ShardSpec,
  ShardSpec_Source,
} from '../protocol/gen/consumer/protocol.js';
import { validateShardApplyRequest, validateShardID } from '../protocol/validate/index.js';
import { GoYamlStream, StrictDoc, decodeStrict, emitGoYaml, type YamlMapping } from '../goyaml/goyaml.js';
import { formatGoDuration } from '../protocol/duration.js';
import type { Duration } from '../protocol/gen/google/protobuf/duration.js';
import type { Label } from '../protocol/gen/broker/protocol.js';
import {
  INT32,
  INT64,
  UINT32,
  cloneLabels,
  decodeLabels,
  durationOrUndefined,
  encodeLabels,
  nanos,
  putDuration,
} from '../goyaml/fields.js';
import { byteCompare, intersectLabels, subtractLabels, unionLabels } from '../protocol/labelsets.js';

/**
 * One shard of a set. `spec` is partial: zero fields take `common`'s value when flattened.
 * `delete`: undefined = unset; `revision`: expected mod revision (0/undefined = create, -1 = any).
 */
export interface ShardSetEntry {
  comment?: string;
  delete?: boolean;
  spec: ShardSpec;
  revision?: bigint;
}

/**
 * A shard set: `common` fields (its `id` is ignored) and the shards, in document order.
 * `commonDelete`: `delete: true` under `common`, which deletes every listed shard (a shard's own
 * `delete: false` keeps it). Upstream's documentation describes this, but its decoder refuses
 * the key; we accept it on input and never write it.
 */
export interface ShardSet {
  common: ShardSpec;
  shards: ShardSetEntry[];
  commonDelete?: boolean;
}

/** A fully-populated deep copy of a (possibly partial) ShardSpec. */
export function normalizeShardSpec(s: Partial<ShardSpec> | undefined): ShardSpec {
  return {
    id: s?.id ?? '',
    sources: (s?.sources ?? []).map((x) => ({ journal: x.journal, min_offset: x.min_offset })),
    recovery_log_prefix: s?.recovery_log_prefix ?? '',
    hint_prefix: s?.hint_prefix ?? '',
    hint_backups: s?.hint_backups ?? 0,
    max_txn_duration: durationOrUndefined(nanos(s?.max_txn_duration)),
    min_txn_duration: durationOrUndefined(nanos(s?.min_txn_duration)),
    disable: s?.disable ?? false,
    hot_standbys: s?.hot_standbys ?? 0,
    labels: { labels: cloneLabels(s?.labels?.labels) },
    disable_wait_for_ack: s?.disable_wait_for_ack ?? false,
    ring_buffer_size: s?.ring_buffer_size ?? 0,
    read_channel_size: s?.read_channel_size ?? 0,
  };
}

const labelsOf = (s: ShardSpec) => s.labels?.labels ?? [];
const sourcesEq = (a: readonly ShardSpec_Source[], b: readonly ShardSpec_Source[]) =>
  a.length === b.length && a.every((x, i) => x.journal === b[i]!.journal && x.min_offset === b[i]!.min_offset);

/** Zero fields of `a` take `b`'s value; labels merge per name (a wins); sources taken whole. */
function unionShardSpecs(a0: ShardSpec, b0: ShardSpec): ShardSpec {
  const a = normalizeShardSpec(a0);
  const b = normalizeShardSpec(b0);
  if (a.sources.length === 0) a.sources = b.sources;
  if (a.recovery_log_prefix === '') a.recovery_log_prefix = b.recovery_log_prefix;
  if (a.hint_prefix === '') a.hint_prefix = b.hint_prefix;
  if (a.hint_backups === 0) a.hint_backups = b.hint_backups;
  if (nanos(a.max_txn_duration) === 0n) a.max_txn_duration = b.max_txn_duration;
  if (nanos(a.min_txn_duration) === 0n) a.min_txn_duration = b.min_txn_duration;
  if (!a.disable) a.disable = b.disable;
  if (a.hot_standbys === 0) a.hot_standbys = b.hot_standbys;
  a.labels = { labels: unionLabels(labelsOf(a), labelsOf(b)) };
  if (!a.disable_wait_for_ack) a.disable_wait_for_ack = b.disable_wait_for_ack;
  if (a.ring_buffer_size === 0) a.ring_buffer_size = b.ring_buffer_size;
  if (a.read_channel_size === 0) a.read_channel_size = b.read_channel_size;
  return a;
}

// ---------------------------------------------------------------------------------------------
// Decoding.

const SPEC_KEYS = [
  'id', 'sources', 'recovery_log_prefix', 'hint_prefix', 'hint_backups', 'max_txn_duration',
  'min_txn_duration', 'disable', 'hot_standbys', 'labels', 'disable_wait_for_ack',
  'ring_buffer_size', 'read_channel_size',
] as const;
const ENTRY_ONLY_KEYS = ['comment', 'delete', 'revision'] as const;
/** Keys of shard entries that `common` does not take (`delete` it does: see ShardSet). */
const COMMON_REFUSED_KEYS = ['comment', 'revision'] as const;

function decodeSpecField(doc: StrictDoc, spec: ShardSpec, key: string, v: YNode | null): void {
  switch (key) {
    case 'id':
      spec.id = doc.string(v, 'id');
      break;
    case 'sources': {
      const items = doc.sequence(v, 'sources') ?? [];
      spec.sources = items.map((item, i) => {
        const src: ShardSpec_Source = { journal: '', min_offset: 0n };
        for (const e of doc.mapping(item, 'source', ['journal', 'min_offset'], `sources[${i}]`)) {
          if (e.key === 'journal') src.journal = doc.string(e.value, `sources[${i}].journal`);
          else src.min_offset = doc.int(e.value, `sources[${i}].min_offset`, ...INT64);
        }
        return src;
      });
      break;
    }
    case 'recovery_log_prefix':
    case 'hint_prefix':
      spec[key] = doc.string(v, key);
      break;
    case 'hint_backups':
      spec.hint_backups = Number(doc.int(v, key, ...INT32));
      break;
    case 'max_txn_duration':
    case 'min_txn_duration':
      spec[key] = durationOrUndefined(doc.duration(v, key));
      break;
    case 'disable':
    case 'disable_wait_for_ack':
      spec[key] = doc.bool(v, key) ?? false;
      break;
    case 'hot_standbys':
    case 'ring_buffer_size':
    case 'read_channel_size':
      spec[key] = Number(doc.int(v, key, ...UINT32));
      break;
    case 'labels':
      spec.labels = { labels: decodeLabels(doc, v) };
      break;
  }
}

/**
 * Strictly decodes a shard set document (`common:` and `shards:`). Unknown or duplicate keys and
 * ill-typed values are `line N: ...` errors; `revision` and `comment` are only valid on shard
 * entries. `delete` is valid on both (`common: {delete: true}` deletes every listed shard, which
 * upstream documents but its decoder refuses). Empty input decodes to an empty set, as Go's
 * yaml.v2 does.
 */
export function decodeShardSet(text: string): ShardSet {
  return decodeStrict(text, (doc) => decodeShardSetDoc(doc));
}

function decodeShardSetDoc(doc: StrictDoc): ShardSet {
  const set: ShardSet = { common: normalizeShardSpec(undefined), shards: [] };
  for (const e of doc.mapping(doc.root, 'shard set', ['common', 'shards'])) {
    if (e.key === 'common') {
      const c = doc.deref(e.value);
      if (c && !doc.isNull(c)) {
        // Give entry-only keys a specific message before the generic strict check.
        for (const ce of doc.mapping(c, 'common', [...SPEC_KEYS, ...ENTRY_ONLY_KEYS], 'common')) {
          if ((COMMON_REFUSED_KEYS as readonly string[]).includes(ce.key)) {
            doc.fail(ce.keyNode, `unknown field ${JSON.stringify(ce.key)} in common (a ShardSpec; ${ce.key} is only allowed on shard entries)`);
          }
          if (ce.key === 'delete') {
            const d = doc.bool(ce.value, 'common.delete');
            if (d !== undefined) set.commonDelete = d;
            continue;
          }
          decodeSpecField(doc, set.common, ce.key, ce.value);
        }
      }
    } else {
      for (const item of doc.sequence(e.value, 'shards') ?? []) {
        const entry: ShardSetEntry = { spec: normalizeShardSpec(undefined) };
        for (const se of doc.mapping(item, 'shard', [...ENTRY_ONLY_KEYS, ...SPEC_KEYS])) {
          if (se.key === 'comment') entry.comment = doc.string(se.value, 'comment');
          else if (se.key === 'delete') {
            const d = doc.bool(se.value, 'delete');
            if (d !== undefined) entry.delete = d;
          } else if (se.key === 'revision') entry.revision = doc.int(se.value, 'revision', ...INT64);
          else decodeSpecField(doc, entry.spec, se.key, se.value);
        }
        set.shards.push(entry);
      }
    }
  }
  return set;
}

// ---------------------------------------------------------------------------------------------
// Validation, flattening, hoisting.

/** Checks the set's shape: every shard has a valid, unique id. Specs are validated after flattening. */
export function validateShardSet(set: ShardSet): void {
  const seen = new Set<string>();
  set.shards.forEach((s, i) => {
    try {
      validateShardID(s.spec.id);
    } catch (err) {
      if (err instanceof ValidationError) throw new ValidationError(err.message, `shards[${i}].id`);
      throw err;
    }
    if (seen.has(s.spec.id)) throw new ValidationError(`duplicate shard id ${JSON.stringify(s.spec.id)}`, `shards[${i}]`);
    seen.add(s.spec.id);
  });
}

/**
 * One change per shard in list order: zero fields take common's values; a shard whose `delete`
 * is true (its own, or else common's) becomes a delete by id at its revision.
 */
export function flattenShardSet(set: ShardSet): ApplyRequest_Change[] {
  return set.shards.map((s) => {
    const expect_mod_revision = s.revision ?? 0n;
    if ((s.delete ?? set.commonDelete) === true) {
      return { expect_mod_revision, upsert: undefined, delete: s.spec.id, primary_hints: undefined };
    }
    const spec = unionShardSpecs(s.spec, set.common);
    spec.id = s.spec.id;
    return { expect_mod_revision, upsert: spec, delete: '', primary_hints: undefined };
  });
}

/** Validates the set, flattens it, and validates the resulting consumer ApplyRequest. */
export function buildShardApplyRequest(set: ShardSet): ApplyRequest {
  validateShardSet(set);
  const req: ApplyRequest = { changes: flattenShardSet(set), extension: Buffer.alloc(0) };
  validateShardApplyRequest(req);
  return req;
}

/** Whether two durations are the same length of time (either may be absent: zero). */
function sameDuration(a: Duration | undefined, b: Duration | undefined): boolean {
  // Most often both absent or both the same normalised value: no bigint arithmetic.
  if (a === b) return true;
  if ((a?.seconds ?? 0n) === (b?.seconds ?? 0n) && (a?.nanos ?? 0) === (b?.nanos ?? 0)) return true;
  return nanos(a) === nanos(b);
}

/** Whether two label lists hold the same names and values in the same order (prefix aside). */
function sameLabelValues(a: readonly Label[], b: readonly Label[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.name !== b[i]!.name || a[i]!.value !== b[i]!.value) return false;
  return true;
}

/**
 * Whether intersecting `common` with `labels` leaves `common` as it is, told without the merge
 * join where it is plain: both lists strictly sorted by name (one value per name, as the labels
 * of a shard usually are) and every common label found in `labels` with its value. Anything else
 * answers false, and the caller joins.
 */
function keepsAll(common: readonly Label[], labels: readonly Label[]): boolean {
  if (sameLabelValues(common, labels)) return true;
  let j = 0;
  for (let i = 0; i < common.length; i++) {
    const c = common[i]!;
    if (i > 0 && byteCompare(common[i - 1]!.name, c.name) >= 0) return false;
    while (j < labels.length && labels[j]!.name !== c.name) {
      if (j > 0 && byteCompare(labels[j - 1]!.name, labels[j]!.name) >= 0) return false;
      j++;
    }
    if (j === labels.length || labels[j]!.value !== c.value) return false;
    if (j > 0 && byteCompare(labels[j - 1]!.name, labels[j]!.name) >= 0) return false;
    j++;
  }
  // The rest of `labels` must be sorted too (a repeat of a common name there would be a group
  // of two values, which the join would not match).
  for (; j < labels.length; j++) if (j > 0 && byteCompare(labels[j - 1]!.name, labels[j]!.name) >= 0) return false;
  return true;
}

/** Zeroes the fields of `common` (normalised, owned) that `spec` does not share. */
function intersectInto(common: ShardSpec, spec: Partial<ShardSpec>): void {
  if (common.sources.length !== 0 && !sourcesEq(common.sources, spec.sources ?? [])) common.sources = [];
  if (common.recovery_log_prefix !== (spec.recovery_log_prefix ?? '')) common.recovery_log_prefix = '';
  if (common.hint_prefix !== (spec.hint_prefix ?? '')) common.hint_prefix = '';
  if (common.hint_backups !== (spec.hint_backups ?? 0)) common.hint_backups = 0;
  if (!sameDuration(common.max_txn_duration, spec.max_txn_duration)) common.max_txn_duration = undefined;
  if (!sameDuration(common.min_txn_duration, spec.min_txn_duration)) common.min_txn_duration = undefined;
  if (common.disable !== (spec.disable ?? false)) common.disable = false;
  if (common.hot_standbys !== (spec.hot_standbys ?? 0)) common.hot_standbys = 0;
  const labels = spec.labels?.labels ?? [];
  // Lists that keep every common label intersect to the common list: only others need the join.
  if (labelsOf(common).length !== 0 && !keepsAll(labelsOf(common), labels)) common.labels = { labels: intersectLabels(labelsOf(common), labels) };
  if (common.disable_wait_for_ack !== (spec.disable_wait_for_ack ?? false)) common.disable_wait_for_ack = false;
  if (common.ring_buffer_size !== (spec.ring_buffer_size ?? 0)) common.ring_buffer_size = 0;
  if (common.read_channel_size !== (spec.read_channel_size ?? 0)) common.read_channel_size = 0;
}

/** The fields of `spec` that differ from `common`'s (a new, normalised spec; its id is spec's). */
function subtractFrom(spec: Partial<ShardSpec>, common: ShardSpec): ShardSpec {
  const sources = spec.sources ?? [];
  const labels = spec.labels?.labels ?? [];
  const commonLabels = labelsOf(common);
  const out: ShardSpec = {
    id: spec.id ?? '',
    sources: sourcesEq(sources, common.sources) ? [] : sources.map((x) => ({ journal: x.journal, min_offset: x.min_offset })),
    recovery_log_prefix: spec.recovery_log_prefix === common.recovery_log_prefix ? '' : (spec.recovery_log_prefix ?? ''),
    hint_prefix: spec.hint_prefix === common.hint_prefix ? '' : (spec.hint_prefix ?? ''),
    hint_backups: spec.hint_backups === common.hint_backups ? 0 : (spec.hint_backups ?? 0),
    max_txn_duration: sameDuration(spec.max_txn_duration, common.max_txn_duration) ? undefined : durationOrUndefined(nanos(spec.max_txn_duration)),
    min_txn_duration: sameDuration(spec.min_txn_duration, common.min_txn_duration) ? undefined : durationOrUndefined(nanos(spec.min_txn_duration)),
    disable: spec.disable === common.disable ? false : (spec.disable ?? false),
    hot_standbys: spec.hot_standbys === common.hot_standbys ? 0 : (spec.hot_standbys ?? 0),
    labels: {
      labels:
        commonLabels.length === 0 ? cloneLabels(labels) : sameLabelValues(labels, commonLabels) ? [] : subtractLabels(labels, commonLabels),
    },
    disable_wait_for_ack: spec.disable_wait_for_ack === common.disable_wait_for_ack ? false : (spec.disable_wait_for_ack ?? false),
    ring_buffer_size: spec.ring_buffer_size === common.ring_buffer_size ? 0 : (spec.ring_buffer_size ?? 0),
    read_channel_size: spec.read_channel_size === common.read_channel_size ? 0 : (spec.read_channel_size ?? 0),
  };
  return out;
}

/**
 * Builds a set from a listing: `common` = fields equal in all shards, removed from each shard.
 * Labels are compared per name (a name whose values are the same in all shards is common).
 */
export function shardSetFromListing(shards: readonly ListResponse_Shard[]): ShardSet {
  // One pass narrows the first shard's fields to the common ones, a second takes the rest of each.
  const common = normalizeShardSpec(shards[0]?.spec);
  common.id = '';
  for (let i = 1; i < shards.length; i++) intersectInto(common, shards[i]!.spec ?? {});
  return {
    common,
    shards: shards.map((s) => {
      const e: ShardSetEntry = { spec: subtractFrom(s.spec ?? {}, common) };
      if (s.mod_revision !== 0n) e.revision = s.mod_revision;
      return e;
    }),
  };
}

// ---------------------------------------------------------------------------------------------
// Encoding.

function specToYaml(s: ShardSpec, m: YamlMapping): YamlMapping {
  if (s.id) m['id'] = s.id;
  if (s.sources.length) {
    m['sources'] = s.sources.map((x) => {
      const sm: YamlMapping = { journal: x.journal };
      if (x.min_offset !== 0n) sm['min_offset'] = x.min_offset;
      return sm;
    });
  }
  if (s.recovery_log_prefix) m['recovery_log_prefix'] = s.recovery_log_prefix;
  if (s.hint_prefix) m['hint_prefix'] = s.hint_prefix;
  if (s.hint_backups) m['hint_backups'] = s.hint_backups;
  putDuration(m, 'max_txn_duration', s.max_txn_duration);
  putDuration(m, 'min_txn_duration', s.min_txn_duration);
  if (s.disable) m['disable'] = true;
  if (s.hot_standbys) m['hot_standbys'] = s.hot_standbys;
  const labels = labelsOf(s);
  if (labels.length) m['labels'] = encodeLabels(labels);
  if (s.disable_wait_for_ack) m['disable_wait_for_ack'] = true;
  if (s.ring_buffer_size) m['ring_buffer_size'] = s.ring_buffer_size;
  if (s.read_channel_size) m['read_channel_size'] = s.read_channel_size;
  return m;
}

/** A set through the generic emitter (mappings first, then emitGoYaml); kept to check the stream against. */
export function encodeShardSetGeneric(set: ShardSet): string {
  return emitGoYaml({
    common: specToYaml(normalizeShardSpec(set.common), {}),
    shards: set.shards.map((e) => {
      const m: YamlMapping = {};
      if (e.comment) m['comment'] = e.comment;
      if (e.delete !== undefined) m['delete'] = e.delete;
      specToYaml(normalizeShardSpec(e.spec), m);
      if (e.revision !== undefined && e.revision !== 0n) m['revision'] = e.revision;
      return m;
    }),
  });
}

/** Encodes a set as Go gazctl does: `common` always (`{}` when empty), `shards` always (`[]`). */
export function encodeShardSet(set: ShardSet): string {
  const out = new GoYamlStream();
  writeShardSet(out, set);
  return out.finish();
}

/** {@link encodeShardSet} as UTF-8 bytes (what a listing writes to its output). */
export function encodeShardSetBytes(set: ShardSet): Buffer {
  const out = new GoYamlStream();
  writeShardSet(out, set);
  return out.finishBytes();
}

// Streaming encoder: writes what encodeShardSetGeneric writes, field by field, without the
// intermediate mappings (a listing of 10,000 shards would build and drop some 50,000 of them).

function writeShardSet(out: GoYamlStream, set: ShardSet): void {
  out.key('common', 0, true);
  if (specHasFields(set.common)) writeSpec(out, set.common, 2, false);
  else out.flow('{}');
  out.key('shards', 0, false);
  if (set.shards.length === 0) out.flow('[]');
  for (const e of set.shards) {
    out.dash(0);
    if (!entryHasFields(e)) {
      out.flow('{}');
      continue;
    }
    out.itemMapping();
    let first = true;
    if (e.comment) {
      out.key('comment', 2, first);
      first = false;
      out.scalar(e.comment, 2);
    }
    if (e.delete !== undefined) {
      out.key('delete', 2, first);
      first = false;
      out.scalar(e.delete, 2);
    }
    first = writeSpec(out, e.spec, 2, first);
    if (e.revision !== undefined && e.revision !== 0n) {
      out.key('revision', 2, first);
      out.scalar(e.revision, 2);
    }
  }
}

/** Whether specToYaml would write any field of `s`. */
function specHasFields(s: Partial<ShardSpec>): boolean {
  return (
    !!s.id ||
    (s.sources?.length ?? 0) !== 0 ||
    !!s.recovery_log_prefix ||
    !!s.hint_prefix ||
    !!s.hint_backups ||
    nanos(s.max_txn_duration) !== 0n ||
    nanos(s.min_txn_duration) !== 0n ||
    !!s.disable ||
    !!s.hot_standbys ||
    (s.labels?.labels.length ?? 0) !== 0 ||
    !!s.disable_wait_for_ack ||
    !!s.ring_buffer_size ||
    !!s.read_channel_size
  );
}

function entryHasFields(e: ShardSetEntry): boolean {
  return !!e.comment || e.delete !== undefined || specHasFields(e.spec) || (e.revision !== undefined && e.revision !== 0n);
}

function writeDuration(out: GoYamlStream, key: string, d: Duration | undefined, indent: number, first: boolean): boolean {
  const ns = nanos(d);
  if (ns === 0n) return first;
  out.key(key, indent, first);
  out.scalar(formatGoDuration(ns), indent);
  return false;
}

/**
 * Writes the fields of `s` that are set, in specToYaml's order, as keys at column `indent`
 * (`first`: the first key goes on the current line); returns whether no key was written and
 * `first` still holds.
 */
function writeSpec(out: GoYamlStream, s: Partial<ShardSpec>, indent: number, first: boolean): boolean {
  const key = (k: string) => {
    out.key(k, indent, first);
    first = false;
  };
  if (s.id) {
    key('id');
    out.scalar(s.id, indent);
  }
  const sources = s.sources ?? [];
  if (sources.length) {
    key('sources');
    for (const x of sources) {
      out.dash(indent);
      out.itemMapping();
      out.key('journal', indent + 2, true);
      out.scalar(x.journal, indent + 2);
      if (x.min_offset !== 0n) {
        out.key('min_offset', indent + 2, false);
        out.scalar(x.min_offset, indent + 2);
      }
    }
  }
  if (s.recovery_log_prefix) {
    key('recovery_log_prefix');
    out.scalar(s.recovery_log_prefix, indent);
  }
  if (s.hint_prefix) {
    key('hint_prefix');
    out.scalar(s.hint_prefix, indent);
  }
  if (s.hint_backups) {
    key('hint_backups');
    out.scalar(s.hint_backups, indent);
  }
  first = writeDuration(out, 'max_txn_duration', s.max_txn_duration, indent, first);
  first = writeDuration(out, 'min_txn_duration', s.min_txn_duration, indent, first);
  if (s.disable) {
    key('disable');
    out.scalar(true, indent);
  }
  if (s.hot_standbys) {
    key('hot_standbys');
    out.scalar(s.hot_standbys, indent);
  }
  const labels = s.labels?.labels ?? [];
  if (labels.length) {
    key('labels');
    out.labelItems(labels, indent);
  }
  if (s.disable_wait_for_ack) {
    key('disable_wait_for_ack');
    out.scalar(true, indent);
  }
  if (s.ring_buffer_size) {
    key('ring_buffer_size');
    out.scalar(s.ring_buffer_size, indent);
  }
  if (s.read_channel_size) {
    key('read_channel_size');
    out.scalar(s.read_channel_size, indent);
  }
  return first;
}
