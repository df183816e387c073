// Journal and shard specs, fragments, routes and headers, validated as brokers and consumers
// validate them.
import { durationToNanos, formatGoDuration } from '../duration.js';
import { CompressionCodec, type Fragment, type Header, type JournalSpec, type Label, type LabelSet, type Route } from '../gen/broker/protocol.js';
import type { ShardSpec } from '../gen/consumer/protocol.js';
import { META_LABEL_ID, META_LABEL_NAME, META_LABEL_PREFIX, PATH_SYMBOLS, checkAlphabet, compareStrings, hasLabel, validateLabelSet, validateSingleValueLabels } from '../labels.js';
import { fail, prefixed, q, within } from './common.js';
import { checkPathComponent, cleanPath, JOURNAL_NAME_MAX_BYTES, JOURNAL_NAME_MIN_BYTES, PATH_POSTFIX_MAX_BYTES, validateEndpoint, validateJournalName, validateJournalNameWithMeta, validateProcessID, validateShardID } from './names.js';
import { checkStoreURL } from './store-url.js';
import { checkGoTemplate } from './go-template.js';

export const MAX_JOURNAL_REPLICATION = 5;
export const MIN_FRAGMENT_LENGTH = 1n << 10n;
export const MAX_FRAGMENT_LENGTH = 1n << 34n;
const SECOND = 1_000_000_000n;
export const MIN_REFRESH_INTERVAL = SECOND;
export const MAX_REFRESH_INTERVAL = 24n * 3600n * SECOND;
export const MIN_FLUSH_INTERVAL = 60n * SECOND;

function codecLabel(c: number): string {
  return CompressionCodec[c] ?? String(c);
}

function isValidCodec(c: number): boolean {
  return c >= CompressionCodec.NONE && c <= CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION && Number.isInteger(c);
}

const RESERVED_JOURNAL_LABELS = [META_LABEL_NAME, META_LABEL_PREFIX];
const VALID_FLAGS = [0, 1, 2, 4];
const VALID_SUSPEND_LEVELS = [0, 1, 2];

/** Labels of a JournalSpec: valid set, no `name`/`prefix` labels, single-value rules. */
export function validateJournalLabels(set: LabelSet | undefined): void {
  validateLabelSet(set);
  for (const reserved of RESERVED_JOURNAL_LABELS) {
    if (hasLabel(set, reserved)) fail(`label ${q(reserved)} is reserved`, 'labels');
  }
  validateSingleValueLabels(set);
}

/** Fragment store problems by URL: a store is usually shared by many specs, and URL parsing is dear. */
const storeChecks = new Map<string, string | undefined>();

function checkStoreURLCached(store: string): string | undefined {
  if (storeChecks.has(store)) return storeChecks.get(store);
  const p = checkStoreURL(store);
  if (storeChecks.size >= 1024) storeChecks.clear();
  storeChecks.set(store, p);
  return p;
}

function journalSubject(name: string): string {
  return `journal ${q(name)}`;
}



/**
 * Labels of the last journal spec whose labels passed validateJournalLabels. Specs flattened
 * from one hierarchy mostly carry the same labels (inherited from a directory), so a spec whose
 * labels equal these, field for field, has nothing new to check. The labels are copied: a
 * caller changing its spec afterwards cannot change what was checked.
 */
let lastValidLabels: Label[] = [];

function sameLabels(a: readonly Label[], b: readonly Label[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.name !== y.name || x.value !== y.value || x.prefix !== y.prefix) return false;
  }
  return true;
}

function validateJournalSpecLabels(set: LabelSet | undefined): void {
  const labels = set?.labels;
  if (labels !== undefined && labels.length !== 0 && sameLabels(labels, lastValidLabels)) return;
  validateJournalLabels(set);
  if (labels !== undefined && labels.length !== 0) {
    lastValidLabels = labels.map((l) => ({ name: l.name, value: l.value, prefix: l.prefix }));
  }
}

/**
 * Validates a JournalSpec as brokers do. `checkName` false leaves out the name check, for a
 * caller that has validated the name already.
 */
export function validateJournalSpec(spec: JournalSpec, checkName = true): void {
  if (checkName) validateJournalName(spec.name);
  // The subject is built only when a check fails: the success path allocates nothing.
  if (spec.replication < 1 || spec.replication > MAX_JOURNAL_REPLICATION) {
    fail(`replication: ${spec.replication} is out of range (1 to ${MAX_JOURNAL_REPLICATION})`, journalSubject(spec.name));
  }
  try {
    validateJournalSpecLabels(spec.labels);
  } catch (e) {
    throw prefixed(e, journalSubject(spec.name));
  }

  const fr = spec.fragment;
  const length = fr?.length ?? 0n;
  if (length < MIN_FRAGMENT_LENGTH || length > MAX_FRAGMENT_LENGTH) {
    fail(`fragment.length: ${length} is out of range (${MIN_FRAGMENT_LENGTH} to ${MAX_FRAGMENT_LENGTH})`, journalSubject(spec.name));
  }
  const codec = fr?.compression_codec ?? CompressionCodec.INVALID;
  if (!isValidCodec(codec)) {
    fail(`fragment.compression_codec: ${codecLabel(codec)} is not a valid codec (NONE, GZIP, ZSTANDARD, SNAPPY or GZIP_OFFLOAD_DECOMPRESSION)`, journalSubject(spec.name));
  }
  const stores = fr?.stores ?? [];
  for (let i = 0; i < stores.length; i++) {
    const store = stores[i]!;
    const p = checkStoreURLCached(store);
    if (p) fail(`fragment.stores[${i}] ${q(store)}: ${p}`, journalSubject(spec.name));
    if (i === 0 && codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION && store.toLowerCase().startsWith('file:')) {
      fail(`fragment.stores[0] ${q(store)}: GZIP_OFFLOAD_DECOMPRESSION cannot be used with a file:// store`, journalSubject(spec.name));
    }
  }
  const refresh = durationToNanos(fr?.refresh_interval);
  if (refresh < MIN_REFRESH_INTERVAL || refresh > MAX_REFRESH_INTERVAL) {
    fail(`fragment.refresh_interval: ${formatGoDuration(refresh)} is out of range (1s to 24h0m0s)`, journalSubject(spec.name));
  }
  const flush = durationToNanos(fr?.flush_interval);
  if (flush !== 0n && flush < MIN_FLUSH_INTERVAL) {
    fail(`fragment.flush_interval: ${formatGoDuration(flush)} must be 0s or at least 1m0s`, journalSubject(spec.name));
  }
  const tpl = fr?.path_postfix_template ?? '';
  const tp = checkGoTemplate(tpl);
  if (tp) fail(`fragment.path_postfix_template ${q(tpl)}: ${tp}`, journalSubject(spec.name));

  if (!VALID_FLAGS.includes(spec.flags)) {
    fail(`flags: ${spec.flags} is not valid (0, O_RDONLY=1, O_WRONLY=2 or O_RDWR=4)`, journalSubject(spec.name));
  }
  if (spec.max_append_rate < 0n) fail(`max_append_rate: ${spec.max_append_rate} must be >= 0`, journalSubject(spec.name));
  if (spec.suspend) {
    const level = spec.suspend.level;
    if (!VALID_SUSPEND_LEVELS.includes(level)) fail(`suspend.level: ${level} is not valid (NONE, PARTIAL or FULL)`, journalSubject(spec.name));
    if (spec.suspend.offset < 0n) fail(`suspend.offset: ${spec.suspend.offset} must be >= 0`, journalSubject(spec.name));
  }
}

/** Validates a ShardSpec as consumers do. */
export function validateShardSpec(spec: ShardSpec): void {
  validateShardID(spec.id);
  const subject = `shard ${q(spec.id)}`;
  let prevJournal: string | undefined;
  spec.sources.forEach((src, i) => {
    // A source may read a journal under a `;suffix` (consumers then track it as its own source).
    within(subject, () => within(`sources[${i}]`, () => validateJournalNameWithMeta(src.journal)));
    if (src.min_offset < 0n) fail(`sources[${i}].min_offset: ${src.min_offset} must be >= 0`, subject);
    if (prevJournal !== undefined && compareStrings(prevJournal, src.journal) >= 0) {
      fail(`sources[${i}]: journal ${q(src.journal)} must sort after ${q(prevJournal)} (sources strictly ascending by journal)`, subject);
    }
    prevJournal = src.journal;
  });
  if (spec.recovery_log_prefix !== '') {
    const log = `${spec.recovery_log_prefix}/${spec.id}`;
    const p = checkPathComponent(log, JOURNAL_NAME_MIN_BYTES, JOURNAL_NAME_MAX_BYTES);
    if (p) fail(`recovery_log_prefix ${q(spec.recovery_log_prefix)}: recovery log ${q(log)} ${p}`, subject);
    const hp = spec.hint_prefix;
    const hpa = checkAlphabet(hp, PATH_SYMBOLS, 1, JOURNAL_NAME_MAX_BYTES);
    if (hpa) fail(`hint_prefix ${q(hp)}: ${hpa}`, subject);
    if (!hp.startsWith('/')) fail(`hint_prefix ${q(hp)}: must be an absolute path (begin with "/")`, subject);
    if (cleanPath(hp) !== hp) fail(`hint_prefix ${q(hp)}: must be a clean path (like ${q(cleanPath(hp))})`, subject);
  } else if (spec.hint_prefix !== '') {
    fail(`hint_prefix ${q(spec.hint_prefix)}: must be empty when recovery_log_prefix is empty`, subject);
  }
  if (spec.hint_backups < 0) fail(`hint_backups: ${spec.hint_backups} must be >= 0`, subject);
  const maxTxn = durationToNanos(spec.max_txn_duration);
  if (maxTxn <= 0n) fail(`max_txn_duration: ${formatGoDuration(maxTxn)} must be > 0`, subject);
  const minTxn = durationToNanos(spec.min_txn_duration);
  if (minTxn < 0n) fail(`min_txn_duration: ${formatGoDuration(minTxn)} must be >= 0`, subject);
  within(subject, () => {
    validateLabelSet(spec.labels);
    if (hasLabel(spec.labels, META_LABEL_ID)) fail(`label ${q(META_LABEL_ID)} is reserved`, 'labels');
    validateSingleValueLabels(spec.labels);
  });
}

/** Validates a Fragment (journal, begin ≤ end, codec, path postfix). */
export function validateFragment(f: Fragment): void {
  validateJournalName(f.journal);
  const subject = `fragment of journal ${q(f.journal)}`;
  if (f.begin > f.end) fail(`begin ${f.begin} is after end ${f.end}`, subject);
  if (!isValidCodec(f.compression_codec)) {
    fail(`compression_codec: ${codecLabel(f.compression_codec)} is not a valid codec`, subject);
  }
  const p = checkPathComponent(f.path_postfix, 0, PATH_POSTFIX_MAX_BYTES);
  if (p) fail(`path_postfix ${q(f.path_postfix)}: ${p}`, subject);
  if (f.backing_store !== '') {
    const sp = checkStoreURL(f.backing_store);
    if (sp) fail(`backing_store ${q(f.backing_store)}: ${sp}`, subject);
  }
}

/** Validates a Route: sorted unique valid members, primary in range, endpoints aligned and valid. */
export function validateRoute(route: Route | undefined): void {
  const members = route?.members ?? [];
  members.forEach((m, i) => {
    within(`route members[${i}]`, () => validateProcessID(m));
    if (i > 0) {
      const prev = members[i - 1]!;
      const less = prev.zone < m.zone || (prev.zone === m.zone && prev.suffix < m.suffix);
      if (!less) {
        fail(`members must be unique and sorted by (zone, suffix): ${q(m.zone + '/' + m.suffix)} follows ${q(prev.zone + '/' + prev.suffix)}`, `route members[${i}]`);
      }
    }
  });
  const primary = route?.primary ?? -1;
  if (primary < -1 || primary >= members.length) {
    fail(`${primary} is out of range (-1 to ${members.length - 1})`, 'route primary');
  }
  const endpoints = route?.endpoints ?? [];
  if (endpoints.length !== 0 && endpoints.length !== members.length) {
    fail(`has ${endpoints.length} entries but there are ${members.length} members`, 'route endpoints');
  }
  endpoints.forEach((ep, i) => {
    if (ep !== '') within(`route endpoints[${i}]`, () => validateEndpoint(ep));
  });
}

/** Validates a response Header: process ID (if set), route, and a real etcd header. */
export function validateHeader(header: Header | undefined): void {
  const pid = header?.process_id;
  if (pid && (pid.zone !== '' || pid.suffix !== '')) within('header process_id', () => validateProcessID(pid));
  within('header', () => validateRoute(header?.route));
  const etcd = header?.etcd;
  if (!etcd || etcd.cluster_id === 0n) fail('cluster_id must be non-zero', 'header etcd');
  if (etcd.member_id === 0n) fail('member_id must be non-zero', 'header etcd');
  if (etcd.revision <= 0n) fail(`revision ${etcd.revision} must be > 0`, 'header etcd');
  if (etcd.raft_term === 0n) fail('raft_term must be non-zero', 'header etcd');
}
