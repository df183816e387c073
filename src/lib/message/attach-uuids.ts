// Attaching a message UUID to every line of text input (`gazctl attach-uuids`): lines are split
// as Go's bufio.Scanner splits them (on \n, a trailing \r dropped, a last line without a newline
// kept unless empty), each is rendered through a line template with a fresh UUID of one producer
// whose clock ticks once per line, and the output is handed on in large chunks.
//
// The template language is the part of Go's text/template that such templates use: text, the
// fields {{.UUID}} and {{.Line}}, comments, and the {{- / -}} trim markers. Anything else (pipelines,
// functions, conditionals) is refused up front rather than rendered differently.
import { GazctlError } from '../protocol/errors.js';
import { MessageFlags, UUIDSequence, UUID_STRING_LENGTH } from './uuid.js';

/** A template that cannot be used: malformed, or beyond fields, comments and trim markers. */
export class LineTemplateError extends GazctlError {}

/** A line of input at or over the maximum length. */
export class LineTooLongError extends GazctlError {
  constructor(readonly input: string, readonly line: number, readonly maxLength: number) {
    super(`line ${line} of ${input} is too long (a line, counting its newline, may be at most ${maxLength} bytes)`);
  }
}

type Part = { kind: 'text'; bytes: Buffer } | { kind: 'uuid' } | { kind: 'line' };

/** A compiled line template. */
export interface LineTemplate {
  readonly source: string;
  readonly parts: readonly Part[];
}

export const DEFAULT_LINE_TEMPLATE = '{{.UUID}},{{.Line}}\n';

const SPACE = /[ \t\r\n]/;

function trimRight(s: string): string {
  let e = s.length;
  while (e > 0 && SPACE.test(s[e - 1]!)) e--;
  return s.slice(0, e);
}

function trimLeft(s: string): string {
  let b = 0;
  while (b < s.length && SPACE.test(s[b]!)) b++;
  return s.slice(b);
}

function where(src: string, pos: number): string {
  const before = src.slice(0, pos);
  return `line ${before.split('\n').length}, column ${pos - before.lastIndexOf('\n')}`;
}

/**
 * Compiles a line template. Throws LineTemplateError naming the first action it does not
 * support, or what is malformed.
 */
export function compileLineTemplate(src: string): LineTemplate {
  const raw: (Part | { kind: 'rawtext'; text: string })[] = [];
  let i = 0;
  let trimNext = false;
  for (;;) {
    const open = src.indexOf('{{', i);
    let text = src.slice(i, open === -1 ? src.length : open);
    if (trimNext) text = trimLeft(text);
    let p = open + 2;
    // A left trim marker is "{{-" followed by white space: it trims the text before.
    const trimLeftMarker = open !== -1 && src[p] === '-' && SPACE.test(src[p + 1] ?? '');
    if (trimLeftMarker) text = trimRight(text);
    if (text !== '') raw.push({ kind: 'rawtext', text });
    if (open === -1) break;
    if (trimLeftMarker) p += 2;
    trimNext = false;
    if (src.startsWith('/*', p)) {
      // A comment: "/*" right after the delimiter (and trim marker), "*/" right before the end.
      const end = src.indexOf('*/', p + 2);
      if (end === -1) throw new LineTemplateError(`unclosed comment at ${where(src, open)}`);
      if (src.startsWith('}}', end + 2)) i = end + 4;
      else if (SPACE.test(src[end + 2] ?? '') && src.startsWith('-}}', end + 3)) {
        i = end + 6;
        trimNext = true;
      } else throw new LineTemplateError(`comment ends before the closing delimiter at ${where(src, open)}`);
      continue;
    }
    // The action runs to the first "}}" (the actions supported hold no strings that could contain one).
    const close = src.indexOf('}}', p);
    if (close === -1) throw new LineTemplateError(`unclosed action at ${where(src, open)}`);
    let inner = src.slice(p, close);
    if (close - 2 >= p && src[close - 1] === '-' && SPACE.test(src[close - 2] ?? '')) {
      trimNext = true;
      inner = inner.slice(0, -2);
    }
    const body = inner.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
    i = close + 2;
    if (body === '.UUID') raw.push({ kind: 'uuid' });
    else if (body === '.Line') raw.push({ kind: 'line' });
    else {
      const shown = `{{${src.slice(open + 2, close)}}}`;
      throw new LineTemplateError(
        `unsupported template action ${shown} at ${where(src, open)}: only the fields {{.UUID}} and {{.Line}}, comments and trim markers are supported`,
      );
    }
  }
  // Adjacent texts (around comments) are merged.
  const parts: Part[] = [];
  for (const r of raw) {
    if (r.kind === 'rawtext') {
      const last = parts[parts.length - 1];
      const bytes = Buffer.from(r.text, 'utf8');
      if (last?.kind === 'text') last.bytes = Buffer.concat([last.bytes, bytes]);
      else parts.push({ kind: 'text', bytes });
    } else parts.push(r);
  }
  return { source: src, parts };
}

/** Renders one line (for tests and small uses; attachUUIDs writes straight into its buffers). */
export function renderLine(t: LineTemplate, uuid: string, line: string | Uint8Array): Buffer {
  const l = typeof line === 'string' ? Buffer.from(line, 'utf8') : Buffer.from(line);
  return Buffer.concat(t.parts.map((p) => (p.kind === 'text' ? p.bytes : p.kind === 'uuid' ? Buffer.from(uuid, 'latin1') : l)));
}

/** One input: a name for messages (a path, or "stdin") and its bytes. */
export interface LineInput {
  name: string;
  chunks: AsyncIterable<Uint8Array>;
}

export interface AttachUUIDsOptions {
  template: LineTemplate;
  /** A line and its newline must fit in this many bytes (Go's Scanner buffer limit). */
  maxLength: number;
  /** Drop the first line of each input. */
  skipHeader?: boolean;
  /** The producer and clock (default: a new random producer, clock at now). */
  sequence?: UUIDSequence;
  /** Wall time in unix ms, read once per input chunk to move the clock forward (default Date.now). */
  now?: () => number;
  /** Flags of every UUID (default OUTSIDE_TXN: committed, processed at once). */
  flags?: number;
  /** Size of the output chunks handed to `write` (default 256 KiB). */
  chunkSize?: number;
}

export interface AttachUUIDsResult {
  /** Lines written. */
  lines: number;
}

/**
 * Reads the inputs one after the other and hands rendered lines to `write` in chunks; each chunk
 * is a new buffer, which `write` may keep. Lines before a too-long line are written out before
 * the LineTooLongError is thrown.
 */
export async function attachUUIDs(
  inputs: LineInput[],
  write: (chunk: Buffer) => Promise<void> | void,
  opts: AttachUUIDsOptions,
): Promise<AttachUUIDsResult> {
  const seq = opts.sequence ?? new UUIDSequence();
  const now = opts.now ?? Date.now;
  const flags = opts.flags ?? MessageFlags.OUTSIDE_TXN;
  const chunkSize = Math.max(opts.chunkSize ?? 256 * 1024, 64);
  const parts = opts.template.parts;
  const max = opts.maxLength;
  let fixed = 0;
  let lineRefs = 0;
  for (const p of parts) {
    if (p.kind === 'text') fixed += p.bytes.length;
    else if (p.kind === 'uuid') fixed += UUID_STRING_LENGTH;
    else lineRefs++;
  }

  let out = Buffer.allocUnsafe(chunkSize);
  let at = 0;
  let lines = 0;
  const flush = async (): Promise<void> => {
    if (at === 0) return;
    const chunk = out.subarray(0, at);
    out = Buffer.allocUnsafe(chunkSize);
    at = 0;
    await write(chunk);
  };

  /** Renders one line; `line` excludes its newline and trailing \r. */
  const emit = async (line: Uint8Array): Promise<void> => {
    const need = fixed + lineRefs * line.length;
    if (at + need > out.length) {
      await flush();
      if (need > out.length) out = Buffer.allocUnsafe(need);
    }
    for (const p of parts) {
      if (p.kind === 'text') {
        if (p.bytes.length === 1) out[at++] = p.bytes[0]!;
        else {
          out.set(p.bytes, at);
          at += p.bytes.length;
        }
      } else if (p.kind === 'uuid') {
        at = seq.writeNext(out, at, flags);
      } else {
        out.set(line, at);
        at += line.length;
      }
    }
    lines++;
  };

  for (const input of inputs) {
    let lineNo = 0;
    let skip = opts.skipHeader ?? false;
    // The start of a line not yet ended by a newline, over one or more chunks.
    let pending: Uint8Array[] = [];
    let pendingLen = 0;
    const take = async (line: Uint8Array): Promise<void> => {
      lineNo++;
      let end = line.length;
      if (end > 0 && line[end - 1] === 0x0d) end--;
      if (skip) {
        skip = false;
        return;
      }
      await emit(end === line.length ? line : line.subarray(0, end));
    };
    const tooLong = async (): Promise<never> => {
      await flush();
      throw new LineTooLongError(input.name, lineNo + 1, max);
    };
    for await (const chunk of input.chunks) {
      seq.clock.update(now());
      let pos = 0;
      for (;;) {
        const nl = chunk.indexOf(0x0a, pos);
        if (nl === -1) break;
        // The line's bytes before the newline; with the newline they must fit in `max`.
        if (pendingLen + (nl - pos) >= max) await tooLong();
        if (pendingLen > 0) {
          pending.push(chunk.subarray(pos, nl));
          const joined = Buffer.concat(pending, pendingLen + (nl - pos));
          pending = [];
          pendingLen = 0;
          await take(joined);
        } else {
          await take(chunk.subarray(pos, nl));
        }
        pos = nl + 1;
      }
      if (pos < chunk.length) {
        pendingLen += chunk.length - pos;
        if (pendingLen >= max) await tooLong();
        // A copy: the input may reuse its chunk's memory once it has handed out the next one.
        pending.push(Buffer.from(chunk.subarray(pos)));
      }
    }
    // A last line without a newline.
    if (pendingLen > 0) {
      await take(Buffer.concat(pending, pendingLen));
    }
  }
  await flush();
  return { lines };
}
