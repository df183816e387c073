// The journal hierarchy YAML format ("journalspace"): decode, validate, flatten into Apply
// changes, build from a List response (with hoisting), and encode exactly like Go gazctl.
//
// A node whose name is empty or ends in `/` is a directory: it only exists to share fields with
// its children. Any other node is a terminal and stands for one journal. Zero-valued fields mean
// "unset, inherit from the parent" (so a child cannot override a parent value back to zero).
import type { Node as YNode } from 'yaml';
import {
  CompressionCodec,
  JournalSpec_Flag,
  JournalSpec_Suspend_Level,
  type ApplyRequest,
  type ApplyRequest_Change,
  type JournalSpec,
  type JournalSpec_Fragment,
  type Label,
  type ListResponse_Journal,
} from '../protocol/gen/broker/protocol.js';
import type { Duration } from '../protocol/gen/google/protobuf/duration.js';
import { ValidationError } from '../protocol/errors.js';
import { validateJournalApplyRequest, validateJournalName } from '../protocol/validate/index.js';
import { GoYamlStream, StrictDoc, decodeStrict, emitGoYaml, enumNames, type YamlMapping, type YamlValue } from '../goyaml/goyaml.js';
import { formatGoDuration } from '../protocol/duration.js';
import {
  INT32,
  INT64,
  cloneLabels,
  decodeLabels,
  durationOrUndefined,
  encodeLabels,
  nanos,
  putDuration,
} from '../goyaml/fields.js';
import { byteCompare, intersectLabels, subtractLabels, unionLabels } from '../protocol/labelsets.js';

/**
 * One node of a journal hierarchy.
 *
 * * `spec` is a partial JournalSpec: zero values (0, "", empty lists, INVALID/NOT_SPECIFIED enums,
 *   zero durations) are "unset". Its `labels`/`fragment` may be undefined (same as empty).
 * * `fragment.stores`: an empty list is "absent" (inherit) unless `explicitEmptyStores` is true,
 *   which records an explicit `stores: []` in the YAML (kept empty when flattening).
 * * `spec.suspend`: undefined = absent; terminals only (never inherited, dropped on directories).
 * * `delete`: undefined = unset (inherits the parent's), true/false = explicit.
 * * `revision`: the journal's expected Etcd mod revision (0/undefined = must not exist, -1 = any).
 * * `children`: directories only, full journal names, strictly ascending.
 */
export interface JournalNode {
  comment?: string;
  delete?: boolean;
  spec: JournalSpec;
  explicitEmptyStores?: boolean;
  revision?: bigint;
  children?: JournalNode[];
}

const CODECS = enumNames(CompressionCodec);
const FLAGS = enumNames(JournalSpec_Flag);
const LEVELS = enumNames(JournalSpec_Suspend_Level);

/** Whether a node is a directory (empty name or trailing `/`). */
export function isDirectoryNode(node: JournalNode): boolean {
  const n = node.spec.name;
  return n === '' || n.endsWith('/');
}

// ---------------------------------------------------------------------------------------------
// Spec helpers (all non-mutating).

function emptyFragment(): JournalSpec_Fragment {
  return {
    length: 0n,
    compression_codec: CompressionCodec.INVALID,
    stores: [],
    refresh_interval: undefined,
    retention: undefined,
    flush_interval: undefined,
    path_postfix_template: '',
  };
}

/**
 * A copy of a duration in canonical form (undefined for zero; seconds and nanos of one sign,
 * |nanos| < 1s). The usual already-canonical, non-negative value is copied as it is, without
 * the bigint arithmetic of the general case.
 */
function canonicalDuration(d: Duration | undefined): Duration | undefined {
  if (d === undefined) return undefined;
  const { seconds, nanos: n } = d;
  if (typeof seconds === 'bigint' && Number.isInteger(n) && n >= 0 && n < 1e9 && seconds >= 0n) {
    return seconds === 0n && n === 0 ? undefined : { seconds, nanos: n };
  }
  return durationOrUndefined(nanos(d));
}

/** A fully-populated deep copy of a (possibly partial) spec. */
export function normalizeJournalSpec(s: Partial<JournalSpec> | undefined): JournalSpec {
  const f = s?.fragment;
  return {
    name: s?.name ?? '',
    replication: s?.replication ?? 0,
    labels: { labels: cloneLabels(s?.labels?.labels) },
    fragment: f
      ? {
          length: f.length ?? 0n,
          compression_codec: f.compression_codec ?? CompressionCodec.INVALID,
          stores: f.stores ? f.stores.slice() : [],
          refresh_interval: canonicalDuration(f.refresh_interval),
          retention: canonicalDuration(f.retention),
          flush_interval: canonicalDuration(f.flush_interval),
          path_postfix_template: f.path_postfix_template ?? '',
        }
      : emptyFragment(),
    flags: s?.flags ?? 0,
    max_append_rate: s?.max_append_rate ?? 0n,
    suspend: s?.suspend ? { level: s.suspend.level, offset: s.suspend.offset } : undefined,
  };
}

// The label-set algebra with shortcuts for the shapes hierarchies are mostly made of (one side
// empty, or both sides the same labels); results are those of the general operations.

function copyLabels(ls: readonly Label[]): Label[] {
  const out: Label[] = new Array<Label>(ls.length);
  for (let i = 0; i < ls.length; i++) {
    const l = ls[i]!;
    out[i] = { name: l.name, value: l.value, prefix: l.prefix };
  }
  return out;
}

/** Same names and values, in the same order (prefix flags aside, as the operations compare). */
function sameNamesAndValues(a: readonly Label[], b: readonly Label[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.name !== b[i]!.name || a[i]!.value !== b[i]!.value) return false;
  return true;
}

function union(a: readonly Label[], b: readonly Label[]): Label[] {
  if (b.length === 0) return copyLabels(a);
  if (a.length === 0) return copyLabels(b);
  return unionLabels(a, b);
}

function intersect(a: readonly Label[], b: readonly Label[]): Label[] {
  if (a.length === 0 || b.length === 0) return [];
  if (sameNamesAndValues(a, b)) return copyLabels(a);
  return intersectLabels(a, b);
}

function subtract(a: readonly Label[], b: readonly Label[]): Label[] {
  if (a.length === 0) return [];
  if (b.length === 0) return copyLabels(a);
  if (sameNamesAndValues(a, b)) return [];
  return subtractLabels(a, b);
}

/** byteCompare (UTF-8 byte order) without encoding, unless a surrogate decides the order. */
function compareNames(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // UTF-16 order is code point (so UTF-8 byte) order except around surrogates.
    if ((x >= 0xd800 && x <= 0xdfff) || (y >= 0xd800 && y <= 0xdfff)) return byteCompare(a, b);
    return x < y ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

const labelsOf = (s: JournalSpec): Label[] => s.labels?.labels ?? [];
const fragOf = (s: JournalSpec): JournalSpec_Fragment => s.fragment ?? emptyFragment();
function storesEq(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

interface Flat {
  spec: JournalSpec;
  explicitEmptyStores: boolean;
}

function storesPresent(spec: JournalSpec, explicitEmpty: boolean | undefined): boolean {
  return fragOf(spec).stores.length > 0 || explicitEmpty === true;
}

/** Equal durations (zero and absent are equal); the common cases avoid bigint arithmetic. */
function durEq(a: JournalSpec_Fragment['retention'], b: JournalSpec_Fragment['retention']): boolean {
  if (a === b) return true;
  if (a && b && a.seconds === b.seconds && a.nanos === b.nanos) return true;
  return nanos(a) === nanos(b);
}

function copyDuration(d: Duration | undefined): Duration | undefined {
  return d === undefined ? undefined : { seconds: d.seconds, nanos: d.nanos };
}

/**
 * Child fields that are zero take the parent's value; labels merge per name (child wins).
 * `parent.spec` must be normalized (every flat spec here is); it is only read.
 */
function unionSpecs(child: Flat, parent: Flat, adopt = false): Flat {
  // An adopted spec is a normalized one the caller gives up (see flattenJournalTree).
  const a = adopt ? child.spec : normalizeJournalSpec(child.spec);
  const b = parent.spec;
  const af = a.fragment!;
  const bf = fragOf(b);
  let explicitEmptyStores = child.explicitEmptyStores;
  if (a.replication === 0) a.replication = b.replication;
  a.labels = { labels: union(labelsOf(a), labelsOf(b)) };
  if (af.length === 0n) af.length = bf.length;
  if (af.compression_codec === CompressionCodec.INVALID) af.compression_codec = bf.compression_codec;
  if (!storesPresent(a, child.explicitEmptyStores)) {
    af.stores = [...bf.stores];
    explicitEmptyStores = parent.explicitEmptyStores;
  }
  // Inherited durations are copied: the result shares no object with `parent`.
  if (af.refresh_interval === undefined) af.refresh_interval = copyDuration(bf.refresh_interval);
  if (af.retention === undefined) af.retention = copyDuration(bf.retention);
  if (af.flush_interval === undefined) af.flush_interval = copyDuration(bf.flush_interval);
  if (af.path_postfix_template === '') af.path_postfix_template = bf.path_postfix_template;
  if (a.flags === JournalSpec_Flag.NOT_SPECIFIED) a.flags = b.flags;
  if (a.max_append_rate === 0n) a.max_append_rate = b.max_append_rate;
  // suspend is never inherited.
  return { spec: a, explicitEmptyStores: explicitEmptyStores && af.stores.length === 0 };
}

/**
 * In place: `acc` keeps only the fields equal in `b` (suspend cleared). `acc.spec` must be a
 * normalized spec owned by the caller; `b.spec` is only read.
 */
function intersectInto(acc: Flat, b0: Flat): void {
  const a = acc.spec;
  const b = b0.spec;
  const af = a.fragment!;
  const bf = fragOf(b);
  acc.explicitEmptyStores = acc.explicitEmptyStores && b0.explicitEmptyStores;
  if (a.replication !== b.replication) a.replication = 0;
  // `acc` owns its labels: when they are already the intersection, they stay as they are.
  const al = labelsOf(a);
  const bl = labelsOf(b);
  if (al.length !== 0 && !sameNamesAndValues(al, bl)) a.labels = { labels: intersect(al, bl) };
  if (af.length !== bf.length) af.length = 0n;
  if (af.compression_codec !== bf.compression_codec) af.compression_codec = CompressionCodec.INVALID;
  if (!storesEq(af.stores, bf.stores)) {
    af.stores = [];
    acc.explicitEmptyStores = false;
  }
  if (!durEq(af.refresh_interval, bf.refresh_interval)) af.refresh_interval = undefined;
  if (!durEq(af.retention, bf.retention)) af.retention = undefined;
  if (!durEq(af.flush_interval, bf.flush_interval)) af.flush_interval = undefined;
  if (af.path_postfix_template !== bf.path_postfix_template) af.path_postfix_template = '';
  if (a.flags !== b.flags) a.flags = JournalSpec_Flag.NOT_SPECIFIED;
  if (a.max_append_rate !== b.max_append_rate) a.max_append_rate = 0n;
  a.suspend = undefined;
}

/**
 * In place: every field of `a.spec` equal to `b`'s is zeroed (labels: names with equal value
 * lists removed); returns whether `a` keeps an explicit empty stores list. `a.spec` must be a
 * normalized spec owned by the caller; `b.spec` is only read.
 */
function subtractFrom(a0: Flat, b0: Flat): boolean {
  const a = a0.spec;
  const b = b0.spec;
  const af = a.fragment!;
  const bf = fragOf(b);
  let explicitEmptyStores = a0.explicitEmptyStores;
  if (a.replication === b.replication) a.replication = 0;
  // An empty label list stays as it is (the result would be another empty list).
  const al = labelsOf(a);
  if (al.length !== 0) a.labels = { labels: subtract(al, labelsOf(b)) };
  if (af.length === bf.length) af.length = 0n;
  if (af.compression_codec === bf.compression_codec) af.compression_codec = CompressionCodec.INVALID;
  if (storesEq(af.stores, bf.stores)) {
    af.stores = [];
    explicitEmptyStores = false;
  }
  if (durEq(af.refresh_interval, bf.refresh_interval)) af.refresh_interval = undefined;
  if (durEq(af.retention, bf.retention)) af.retention = undefined;
  if (durEq(af.flush_interval, bf.flush_interval)) af.flush_interval = undefined;
  if (af.path_postfix_template === bf.path_postfix_template) af.path_postfix_template = '';
  if (a.flags === b.flags) a.flags = JournalSpec_Flag.NOT_SPECIFIED;
  if (a.max_append_rate === b.max_append_rate) a.max_append_rate = 0n;
  return explicitEmptyStores;
}

// ---------------------------------------------------------------------------------------------
// Decoding.

const NODE_KEYS = [
  'comment', 'delete', 'name', 'replication', 'labels', 'fragment', 'flags', 'max_append_rate',
  'suspend', 'revision', 'children',
] as const;
const FRAGMENT_KEYS = [
  'length', 'compression_codec', 'stores', 'refresh_interval', 'retention', 'flush_interval',
  'path_postfix_template',
] as const;

function decodeNode(doc: StrictDoc, yn: YNode | null): JournalNode {
  const node: JournalNode = { spec: normalizeJournalSpec(undefined) };
  const spec = node.spec;
  const frag = spec.fragment!;
  for (const e of doc.mapping(yn, 'journal node', NODE_KEYS)) {
    const v = e.value;
    switch (e.key) {
      case 'comment':
        node.comment = doc.string(v, 'comment');
        break;
      case 'delete': {
        const d = doc.bool(v, 'delete');
        if (d !== undefined) node.delete = d;
        break;
      }
      case 'name':
        spec.name = doc.string(v, 'name');
        break;
      case 'replication':
        spec.replication = Number(doc.int(v, 'replication', ...INT32));
        break;
      case 'labels':
        spec.labels = { labels: decodeLabels(doc, v) };
        break;
      case 'fragment':
        for (const f of doc.mapping(v, 'fragment', FRAGMENT_KEYS, 'fragment')) {
          const path = `fragment.${f.key}`;
          switch (f.key) {
            case 'length':
              frag.length = doc.int(f.value, path, ...INT64);
              break;
            case 'compression_codec':
              frag.compression_codec = doc.enumValue(f.value, path, 'CompressionCodec', CODECS, false);
              break;
            case 'stores': {
              const items = doc.sequence(f.value, path);
              frag.stores = (items ?? []).map((s, i) => doc.string(s, `${path}[${i}]`));
              node.explicitEmptyStores = items !== undefined && items.length === 0 ? true : undefined;
              if (node.explicitEmptyStores === undefined) delete node.explicitEmptyStores;
              break;
            }
            case 'refresh_interval':
            case 'retention':
            case 'flush_interval':
              frag[f.key] = durationOrUndefined(doc.duration(f.value, path));
              break;
            case 'path_postfix_template':
              frag.path_postfix_template = doc.string(f.value, path);
              break;
          }
        }
        break;
      case 'flags':
        spec.flags = doc.enumValue(v, 'flags', 'JournalSpec_Flag', FLAGS, true);
        break;
      case 'max_append_rate':
        spec.max_append_rate = doc.int(v, 'max_append_rate', ...INT64);
        break;
      case 'suspend': {
        if (doc.isNull(v)) break;
        const s = { level: JournalSpec_Suspend_Level.NONE, offset: 0n };
        for (const f of doc.mapping(v, 'suspend', ['level', 'offset'], 'suspend')) {
          if (f.key === 'level') {
            s.level = doc.enumValue(f.value, 'suspend.level', 'JournalSpec_Suspend_Level', LEVELS, true);
          } else s.offset = doc.int(f.value, 'suspend.offset', ...INT64);
        }
        spec.suspend = s;
        break;
      }
      case 'revision':
        node.revision = doc.int(v, 'revision', ...INT64);
        break;
      case 'children': {
        const items = doc.sequence(v, 'children');
        if (items !== undefined) node.children = items.map((c) => decodeNode(doc, c));
        break;
      }
    }
  }
  return node;
}

/**
 * Strictly decodes a journal hierarchy document (yaml.v2 UnmarshalStrict semantics: unknown and
 * duplicate keys and ill-typed values are errors, each reported as `line N: ...`).
 * Empty input is rejected.
 */
export function decodeJournalTree(text: string): JournalNode {
  return decodeStrict(text, (doc) => {
    if (doc.root === null) throw new ValidationError('empty journal hierarchy: expected a YAML mapping');
    return decodeNode(doc, doc.root);
  });
}

// ---------------------------------------------------------------------------------------------
// Validation and flattening.

/**
 * Checks the shape of a hierarchy (not the specs themselves, which may be partial): directories
 * have ≥1 child and no revision; children are prefixed by the parent's name and strictly
 * ascending; terminals have a valid journal name and no children.
 */
export function validateJournalTree(node: JournalNode): void {
  const name = node.spec.name;
  const children = node.children ?? [];
  if (isDirectoryNode(node)) {
    if ((node.revision ?? 0n) !== 0n) {
      throw new ValidationError(`unexpected revision (${node.revision}) on directory node ${JSON.stringify(name)}`);
    }
    if (children.length === 0) {
      throw new ValidationError(`expected one or more children for directory node ${JSON.stringify(name)}`);
    }
    children.forEach((child, i) => {
      const cn = child.spec.name;
      if (!cn.startsWith(name)) {
        throw new ValidationError(`expected parent name to prefix child (${name} vs ${cn})`);
      }
      if (i > 0 && compareNames(children[i - 1]!.spec.name, cn) >= 0) {
        throw new ValidationError(
          `expected children to be ordered (index ${i}; ${children[i - 1]!.spec.name} vs ${cn})`,
        );
      }
      validateJournalTree(child);
    });
    return;
  }
  try {
    validateJournalName(name);
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.message, 'name');
    throw err;
  }
  if (children.length !== 0) {
    throw new ValidationError(`expected no children with non-directory node (${name})`);
  }
}

/**
 * Flattens a hierarchy into Apply changes, one per terminal in depth-first document order:
 * fields are pushed down from parents (zero child fields inherit; labels merge per name with the
 * child winning; stores inherit only when absent; suspend is not inherited; delete inherits when
 * unset). `revision` becomes expect_mod_revision; `delete: true` becomes a delete change.
 * Does not validate; see validateJournalTree and buildJournalApplyRequest.
 *
 * With `adoptSpecs` the changes take the tree's own spec objects over (each filled in from its
 * parents in place) instead of copies: for a tree that is not used afterwards, whose specs are
 * all normalized (as decodeJournalTree's are).
 */
export function flattenJournalTree(root: JournalNode, opts?: { adoptSpecs?: boolean }): ApplyRequest_Change[] {
  const adopt = opts?.adoptSpecs === true;
  const changes: ApplyRequest_Change[] = [];
  const walk = (node: JournalNode, flat: Flat, del: boolean | undefined) => {
    if (!isDirectoryNode(node)) {
      const expect_mod_revision = node.revision ?? 0n;
      if (del === true) changes.push({ expect_mod_revision, upsert: undefined, delete: node.spec.name });
      // `flat.spec` is a normalized spec of its own (made for this node and shared with
      // nothing), so it is the change's spec as it is.
      else changes.push({ expect_mod_revision, upsert: flat.spec, delete: '' });
      return;
    }
    for (const child of node.children ?? []) {
      const childFlat = unionSpecs(
        { spec: child.spec, explicitEmptyStores: child.explicitEmptyStores === true },
        flat,
        adopt,
      );
      walk(child, childFlat, child.delete ?? del);
    }
  };
  walk(root, { spec: normalizeJournalSpec(root.spec), explicitEmptyStores: root.explicitEmptyStores === true }, root.delete);
  return changes;
}

/** Validates the tree, flattens it, and validates the resulting ApplyRequest. */
export function buildJournalApplyRequest(root: JournalNode): ApplyRequest {
  validateJournalTree(root);
  const req: ApplyRequest = { changes: flattenJournalTree(root) };
  validateJournalApplyRequest(req);
  return req;
}

// ---------------------------------------------------------------------------------------------
// Building from a listing.

/** Length of the longest common prefix of a and b that ends on a `/`. */
function sharedPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let m = 0;
  while (m < n && a.charCodeAt(m) === b.charCodeAt(m)) m++;
  // a[0, m) === b[0, m): the prefix ends just after the last `/` in there.
  return m === 0 ? 0 : a.lastIndexOf('/', m - 1) + 1;
}

/**
 * Groups name-ordered nodes into directories, most specific first: each round takes the first
 * adjacent pair with the longest shared `/`-prefix, extends it over the following nodes sharing
 * that same prefix length, and replaces that run by a directory of that prefix. (This is the
 * grouping upstream gazctl does.)
 *
 * The rounds of one prefix length L are done in a single pass, left to right: a new directory's
 * pairs with its neighbours share less than L (a longer or equal prefix would have put the
 * neighbour into the run), so replacing a run leaves the next run of L where it was and leaves L
 * the longest, exactly as the round-by-round grouping would find them. `shared[i]` is the prefix
 * of nodes i and i+1; a pass recomputes only the pairs next to its new directories.
 */
function extractTree(nodes: JournalNode[]): JournalNode {
  if (nodes.length === 0) return { spec: normalizeJournalSpec(undefined) };
  let list = nodes;
  let shared: number[] = [];
  for (let i = 1; i < list.length; i++) shared.push(sharedPrefix(list[i]!.spec.name, list[i - 1]!.spec.name));
  while (list.length > 1) {
    let L = -1;
    for (let i = 0; i < shared.length; i++) if (shared[i]! > L) L = shared[i]!;
    const nextList: JournalNode[] = [];
    const nextShared: number[] = [];
    let prevIsDir = false;
    for (let i = 0; i < list.length; ) {
      let j = i;
      while (j < shared.length && shared[j] === L) j++;
      // list[i..j] is a run of L (when j > i), or list[i] stays as it is.
      const isDir = j > i;
      const node: JournalNode = isDir
        ? { spec: normalizeJournalSpec({ name: list[i]!.spec.name.slice(0, L) }), children: list.slice(i, j + 1) }
        : list[i]!;
      if (nextList.length > 0) {
        nextShared.push(isDir || prevIsDir ? sharedPrefix(node.spec.name, nextList[nextList.length - 1]!.spec.name) : shared[i - 1]!);
      }
      nextList.push(node);
      prevIsDir = isDir;
      i = j + 1;
    }
    list = nextList;
    shared = nextShared;
  }
  return list[0]!;
}

/** Bottom-up: a directory takes the fields common to all children, which drop them. */
function hoist(node: JournalNode): void {
  if (!isDirectoryNode(node) || !node.children?.length) return;
  const children = node.children;
  children.forEach(hoist);
  const flatOf = (n: JournalNode): Flat => ({ spec: n.spec, explicitEmptyStores: n.explicitEmptyStores === true });
  // Every spec in the tree is a normalized copy owned by the tree, so the work is done in place.
  const acc = flatOf(children[0]!);
  acc.spec = normalizeJournalSpec(acc.spec);
  let del = children[0]!.delete;
  for (let i = 1; i < children.length; i++) {
    const c = children[i]!;
    if (del !== c.delete) del = undefined;
    intersectInto(acc, flatOf(c));
  }
  acc.spec.name = node.spec.name;
  acc.spec.suspend = undefined;
  node.spec = acc.spec;
  setExplicit(node, acc.explicitEmptyStores);
  if (del === undefined) delete node.delete;
  else node.delete = del;
  for (const c of children) {
    if (node.delete !== undefined) delete c.delete;
    setExplicit(c, subtractFrom(flatOf(c), acc));
  }
}

function setExplicit(node: JournalNode, v: boolean): void {
  if (v) node.explicitEmptyStores = true;
  else delete node.explicitEmptyStores;
}

/** canonicalDuration, keeping `d` itself when it is already canonical. */
function canonicalInPlace(d: Duration | undefined): Duration | undefined {
  if (d === undefined) return undefined;
  const { seconds, nanos: n } = d;
  if (typeof seconds === 'bigint' && Number.isInteger(n) && n >= 0 && n < 1e9 && seconds >= 0n) {
    return seconds === 0n && n === 0 ? undefined : d;
  }
  return durationOrUndefined(nanos(d));
}

/**
 * normalizeJournalSpec done on `s` itself (which the tree then owns and changes): the same
 * values, without copying what is already in normal form.
 */
function adoptJournalSpec(s: JournalSpec): JournalSpec {
  s.name ??= '';
  s.replication ??= 0;
  if (s.labels === undefined) s.labels = { labels: [] };
  else s.labels.labels ??= [];
  const f = s.fragment;
  if (f === undefined) s.fragment = emptyFragment();
  else {
    f.length ??= 0n;
    f.compression_codec ??= CompressionCodec.INVALID;
    f.stores ??= [];
    f.refresh_interval = canonicalInPlace(f.refresh_interval);
    f.retention = canonicalInPlace(f.retention);
    f.flush_interval = canonicalInPlace(f.flush_interval);
    f.path_postfix_template ??= '';
  }
  s.flags ??= 0;
  s.max_append_rate ??= 0n;
  return s;
}

/**
 * Builds the minimal hierarchy of a listing (journals in name order, as List returns them):
 * directories at `/` boundaries where names branch, shared fields hoisted into directories,
 * `revision` = mod_revision. One journal ⇒ a terminal root; no journals ⇒ an empty root.
 * With `adoptSpecs` the tree takes the listing's spec objects over (normalized and then changed
 * in place) instead of copying them: for a listing that is not used afterwards.
 */
export function journalTreeFromListing(
  journals: readonly ListResponse_Journal[],
  opts?: { adoptSpecs?: boolean },
): JournalNode {
  const adopt = opts?.adoptSpecs === true;
  const nodes: JournalNode[] = journals.map((j) => {
    const n: JournalNode = { spec: adopt && j.spec ? adoptJournalSpec(j.spec) : normalizeJournalSpec(j.spec) };
    if (j.mod_revision !== 0n) n.revision = j.mod_revision;
    return n;
  });
  const tree = extractTree(nodes);
  hoist(tree);
  return tree;
}

// ---------------------------------------------------------------------------------------------
// Encoding.

function enumText(names: Record<number, string | undefined>, v: number): YamlValue {
  return names[v] ?? v;
}

function nodeToYaml(node: JournalNode): YamlMapping {
  const s = node.spec;
  const m: YamlMapping = {};
  if (node.comment) m['comment'] = node.comment;
  if (node.delete !== undefined) m['delete'] = node.delete;
  if (s.name) m['name'] = s.name;
  if (s.replication) m['replication'] = s.replication;
  const labels = labelsOf(s);
  if (labels.length) m['labels'] = encodeLabels(labels);
  const f = fragOf(s);
  const fm: YamlMapping = {};
  if (f.length !== 0n) fm['length'] = f.length;
  if (f.compression_codec !== CompressionCodec.INVALID) {
    // Go writes the codec's String(), a name or the decimal number as a string.
    fm['compression_codec'] = CompressionCodec[f.compression_codec] ?? String(f.compression_codec);
  }
  if (f.stores.length) fm['stores'] = [...f.stores];
  putDuration(fm, 'refresh_interval', f.refresh_interval);
  putDuration(fm, 'retention', f.retention);
  putDuration(fm, 'flush_interval', f.flush_interval);
  if (f.path_postfix_template) fm['path_postfix_template'] = f.path_postfix_template;
  if (Object.keys(fm).length) m['fragment'] = fm;
  if (s.flags) m['flags'] = enumText(JournalSpec_Flag as unknown as Record<number, string>, s.flags);
  if (s.max_append_rate !== 0n) m['max_append_rate'] = s.max_append_rate;
  if (s.suspend) {
    const sm: YamlMapping = {};
    if (s.suspend.level) {
      sm['level'] = enumText(JournalSpec_Suspend_Level as unknown as Record<number, string>, s.suspend.level);
    }
    if (s.suspend.offset !== 0n) sm['offset'] = s.suspend.offset;
    m['suspend'] = sm;
  }
  if (node.revision !== undefined && node.revision !== 0n) m['revision'] = node.revision;
  if (node.children?.length) m['children'] = node.children.map(nodeToYaml);
  return m;
}

/** Encodes a hierarchy as Go gazctl does (yaml.v2, fixed key order, zero values omitted). */
export function encodeJournalTree(node: JournalNode): string {
  const out = new GoYamlStream();
  writeNode(out, node, 0, true);
  return out.finish();
}

/** {@link encodeJournalTree} as UTF-8 bytes (what a listing writes to its output). */
export function encodeJournalTreeBytes(node: JournalNode): Buffer {
  const out = new GoYamlStream();
  writeNode(out, node, 0, true);
  return out.finishBytes();
}

/** The same document through the generic emitter (nodeToYaml, then emitGoYaml); kept to check the stream against. */
export function encodeJournalTreeGeneric(node: JournalNode): string {
  return emitGoYaml(nodeToYaml(node));
}

// Streaming encoder: writes what emitGoYaml(nodeToYaml(node)) writes, field by field, without
// the intermediate mappings (a listing of many thousands of journals would build and drop them all).

/** Whether nodeToYaml's fragment mapping would have any key. */
function fragmentHasFields(f: JournalSpec_Fragment): boolean {
  return (
    f.length !== 0n ||
    f.compression_codec !== CompressionCodec.INVALID ||
    f.stores.length !== 0 ||
    nanos(f.refresh_interval) !== 0n ||
    nanos(f.retention) !== 0n ||
    nanos(f.flush_interval) !== 0n ||
    f.path_postfix_template !== ''
  );
}

/** Whether nodeToYaml's mapping for the node would have any key. */
function nodeHasFields(node: JournalNode): boolean {
  const s = node.spec;
  return (
    !!node.comment ||
    node.delete !== undefined ||
    !!s.name ||
    !!s.replication ||
    labelsOf(s).length !== 0 ||
    fragmentHasFields(fragOf(s)) ||
    !!s.flags ||
    s.max_append_rate !== 0n ||
    !!s.suspend ||
    (node.revision !== undefined && node.revision !== 0n) ||
    !!node.children?.length
  );
}

function writeDuration(out: GoYamlStream, key: string, d: Duration | undefined, indent: number): void {
  const ns = nanos(d);
  if (ns === 0n) return;
  out.key(key, indent, false);
  out.scalar(formatGoDuration(ns), indent);
}

/** Writes the node's mapping entries at column `indent`; `firstOnLine` for the first of them. */
function writeNode(out: GoYamlStream, node: JournalNode, indent: number, firstOnLine: boolean): void {
  const s = node.spec;
  // Whether the next key is the node's first one and goes on the current line (after `- `).
  let first = firstOnLine;
  if (node.comment) {
    out.key('comment', indent, first);
    first = false;
    out.scalar(node.comment, indent);
  }
  if (node.delete !== undefined) {
    out.key('delete', indent, first);
    first = false;
    out.scalar(node.delete, indent);
  }
  if (s.name) {
    out.key('name', indent, first);
    first = false;
    out.scalar(s.name, indent);
  }
  if (s.replication) {
    out.key('replication', indent, first);
    first = false;
    out.scalar(s.replication, indent);
  }
  const labels = labelsOf(s);
  if (labels.length) {
    out.key('labels', indent, first);
    first = false;
    out.labelItems(labels, indent);
  }
  const f = fragOf(s);
  if (fragmentHasFields(f)) {
    out.key('fragment', indent, first);
    first = false;
    const fi = indent + 2;
    if (f.length !== 0n) {
      out.key('length', fi, false);
      out.scalar(f.length, fi);
    }
    if (f.compression_codec !== CompressionCodec.INVALID) {
      out.key('compression_codec', fi, false);
      out.scalar(CompressionCodec[f.compression_codec] ?? String(f.compression_codec), fi);
    }
    if (f.stores.length) {
      out.key('stores', fi, false);
      for (const st of f.stores) {
        out.dash(fi);
        out.scalar(st, fi);
      }
    }
    writeDuration(out, 'refresh_interval', f.refresh_interval, fi);
    writeDuration(out, 'retention', f.retention, fi);
    writeDuration(out, 'flush_interval', f.flush_interval, fi);
    if (f.path_postfix_template) {
      out.key('path_postfix_template', fi, false);
      out.scalar(f.path_postfix_template, fi);
    }
  }
  if (s.flags) {
    out.key('flags', indent, first);
    first = false;
    const v = enumText(JournalSpec_Flag as unknown as Record<number, string>, s.flags);
    out.scalar(v as string | number, indent);
  }
  if (s.max_append_rate !== 0n) {
    out.key('max_append_rate', indent, first);
    first = false;
    out.scalar(s.max_append_rate, indent);
  }
  if (s.suspend) {
    out.key('suspend', indent, first);
    first = false;
    const level = s.suspend.level;
    const offset = s.suspend.offset;
    if (!level && offset === 0n) out.flow('{}');
    else {
      const si = indent + 2;
      if (level) {
        out.key('level', si, false);
        out.scalar(enumText(JournalSpec_Suspend_Level as unknown as Record<number, string>, level) as string | number, si);
      }
      if (offset !== 0n) {
        out.key('offset', si, false);
        out.scalar(offset, si);
      }
    }
  }
  if (node.revision !== undefined && node.revision !== 0n) {
    out.key('revision', indent, first);
    first = false;
    out.scalar(node.revision, indent);
  }
  if (node.children?.length) {
    out.key('children', indent, first);
    first = false;
    for (const c of node.children) {
      out.dash(indent);
      if (!nodeHasFields(c)) out.flow('{}');
      else {
        out.itemMapping();
        writeNode(out, c, indent + 2, true);
      }
    }
  }
}
