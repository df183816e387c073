// JSON messages as Gazette's Go applications read and write them (the JSON lines framing:
// one JSON document per line). A Go message struct usually carries its UUID in a field named
// `UUID` without a json tag, so the document's key is "UUID" and its value the UUID's text form;
// Go's encoding/json matches keys to fields case-insensitively (the last matching key wins), and
// google/uuid accepts four text forms. Decoding follows those rules so that a line is taken the
// same way by a Go consumer and by ours; encoding writes what Go's json.Encoder writes: the fields
// in order, `<`, `>`, `&`, U+2028 and U+2029 escaped, a newline at the end.
import { GazctlError } from '../protocol/errors.js';
import type { UUID } from './uuid.js';
import { formatUUID } from './uuid.js';

export class JsonMessageError extends GazctlError {}

/** A UUID of 16 zero bytes: what a document without one decodes to. */
export const ZERO_UUID: UUID = new Uint8Array(16);

/**
 * Whether a document key matches a Go struct field name as encoding/json matches them: equal
 * under Unicode simple case folding. For ASCII field names that is ASCII case-insensitivity
 * plus two non-ASCII letters that fold to ASCII ones: the Kelvin sign (k) and the long s (s).
 */
export function goJsonKeyMatches(key: string, field: string): boolean {
  if (key.length !== field.length) return false;
  for (let i = 0; i < key.length; i++) {
    let a = key.charCodeAt(i);
    let b = field.charCodeAt(i);
    if (a === b) continue;
    if (a === 0x212a) a = 0x6b;
    else if (a === 0x17f) a = 0x73;
    if (b === 0x212a) b = 0x6b;
    else if (b === 0x17f) b = 0x73;
    if (a >= 0x41 && a <= 0x5a) a += 0x20;
    if (b >= 0x41 && b <= 0x5a) b += 0x20;
    if (a !== b) return false;
  }
  return true;
}

/**
 * The value Go would decode into struct field `field` from a parsed JSON object: the last key that
 * matches (undefined when none does). JSON.parse keeps one value per exact key, at the position of
 * its first occurrence, so for a document repeating a key in different cases this can differ from
 * Go (which takes the last in the text); such documents are not expected in practice.
 */
export function goJsonField(obj: Record<string, unknown>, field: string): unknown {
  let found: unknown;
  for (const k of Object.keys(obj)) if (goJsonKeyMatches(k, field)) found = obj[k];
  return found;
}

const HEX32 = /^[0-9a-fA-F]{32}$/;
const DASHED = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * Parses a UUID's text as google/uuid does: `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the same in
 * braces or after `urn:uuid:` (prefix in any case), or 32 hex digits without dashes.
 */
export function parseGoUUID(text: string): UUID {
  let t = text;
  if (t.length === 45 && t.slice(0, 9).toLowerCase() === 'urn:uuid:') t = t.slice(9);
  else if (t.length === 38 && t[0] === '{' && t[37] === '}') t = t.slice(1, 37);
  else if (t.length === 32 && HEX32.test(t)) return new Uint8Array(Buffer.from(t, 'hex'));
  if (t.length !== 36) throw new JsonMessageError(`invalid UUID length: ${text.length}`);
  if (!DASHED.test(t)) throw new JsonMessageError(`invalid UUID format: ${JSON.stringify(text)}`);
  return new Uint8Array(Buffer.from(t.replace(/-/g, ''), 'hex'));
}

/**
 * The UUID of a decoded JSON message, from its `UUID` field as Go decodes it: absent or null is
 * the zero UUID (the message is then committed at once by a sequencer); a string is parsed;
 * anything else is an error.
 */
export function jsonMessageUUID(obj: Record<string, unknown>, field = 'UUID'): UUID {
  const v = goJsonField(obj, field);
  if (v === undefined || v === null) return ZERO_UUID;
  if (typeof v !== 'string') throw new JsonMessageError(`field ${field} holds a ${Array.isArray(v) ? 'array' : typeof v}, not a UUID string`);
  return parseGoUUID(v);
}

/** Parses one JSON line (a trailing \r\n or \n is allowed) into an object and its UUID. */
export function decodeJsonMessage(line: Buffer | string, field = 'UUID'): { doc: Record<string, unknown>; uuid: UUID } {
  const text = typeof line === 'string' ? line : line.toString('utf8');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new JsonMessageError(`not a JSON document: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new JsonMessageError('a JSON message is an object');
  const obj = doc as Record<string, unknown>;
  return { doc: obj, uuid: jsonMessageUUID(obj, field) };
}

const GO_ESCAPES: Record<string, string> = { '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', '\u2028': '\\u2028', '\u2029': '\\u2029' };

/** JSON.stringify output with the characters Go's encoder escapes (HTML-safe) escaped the same way. */
export function goJsonStringify(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => GO_ESCAPES[c]!);
}

/**
 * The JSON line of a message with its UUID, as a Go struct whose first field is `UUID` encodes:
 * `{"UUID":"<uuid>",<the message's other fields in order>}` and a newline. A `UUID` key of the
 * message itself is replaced.
 */
export function encodeJsonMessage(message: Record<string, unknown>, uuid: UUID, field = 'UUID'): Buffer {
  const out: Record<string, unknown> = { [field]: formatUUID(uuid) };
  for (const [k, v] of Object.entries(message)) if (k !== field) out[k] = v;
  return Buffer.from(goJsonStringify(out) + '\n', 'utf8');
}
