// Validation of names, URLs, specs, routes, headers and Apply requests (wire.md §1.5, §4.2, §5.3,
// §5.4; gazctl.md §2.1, §2.2). Every failure throws a ValidationError whose message is one line
// naming the subject, the field and the bad value.
import { durationToNanos, formatGoDuration } from './duration.js';
import { ValidationError } from './errors.js';
import {
  CompressionCodec,
  type ApplyRequest,
  type Fragment,
  type Header,
  type JournalSpec,
  type LabelSet,
  type ProcessSpec_ID,
  type Route,
} from './gen/broker/protocol.js';
import type {
  ApplyRequest as ShardApplyRequest,
  ShardSpec,
} from './gen/consumer/protocol.js';
import {
  META_LABEL_ID,
  META_LABEL_NAME,
  META_LABEL_PREFIX,
  PATH_SYMBOLS,
  TOKEN_SYMBOLS,
  checkAlphabet,
  compareStrings,
  labelValues,
  validateLabelSet,
  validateSingleValueLabels,
} from './labels.js';

export const JOURNAL_NAME_MIN_BYTES = 4;
export const JOURNAL_NAME_MAX_BYTES = 512;
export const SHARD_ID_MIN_BYTES = 4;
export const SHARD_ID_MAX_BYTES = 512;
export const PATH_POSTFIX_MAX_BYTES = 512;
export const ZONE_MIN_BYTES = 1;
export const ZONE_MAX_BYTES = 32;
export const SUFFIX_MIN_BYTES = 4;
export const SUFFIX_MAX_BYTES = 128;
export const MAX_JOURNAL_REPLICATION = 5;
export const MIN_FRAGMENT_LENGTH = 1n << 10n;
export const MAX_FRAGMENT_LENGTH = 1n << 34n;
const SECOND = 1_000_000_000n;
export const MIN_REFRESH_INTERVAL = SECOND;
export const MAX_REFRESH_INTERVAL = 24n * 3600n * SECOND;
export const MIN_FLUSH_INTERVAL = 60n * SECOND;

const q = (s: string): string => JSON.stringify(s);

function fail(message: string, subject?: string): never {
  throw new ValidationError(message, subject);
}

/** Runs `fn`, prefixing any ValidationError it throws with `subject`. */
function within(subject: string, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) throw new ValidationError(e.message, subject);
    throw e;
  }
}

/** Go's path.Clean. */
export function cleanPath(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
      else if (!rooted) out.push('..');
      continue;
    }
    out.push(part);
  }
  const s = (rooted ? '/' : '') + out.join('/');
  return s === '' ? '.' : s;
}

/** Problem with a path component (journal names, postfixes), or undefined. */
function checkPathComponent(s: string, min: number, max: number): string | undefined {
  const p = checkAlphabet(s, PATH_SYMBOLS, min, max);
  if (p) return p;
  if (s !== '' && cleanPath(s) !== s) return `must be a clean path (like ${q(cleanPath(s))})`;
  if (s.startsWith('/')) return 'must not begin with "/"';
  return undefined;
}

/** A journal name: 4–512 bytes of letters, numbers and `-_+/.=%`, a clean relative path. */
export function validateJournalName(name: string): void {
  if (name.includes(';')) fail(`name may not carry a ";" suffix here`, `journal ${q(name)}`);
  const p = checkPathComponent(name, JOURNAL_NAME_MIN_BYTES, JOURNAL_NAME_MAX_BYTES);
  if (p) fail(`name ${p}`, `journal ${q(name)}`);
}

/** A journal name as used by reads, which may carry a `;meta` suffix of 1–512 bytes. */
export function validateJournalNameWithMeta(name: string): void {
  const semi = name.indexOf(';');
  if (semi === -1) return validateJournalName(name);
  validateJournalName(name.slice(0, semi));
  const meta = name.slice(semi + 1);
  const p = checkPathComponent(meta, 1, JOURNAL_NAME_MAX_BYTES);
  if (p) fail(`";" suffix ${q(meta)}: ${p}`, `journal ${q(name)}`);
}

/** A shard ID: 4–512 bytes of letters, numbers and `-_+/.`. */
export function validateShardID(id: string): void {
  const p = checkAlphabet(id, TOKEN_SYMBOLS, SHARD_ID_MIN_BYTES, SHARD_ID_MAX_BYTES);
  if (p) fail(`id ${p}`, `shard ${q(id)}`);
}

/** A fragment path postfix: 0–512 bytes, a clean relative path (or empty). */
export function validatePathPostfix(postfix: string): void {
  const p = checkPathComponent(postfix, 0, PATH_POSTFIX_MAX_BYTES);
  if (p) fail(p, `path postfix ${q(postfix)}`);
}

/** A process ID: zone 1–32 bytes, suffix 4–128 bytes, of letters, numbers and `-_+/.`. */
export function validateProcessID(id: ProcessSpec_ID | undefined): void {
  const zone = id?.zone ?? '';
  const suffix = id?.suffix ?? '';
  const subject = `process ID ${q(zone + '/' + suffix)}`;
  const zp = checkAlphabet(zone, TOKEN_SYMBOLS, ZONE_MIN_BYTES, ZONE_MAX_BYTES);
  if (zp) fail(`zone ${q(zone)}: ${zp}`, subject);
  const sp = checkAlphabet(suffix, TOKEN_SYMBOLS, SUFFIX_MIN_BYTES, SUFFIX_MAX_BYTES);
  if (sp) fail(`suffix ${q(suffix)}: ${sp}`, subject);
}

const ABSOLUTE_WITH_HOST = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]/;

/** An endpoint: an absolute URL with a host (`http://h:p`, `https://h`, `unix://h/path`). */
export function validateEndpoint(url: string): void {
  const subject = `endpoint ${q(url)}`;
  if (url === '') fail('must not be empty', subject);
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:/.test(url)) fail('must be an absolute URL (like http://host:port)', subject);
  if (!ABSOLUTE_WITH_HOST.test(url)) fail('URL must have a host', subject);
  try {
    new URL(url);
  } catch {
    fail('is not a valid URL', subject);
  }
}

const STORE_SCHEMES = new Set(['s3', 'gs', 'azure', 'azure-ad', 'file']);
const COMMON_STORE_ARGS = ['find', 'replace'];
const S3_STORE_ARGS = ['profile', 'endpoint', 'acl', 'storageclass', 'sse', 'ssekmskeyid', 'region'];

/** Problem with a fragment store URL, or undefined. */
function checkStoreURL(store: string): string | undefined {
  if (store === '') return 'must not be empty';
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:/.test(store)) return 'is not an absolute URL';
  let url: URL;
  try {
    url = new URL(store);
  } catch {
    return 'is not a valid URL';
  }
  const scheme = url.protocol.slice(0, -1).toLowerCase();
  if (!STORE_SCHEMES.has(scheme)) {
    return `scheme ${q(scheme)} is not supported (use s3, gs, azure, azure-ad or file)`;
  }
  if (scheme === 'file') {
    if (url.host !== '') return `file:// store must not have a host (${q(url.host)}); use file:///dir/`;
  } else if (url.host === '') {
    return `${scheme}:// store needs a ${scheme === 'azure-ad' ? 'tenant' : scheme === 'azure' ? 'container' : 'bucket'}`;
  }
  const path = url.pathname;
  if (!path.endsWith('/')) return `path ${q(path)} must end in "/"`;
  if (scheme === 'azure-ad' && path.split('/').filter((s) => s !== '').length < 2) {
    return 'azure-ad:// store needs <tenant>/<account>/<container>/';
  }
  const allowed = scheme === 's3' ? [...COMMON_STORE_ARGS, ...S3_STORE_ARGS] : COMMON_STORE_ARGS;
  for (const key of url.searchParams.keys()) {
    if (!allowed.includes(key.toLowerCase())) {
      return `unknown query argument ${q(key)} (allowed: ${allowed.join(', ')})`;
    }
  }
  return undefined;
}

/** A fragment store URL (s3, gs, azure, azure-ad, file; path ending in `/`; known query args). */
export function validateFragmentStoreURL(store: string): void {
  const p = checkStoreURL(store);
  if (p) fail(p, `store ${q(store)}`);
}

/** A Go text/template source (as used by fragment.path_postfix_template). */
export function validateGoTemplate(src: string): void {
  const p = checkGoTemplate(src);
  if (p) fail(p, `template ${q(src)}`);
}

function codecLabel(c: number): string {
  return CompressionCodec[c] ?? String(c);
}

function isValidCodec(c: number): boolean {
  return c >= CompressionCodec.NONE && c <= CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION && Number.isInteger(c);
}

/** Labels of a JournalSpec: valid set, no `name`/`prefix` labels, single-value rules. */
export function validateJournalLabels(set: LabelSet | undefined): void {
  validateLabelSet(set);
  for (const reserved of [META_LABEL_NAME, META_LABEL_PREFIX]) {
    if (labelValues(set, reserved).length !== 0) fail(`label ${q(reserved)} is reserved`, 'labels');
  }
  validateSingleValueLabels(set);
}

/** Validates a JournalSpec as brokers do (wire.md §5.4). */
export function validateJournalSpec(spec: JournalSpec): void {
  validateJournalName(spec.name);
  const subject = `journal ${q(spec.name)}`;
  if (spec.replication < 1 || spec.replication > MAX_JOURNAL_REPLICATION) {
    fail(`replication: ${spec.replication} is out of range (1 to ${MAX_JOURNAL_REPLICATION})`, subject);
  }
  within(subject, () => validateJournalLabels(spec.labels));

  const fr = spec.fragment;
  const length = fr?.length ?? 0n;
  if (length < MIN_FRAGMENT_LENGTH || length > MAX_FRAGMENT_LENGTH) {
    fail(`fragment.length: ${length} is out of range (${MIN_FRAGMENT_LENGTH} to ${MAX_FRAGMENT_LENGTH})`, subject);
  }
  const codec = fr?.compression_codec ?? CompressionCodec.INVALID;
  if (!isValidCodec(codec)) {
    fail(`fragment.compression_codec: ${codecLabel(codec)} is not a valid codec (NONE, GZIP, ZSTANDARD, SNAPPY or GZIP_OFFLOAD_DECOMPRESSION)`, subject);
  }
  (fr?.stores ?? []).forEach((store, i) => {
    const p = checkStoreURL(store);
    if (p) fail(`fragment.stores[${i}] ${q(store)}: ${p}`, subject);
    if (i === 0 && store.toLowerCase().startsWith('file:') && codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION) {
      fail(`fragment.stores[0] ${q(store)}: GZIP_OFFLOAD_DECOMPRESSION cannot be used with a file:// store`, subject);
    }
  });
  const refresh = durationToNanos(fr?.refresh_interval);
  if (refresh < MIN_REFRESH_INTERVAL || refresh > MAX_REFRESH_INTERVAL) {
    fail(`fragment.refresh_interval: ${formatGoDuration(refresh)} is out of range (1s to 24h0m0s)`, subject);
  }
  const flush = durationToNanos(fr?.flush_interval);
  if (flush !== 0n && flush < MIN_FLUSH_INTERVAL) {
    fail(`fragment.flush_interval: ${formatGoDuration(flush)} must be 0s or at least 1m0s`, subject);
  }
  const tpl = fr?.path_postfix_template ?? '';
  const tp = checkGoTemplate(tpl);
  if (tp) fail(`fragment.path_postfix_template ${q(tpl)}: ${tp}`, subject);

  if (![0, 1, 2, 4].includes(spec.flags)) {
    fail(`flags: ${spec.flags} is not valid (0, O_RDONLY=1, O_WRONLY=2 or O_RDWR=4)`, subject);
  }
  if (spec.max_append_rate < 0n) fail(`max_append_rate: ${spec.max_append_rate} must be >= 0`, subject);
  if (spec.suspend) {
    const level = spec.suspend.level;
    if (![0, 1, 2].includes(level)) fail(`suspend.level: ${level} is not valid (NONE, PARTIAL or FULL)`, subject);
    if (spec.suspend.offset < 0n) fail(`suspend.offset: ${spec.suspend.offset} must be >= 0`, subject);
  }
}

/** Validates a ShardSpec as consumers do (wire.md §5.4). */
export function validateShardSpec(spec: ShardSpec): void {
  validateShardID(spec.id);
  const subject = `shard ${q(spec.id)}`;
  let prevJournal: string | undefined;
  spec.sources.forEach((src, i) => {
    within(subject, () => within(`sources[${i}]`, () => validateJournalName(src.journal)));
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
    if (labelValues(spec.labels, META_LABEL_ID).length !== 0) fail(`label ${q(META_LABEL_ID)} is reserved`, 'labels');
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

function checkRevision(rev: bigint, isDelete: boolean): string | undefined {
  if (rev === -1n) return undefined;
  if (isDelete && rev <= 0n) {
    return `expect_mod_revision ${rev} is invalid for a delete (expected > 0, or -1 to skip the check)`;
  }
  if (rev < 0n) return `expect_mod_revision ${rev} is invalid (expected 0 to create, > 0, or -1 to skip the check)`;
  return undefined;
}

/** Validates a broker ApplyRequest: each change is exactly one of upsert/delete, with valid revisions and specs. */
export function validateJournalApplyRequest(req: ApplyRequest): void {
  req.changes.forEach((ch, i) => {
    const at = `changes[${i}]`;
    if (ch.upsert && ch.delete !== '') {
      fail(`sets both upsert (journal ${q(ch.upsert.name)}) and delete (journal ${q(ch.delete)}); expected exactly one`, at);
    }
    if (ch.upsert) {
      within(at, () => validateJournalSpec(ch.upsert!));
      const p = checkRevision(ch.expect_mod_revision, false);
      if (p) fail(p, `${at}: journal ${q(ch.upsert.name)}`);
    } else if (ch.delete !== '') {
      within(at, () => validateJournalName(ch.delete));
      const p = checkRevision(ch.expect_mod_revision, true);
      if (p) fail(p, `${at}: delete journal ${q(ch.delete)}`);
    } else {
      fail('sets neither upsert nor delete; expected exactly one', at);
    }
  });
}

/** Validates a consumer ApplyRequest: like the broker's, plus primary_hints only with an upsert. */
export function validateShardApplyRequest(req: ShardApplyRequest): void {
  req.changes.forEach((ch, i) => {
    const at = `changes[${i}]`;
    if (ch.upsert && ch.delete !== '') {
      fail(`sets both upsert (shard ${q(ch.upsert.id)}) and delete (shard ${q(ch.delete)}); expected exactly one`, at);
    }
    if (ch.upsert) {
      within(at, () => validateShardSpec(ch.upsert!));
      const p = checkRevision(ch.expect_mod_revision, false);
      if (p) fail(p, `${at}: shard ${q(ch.upsert.id)}`);
      const hints = ch.primary_hints;
      if (hints) {
        const log = ch.upsert.recovery_log_prefix === '' ? '' : `${ch.upsert.recovery_log_prefix}/${ch.upsert.id}`;
        if (log === '') fail('primary_hints given but the shard has no recovery log', `${at}: shard ${q(ch.upsert.id)}`);
        if (hints.log !== log) {
          fail(`primary_hints log ${q(hints.log)} does not match the shard's recovery log ${q(log)}`, `${at}: shard ${q(ch.upsert.id)}`);
        }
      }
    } else if (ch.delete !== '') {
      within(at, () => validateShardID(ch.delete));
      const p = checkRevision(ch.expect_mod_revision, true);
      if (p) fail(p, `${at}: delete shard ${q(ch.delete)}`);
      if (ch.primary_hints) fail('primary_hints are only allowed with an upsert', `${at}: delete shard ${q(ch.delete)}`);
    } else {
      fail('sets neither upsert nor delete; expected exactly one', at);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Go text/template checking, for fragment.path_postfix_template.
// ---------------------------------------------------------------------------------------------
// Lexes actions, parses pipelines and control structure as text/template's parser does, rejects
// unknown functions and variables, and checks field names evaluated on the template's root data.

const BUILTIN_FUNCS = new Set([
  'and', 'call', 'html', 'index', 'slice', 'js', 'len', 'not', 'or', 'print', 'printf',
  'println', 'urlquery', 'eq', 'ge', 'gt', 'le', 'lt', 'ne',
]);

const KEYWORDS = new Set([
  'if', 'else', 'end', 'range', 'with', 'define', 'template', 'block', 'break', 'continue',
]);

/** Fields of the data a postfix template is executed over: JournalSpec fields plus Spool. */
const ROOT_FIELDS = new Set([
  'Spool', 'JournalSpec', 'Name', 'Replication', 'LabelSet', 'Fragment', 'Flags', 'MaxAppendRate',
  'Suspend',
]);
/** Fields of `.Spool`: the fragment's fields plus FirstAppendTime and Registers. */
const SPOOL_FIELDS = new Set([
  'Fragment', 'Journal', 'Begin', 'End', 'Sum', 'CompressionCodec', 'BackingStore', 'ModTime',
  'PathPostfix', 'FirstAppendTime', 'Registers',
]);

type TokKind =
  | 'string' | 'char' | 'number' | 'bool' | 'nil' | 'dot' | 'field' | 'variable' | 'ident'
  | 'keyword' | 'pipe' | 'lparen' | 'rparen' | 'declare' | 'assign' | 'comma' | 'end';

interface Tok {
  kind: TokKind;
  text: string;
  pos: number;
  /** A field that directly follows a term (`$x.A`, `(p).A`, `.A.B`). */
  chained?: boolean;
}

export class TemplateSyntaxError extends Error {
  constructor(message: string, readonly pos: number) {
    super(message);
  }
}

const IDENT_START = /[\p{L}_]/u;
const IDENT_CHAR = /[\p{L}\p{N}_]/u;
const NUMBER = /^[+-]?(?:0[xX][0-9a-fA-F_]*(?:\.[0-9a-fA-F_]*)?(?:[pP][+-]?[0-9_]+)?|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9_]+)?|\.[0-9][0-9_]*(?:[eE][+-]?[0-9_]+)?)i?/;

/** Lexes the inside of one action starting at `pos`; returns tokens and the index after `}}`. */
function lexAction(src: string, pos: number): { toks: Tok[]; next: number } {
  const toks: Tok[] = [];
  let i = pos;
  let parens = 0;
  const fail = (msg: string, at = i): never => {
    throw new TemplateSyntaxError(msg, at);
  };
  for (;;) {
    if (i >= src.length) fail('unclosed action', pos - 2);
    const c = src[i]!;
    if (src.startsWith(' -}}', i) || src.startsWith('\t-}}', i) || src.startsWith('\n-}}', i)) {
      if (parens > 0) fail('unclosed left paren');
      return { toks, next: i + 4 };
    }
    if (src.startsWith('}}', i)) {
      if (parens > 0) fail('unclosed left paren');
      return { toks, next: i + 2 };
    }
    if (c === ' ' || c === '\t' || c === '\r' || c === '\n') {
      i++;
      continue;
    }
    const start = i;
    if (c === '|') {
      toks.push({ kind: 'pipe', text: c, pos: i++ });
    } else if (c === '(') {
      parens++;
      toks.push({ kind: 'lparen', text: c, pos: i++ });
    } else if (c === ')') {
      if (--parens < 0) fail('unexpected right paren');
      toks.push({ kind: 'rparen', text: c, pos: i++ });
    } else if (c === ',') {
      toks.push({ kind: 'comma', text: c, pos: i++ });
    } else if (src.startsWith(':=', i)) {
      toks.push({ kind: 'declare', text: ':=', pos: i });
      i += 2;
    } else if (c === '=') {
      toks.push({ kind: 'assign', text: c, pos: i++ });
    } else if (c === '"') {
      i++;
      while (i < src.length && src[i] !== '"') {
        if (src[i] === '\\') i++;
        else if (src[i] === '\n') fail('unterminated quoted string', start);
        i++;
      }
      if (i >= src.length) fail('unterminated quoted string', start);
      i++;
      toks.push({ kind: 'string', text: src.slice(start, i), pos: start });
    } else if (c === '`') {
      const close = src.indexOf('`', i + 1);
      if (close === -1) fail('unterminated raw quoted string', start);
      i = close + 1;
      toks.push({ kind: 'string', text: src.slice(start, i), pos: start });
    } else if (c === "'") {
      i++;
      while (i < src.length && src[i] !== "'") {
        if (src[i] === '\\') i++;
        else if (src[i] === '\n') fail('unterminated character constant', start);
        i++;
      }
      if (i >= src.length) fail('unterminated character constant', start);
      i++;
      toks.push({ kind: 'char', text: src.slice(start, i), pos: start });
    } else if (c === '$') {
      i++;
      while (i < src.length && IDENT_CHAR.test(src[i]!)) i++;
      toks.push({ kind: 'variable', text: src.slice(start, i), pos: start });
    } else if (c === '.' && !/[0-9]/.test(src[i + 1] ?? '')) {
      i++;
      if (i < src.length && IDENT_START.test(src[i]!)) {
        while (i < src.length && IDENT_CHAR.test(src[i]!)) i++;
        toks.push({ kind: 'field', text: src.slice(start, i), pos: start });
      } else {
        if (src[i] === '.') fail('unexpected "." in operand', i);
        toks.push({ kind: 'dot', text: '.', pos: start });
      }
    } else if (/[0-9+\-.]/.test(c)) {
      const m = NUMBER.exec(src.slice(i));
      if (!m || !/[0-9]/.test(m[0])) fail(`bad number syntax: ${JSON.stringify(c)}`);
      i += m![0].length;
      if (i < src.length && IDENT_CHAR.test(src[i]!)) fail(`bad number syntax: ${JSON.stringify(src.slice(start, i + 1))}`, start);
      toks.push({ kind: 'number', text: src.slice(start, i), pos: start });
    } else if (IDENT_START.test(c)) {
      while (i < src.length && IDENT_CHAR.test(src[i]!)) i++;
      const word = src.slice(start, i);
      const kind: TokKind =
        word === 'true' || word === 'false' ? 'bool' : word === 'nil' ? 'nil' : KEYWORDS.has(word) ? 'keyword' : 'ident';
      toks.push({ kind, text: word, pos: start });
    } else {
      fail(`unexpected ${JSON.stringify(c)} in action`);
    }
    // Field chains may follow a term directly: $x.Foo, (pipeline).Foo, .A.B
    while (
      toks.length > 0 &&
      ['variable', 'field', 'rparen'].includes(toks[toks.length - 1]!.kind) &&
      src[i] === '.' &&
      IDENT_START.test(src[i + 1] ?? '')
    ) {
      const s = i;
      i++;
      while (i < src.length && IDENT_CHAR.test(src[i]!)) i++;
      toks.push({ kind: 'field', text: src.slice(s, i), pos: s, chained: true });
    }
  }
}

type Block = 'top' | 'if' | 'range' | 'with' | 'define' | 'block';

interface Frame {
  kind: Block;
  sawElse: boolean;
  vars: Set<string>;
  /** Whether dot is the template's root data here. */
  rootDot: boolean;
}

interface Chain {
  names: string[];
  /** Chains on `$` are always evaluated on the root data. */
  onRoot: boolean;
  pos: number;
}

class TemplateState {
  stack: Frame[] = [{ kind: 'top', sawElse: false, vars: new Set(['$']), rootDot: true }];
  defined = new Set<string>();
  called: { name: string; pos: number }[] = [];
  chains: Chain[] = [];

  top(): Frame {
    return this.stack[this.stack.length - 1]!;
  }

  declare(name: string): void {
    this.top().vars.add(name);
  }

  use(name: string, pos: number): void {
    if (!this.stack.some((f) => f.vars.has(name))) {
      throw new TemplateSyntaxError(`undefined variable ${JSON.stringify(name)}`, pos);
    }
  }

  /** Checks the field chains collected from one pipeline, evaluated where dot is (or isn't) root. */
  checkChains(rootDot: boolean): void {
    for (const c of this.chains.splice(0)) {
      if (!c.onRoot && !(rootDot && c.names.length > 0)) continue;
      const [a, b] = c.names;
      if (a === undefined) continue;
      if (!ROOT_FIELDS.has(a)) {
        throw new TemplateSyntaxError(`can't evaluate field ${a} of the postfix template data`, c.pos);
      }
      if (a === 'Spool' && b !== undefined && !SPOOL_FIELDS.has(b)) {
        throw new TemplateSyntaxError(`can't evaluate field ${b} of .Spool`, c.pos);
      }
    }
  }
}

class ActionParser {
  private i = 0;
  constructor(private readonly toks: Tok[], private readonly st: TemplateState, private readonly actionPos: number) {}

  private peek(): Tok | undefined {
    return this.toks[this.i];
  }

  private fail(msg: string, at?: number): never {
    throw new TemplateSyntaxError(msg, at ?? this.peek()?.pos ?? this.actionPos);
  }

  done(): boolean {
    return this.i >= this.toks.length;
  }

  next(): Tok | undefined {
    return this.toks[this.i++];
  }

  expectEnd(context: string): void {
    const t = this.peek();
    if (t) this.fail(`unexpected ${JSON.stringify(t.text)} in ${context}`);
  }

  /** pipeline := [declaration] command ('|' command)*, ending at ')' or the end of the action. */
  pipeline(context: string, allowDecl: boolean, allowTwoVars = false): void {
    const t0 = this.toks[this.i];
    const t1 = this.toks[this.i + 1];
    if (t0?.kind === 'variable' && (t1?.kind === 'declare' || t1?.kind === 'assign' || t1?.kind === 'comma')) {
      if (!allowDecl) this.fail(`unexpected variable declaration in ${context}`, t0.pos);
      const names = [t0.text];
      this.i += 2;
      let op = t1;
      if (t1.kind === 'comma') {
        if (!allowTwoVars) this.fail(`too many declarations in ${context}`, t1.pos);
        const v2 = this.next();
        if (v2?.kind !== 'variable') this.fail(`expected a variable after "," in ${context}`, v2?.pos);
        names.push(v2.text);
        const o = this.next();
        if (o?.kind !== 'declare' && o?.kind !== 'assign') this.fail(`expected ":=" or "=" in ${context}`, o?.pos);
        op = o;
      }
      for (const n of names) {
        if (op.kind === 'declare') this.st.declare(n);
        else this.st.use(n, op.pos);
      }
    }
    for (let stage = 1; ; stage++) {
      const t = this.peek();
      if (!t || t.kind === 'rparen') {
        this.fail(stage === 1 ? `missing value for ${context}` : 'missing command after "|"', t?.pos);
      }
      if (stage > 1 && ['string', 'char', 'number', 'bool', 'nil', 'dot'].includes(t.kind)) {
        this.fail(`non executable command in pipeline stage ${stage}`, t.pos);
      }
      this.command();
      if (this.peek()?.kind !== 'pipe') return;
      this.i++;
    }
  }

  private command(): void {
    const start = this.i;
    while (this.peek() && this.peek()!.kind !== 'pipe' && this.peek()!.kind !== 'rparen') this.operand();
    const count = this.i - start;
    if (count === 0) this.fail('missing value for command');
    if (count === 1 && this.toks[start]!.kind === 'nil') this.fail('nil is not a command', this.toks[start]!.pos);
  }

  private chainAfter(): string[] {
    const names: string[] = [];
    while (this.peek()?.kind === 'field' && this.peek()!.chained) names.push(this.next()!.text.slice(1));
    return names;
  }

  private operand(): void {
    const t = this.next()!;
    switch (t.kind) {
      case 'string': case 'char': case 'number': case 'bool': case 'nil': case 'dot':
        break;
      case 'field':
        this.st.chains.push({ names: [t.text.slice(1), ...this.chainAfter()], onRoot: false, pos: t.pos });
        return;
      case 'variable': {
        this.st.use(t.text, t.pos);
        const names = this.chainAfter();
        if (t.text === '$') this.st.chains.push({ names, onRoot: true, pos: t.pos });
        return;
      }
      case 'ident':
        if (!BUILTIN_FUNCS.has(t.text)) this.fail(`function ${JSON.stringify(t.text)} not defined`, t.pos);
        break;
      case 'lparen':
        this.pipeline('parenthesized pipeline', false);
        if (this.next()?.kind !== 'rparen') this.fail('unclosed left paren', t.pos);
        break;
      default:
        this.fail(`unexpected ${JSON.stringify(t.text)} in operand`, t.pos);
    }
    this.chainAfter();
  }
}

function lineCol(src: string, pos: number): string {
  const before = src.slice(0, pos);
  const line = before.split('\n').length;
  const col = pos - before.lastIndexOf('\n');
  return `line ${line}, column ${col}`;
}

/**
 * Checks a Go text/template source. Returns a description of the first problem found (with its
 * line and column), or undefined when the template is well formed.
 */
export function checkGoTemplate(src: string): string | undefined {
  try {
    parseTemplate(src);
    return undefined;
  } catch (e) {
    if (e instanceof TemplateSyntaxError) return `${e.message} at ${lineCol(src, Math.max(0, e.pos))}`;
    throw e;
  }
}

function parseTemplate(src: string): void {
  const st = new TemplateState();
  let i = 0;
  for (;;) {
    const open = src.indexOf('{{', i);
    if (open === -1) break;
    let p = open + 2;
    if (src[p] === '-' && /[ \t\r\n]/.test(src[p + 1] ?? '')) p += 2;
    if (src.startsWith('/*', p)) {
      const close = src.indexOf('*/', p + 2);
      if (close === -1) throw new TemplateSyntaxError('unclosed comment', open);
      const q = close + 2;
      if (src.startsWith('}}', q)) i = q + 2;
      else if (/^[ \t\r\n]-}}/.test(src.slice(q, q + 4))) i = q + 4;
      else throw new TemplateSyntaxError('comment ends before closing delimiter', q);
      continue;
    }
    const { toks, next } = lexAction(src, p);
    i = next;
    action(toks, st, open);
  }
  if (st.stack.length > 1) {
    throw new TemplateSyntaxError(`unexpected EOF: missing {{end}} for {{${st.top().kind}}}`, src.length);
  }
  for (const c of st.called) {
    if (!st.defined.has(c.name)) throw new TemplateSyntaxError(`no such template ${JSON.stringify(c.name)}`, c.pos);
  }
}

function action(toks: Tok[], st: TemplateState, pos: number): void {
  const p = new ActionParser(toks, st, pos);
  const first = toks[0];
  if (!first) throw new TemplateSyntaxError('missing value for command', pos);
  const top = st.top();
  const push = (kind: Block, rootDot: boolean): void => {
    st.stack.push({ kind, sawElse: false, vars: new Set(), rootDot });
  };
  if (first.kind !== 'keyword') {
    p.pipeline('command', true);
    p.expectEnd('command');
    st.checkChains(top.rootDot);
    return;
  }
  p.next();
  switch (first.text) {
    case 'end':
      p.expectEnd('end');
      if (top.kind === 'top') throw new TemplateSyntaxError('unexpected {{end}}', pos);
      st.stack.pop();
      return;
    case 'else': {
      if (top.kind !== 'if' && top.kind !== 'with' && top.kind !== 'range') {
        throw new TemplateSyntaxError('unexpected {{else}}', pos);
      }
      if (top.sawElse) throw new TemplateSyntaxError('expected {{end}}; found {{else}}', pos);
      const outerRoot = st.stack[st.stack.length - 2]!.rootDot;
      const nxt = toks[1];
      top.vars = new Set();
      if (nxt?.kind === 'keyword' && (nxt.text === 'if' || nxt.text === 'with')) {
        // {{else if ...}} / {{else with ...}} chain a nested block closed by the same {{end}}.
        p.next();
        p.pipeline(nxt.text, true);
        p.expectEnd(nxt.text);
        st.checkChains(outerRoot);
        top.kind = nxt.text;
        top.rootDot = nxt.text === 'if' ? outerRoot : false;
        return;
      }
      p.expectEnd('else');
      top.sawElse = true;
      top.rootDot = outerRoot;
      return;
    }
    case 'if':
    case 'with':
      p.pipeline(first.text, true);
      p.expectEnd(first.text);
      st.checkChains(top.rootDot);
      push(first.text, first.text === 'if' ? top.rootDot : false);
      return;
    case 'range':
      push('range', false);
      p.pipeline('range', true, true);
      p.expectEnd('range');
      st.checkChains(top.rootDot);
      return;
    case 'break':
    case 'continue':
      p.expectEnd(first.text);
      if (!st.stack.some((f) => f.kind === 'range')) {
        throw new TemplateSyntaxError(`{{${first.text}}} outside {{range}}`, pos);
      }
      return;
    case 'define': {
      if (top.kind !== 'top') throw new TemplateSyntaxError('unexpected {{define}} inside a block', pos);
      const name = p.next();
      if (name?.kind !== 'string') throw new TemplateSyntaxError('define: expected a quoted template name', pos);
      p.expectEnd('define');
      st.defined.add(unquote(name.text));
      // A defined template may be invoked with any data, so its fields aren't checked.
      push('define', false);
      return;
    }
    case 'block':
    case 'template': {
      const name = p.next();
      if (name?.kind !== 'string') {
        throw new TemplateSyntaxError(`${first.text}: expected a quoted template name`, pos);
      }
      if (!p.done()) p.pipeline(first.text, false);
      st.checkChains(top.rootDot);
      if (first.text === 'block') {
        st.defined.add(unquote(name.text));
        push('block', false);
      } else {
        st.called.push({ name: unquote(name.text), pos });
      }
      return;
    }
    default:
      throw new TemplateSyntaxError(`unexpected keyword ${first.text}`, pos);
  }
}

function unquote(s: string): string {
  if (s.startsWith('`')) return s.slice(1, -1);
  try {
    return JSON.parse(s) as string;
  } catch {
    return s.slice(1, -1);
  }
}
