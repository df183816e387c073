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

/**
 * Parses a UUID's text as google/uuid (v1.6.0, Gazette's) does, over its UTF-8 bytes: 36 bytes
 * `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`; 45 with a `urn:uuid:` prefix in any case; 38, of which
 * the first byte is dropped and the last ignored (meant for braces, but Go checks neither); or 32
 * hex digits without dashes. Hex digits of either case.
 */
export function parseGoUUID(text: string): UUID {
  let b = Buffer.from(text, 'utf8');
  switch (b.length) {
    case 36:
      break;
    case 45:
      if (b.subarray(0, 9).toString('latin1').toLowerCase() !== 'urn:uuid:') {
        throw new JsonMessageError(`invalid urn prefix: ${JSON.stringify(b.subarray(0, 9).toString('utf8'))}`);
      }
      b = b.subarray(9);
      break;
    case 38:
      b = b.subarray(1);
      break;
    case 32: {
      const out = new Uint8Array(16);
      for (let i = 0; i < 32; i += 2) out[i / 2] = hexByte(b, i);
      return out;
    }
    default:
      throw new JsonMessageError(`invalid UUID length: ${b.length}`);
  }
  if (b[8] !== 0x2d || b[13] !== 0x2d || b[18] !== 0x2d || b[23] !== 0x2d) throw new JsonMessageError(`invalid UUID format: ${JSON.stringify(text)}`);
  const out = new Uint8Array(16);
  HEX_AT.forEach((x, i) => (out[i] = hexByte(b, x, text)));
  return out;
}

/**
 * parseGoUUID of `b[start, end)`, ASCII text already in bytes (the caller checked there are no
 * bytes above 0x7f, so byte and character lengths agree): no string or Buffer is made.
 */
export function parseGoUUIDBytes(b: Uint8Array, start: number, end: number): UUID {
  if (end - start === 36 && b[start + 8] === 0x2d && b[start + 13] === 0x2d && b[start + 18] === 0x2d && b[start + 23] === 0x2d) {
    const out = new Uint8Array(16);
    for (let i = 0; i < 16; i++) {
      const at = start + HEX_AT[i]!;
      const hi = hexDigit(b[at]!);
      const lo = hexDigit(b[at + 1]!);
      if (hi < 0 || lo < 0) break;
      out[i] = (hi << 4) | lo;
      if (i === 15) return out;
    }
  }
  return parseGoUUID(Buffer.from(b.buffer, b.byteOffset + start, end - start).toString('latin1'));
}

const HEX_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

function hexByte(b: Uint8Array, at: number, text?: string): number {
  const hi = hexDigit(b[at]!);
  const lo = hexDigit(b[at + 1]!);
  if (hi < 0 || lo < 0) throw new JsonMessageError(`invalid UUID format${text === undefined ? '' : `: ${JSON.stringify(text)}`}`);
  return (hi << 4) | lo;
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
