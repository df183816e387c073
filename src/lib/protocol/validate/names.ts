// Names and endpoints: journal names, shard IDs, path postfixes, process IDs, endpoint URLs.
// A name is a clean relative path of allowed symbols between its byte bounds.
import { type ProcessSpec_ID } from '../gen/broker/protocol.js';
import { PATH_SYMBOLS, TOKEN_SYMBOLS, checkAlphabet } from '../labels.js';
import { fail, q } from './common.js';

export const JOURNAL_NAME_MIN_BYTES = 4;
export const JOURNAL_NAME_MAX_BYTES = 512;
export const SHARD_ID_MIN_BYTES = 4;
export const SHARD_ID_MAX_BYTES = 512;
export const PATH_POSTFIX_MAX_BYTES = 512;
export const ZONE_MIN_BYTES = 1;
export const ZONE_MAX_BYTES = 32;
export const SUFFIX_MIN_BYTES = 4;
export const SUFFIX_MAX_BYTES = 128;

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

/**
 * A quick sufficient test of cleanPath(s) === s for a non-empty `s`, without building the
 * cleaned path: true when no segment is empty, `.` or `..` (or `s` is the root `/`). False means
 * "ask cleanPath" (`.`, or leading `..` segments, are clean too).
 */
export function plainlyClean(s: string): boolean {
  if (s === '/') return true;
  let beg = s.charCodeAt(0) === 0x2f ? 1 : 0;
  for (;;) {
    let end = s.indexOf('/', beg);
    if (end === -1) end = s.length;
    const n = end - beg;
    if (n === 0) return false;
    if (s.charCodeAt(beg) === 0x2e && (n === 1 || (n === 2 && s.charCodeAt(beg + 1) === 0x2e))) return false;
    if (end === s.length) return true;
    beg = end + 1;
  }
}

/** Problem with a path component (journal names, postfixes), or undefined. */
export function checkPathComponent(s: string, min: number, max: number): string | undefined {
  const p = checkAlphabet(s, PATH_SYMBOLS, min, max);
  if (p) return p;
  if (s !== '' && !plainlyClean(s) && cleanPath(s) !== s) return `must be a clean path (like ${q(cleanPath(s))})`;
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
