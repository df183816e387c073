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
import { StrictDoc, decodeStrict, emitGoYaml, type YamlMapping } from '../goyaml/goyaml.js';
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
import { intersectLabels, subtractLabels, unionLabels } from '../protocol/labelsets.js';

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

function intersectShardSpecs(a0: ShardSpec, b0: ShardSpec): ShardSpec {
  const a = normalizeShardSpec(a0);
  const b = normalizeShardSpec(b0);
  if (!sourcesEq(a.sources, b.sources)) a.sources = [];
  if (a.recovery_log_prefix !== b.recovery_log_prefix) a.recovery_log_prefix = '';
  if (a.hint_prefix !== b.hint_prefix) a.hint_prefix = '';
  if (a.hint_backups !== b.hint_backups) a.hint_backups = 0;
  if (nanos(a.max_txn_duration) !== nanos(b.max_txn_duration)) a.max_txn_duration = undefined;
  if (nanos(a.min_txn_duration) !== nanos(b.min_txn_duration)) a.min_txn_duration = undefined;
  if (a.disable !== b.disable) a.disable = false;
  if (a.hot_standbys !== b.hot_standbys) a.hot_standbys = 0;
  a.labels = { labels: intersectLabels(labelsOf(a), labelsOf(b)) };
  if (a.disable_wait_for_ack !== b.disable_wait_for_ack) a.disable_wait_for_ack = false;
  if (a.ring_buffer_size !== b.ring_buffer_size) a.ring_buffer_size = 0;
  if (a.read_channel_size !== b.read_channel_size) a.read_channel_size = 0;
  return a;
}

function subtractShardSpecs(a0: ShardSpec, b0: ShardSpec): ShardSpec {
  const a = normalizeShardSpec(a0);
  const b = normalizeShardSpec(b0);
  if (sourcesEq(a.sources, b.sources)) a.sources = [];
  if (a.recovery_log_prefix === b.recovery_log_prefix) a.recovery_log_prefix = '';
  if (a.hint_prefix === b.hint_prefix) a.hint_prefix = '';
  if (a.hint_backups === b.hint_backups) a.hint_backups = 0;
  if (nanos(a.max_txn_duration) === nanos(b.max_txn_duration)) a.max_txn_duration = undefined;
  if (nanos(a.min_txn_duration) === nanos(b.min_txn_duration)) a.min_txn_duration = undefined;
  if (a.disable === b.disable) a.disable = false;
  if (a.hot_standbys === b.hot_standbys) a.hot_standbys = 0;
  a.labels = { labels: subtractLabels(labelsOf(a), labelsOf(b)) };
  if (a.disable_wait_for_ack === b.disable_wait_for_ack) a.disable_wait_for_ack = false;
  if (a.ring_buffer_size === b.ring_buffer_size) a.ring_buffer_size = 0;
  if (a.read_channel_size === b.read_channel_size) a.read_channel_size = 0;
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

/** Builds a set from a listing: `common` = fields equal in all shards, removed from each shard. */
export function shardSetFromListing(shards: readonly ListResponse_Shard[]): ShardSet {
  let common = normalizeShardSpec(undefined);
  shards.forEach((s, i) => {
    if (i === 0) common = { ...normalizeShardSpec(s.spec), id: '' };
    else common = intersectShardSpecs(common, normalizeShardSpec(s.spec));
  });
  common.id = '';
  return {
    common,
    shards: shards.map((s) => {
      const e: ShardSetEntry = { spec: subtractShardSpecs(normalizeShardSpec(s.spec), common) };
      e.spec.id = s.spec?.id ?? '';
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

/** Encodes a set as Go gazctl does: `common` always (`{}` when empty), `shards` always (`[]`). */
export function encodeShardSet(set: ShardSet): string {
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
