// A quick reader for the plain block YAML that spec documents are written in (what `journals
// list -o yaml` and Go gazctl print, and what people usually write by hand), producing the same
// node tree the `yaml` package composes for it, at a fraction of the cost for large documents.
//
// It takes only a deliberately small subset and gives up (returns undefined) on anything else, so
// that the caller can use the full parser for that text:
//   * printable ASCII and line feeds only (no tabs, carriage returns or other characters);
//   * block mappings whose keys are lower-case words (`[a-z_]+`), one `key: value` or `key:`
//     per line, and block sequences of `- ` items (scalars or mappings), a sequence possibly at
//     its key's own indentation;
//   * single-line scalars: plain, single-quoted, double-quoted without escapes, or the empty
//     flow collections `[]` and `{}`;
//   * comments only on lines of their own.
// Anchors, aliases, tags, block scalars, multi-line scalars, flow collections with content,
// documents markers and directives, explicit keys, empty values and anything malformed are all
// left to the full parser, as are the error messages: callers decode the tree this returns and,
// should that fail for any reason, decode again from the full parser's tree (see `StrictDoc`).
import { LineCounter, Pair, Scalar, YAMLMap, YAMLSeq, type Node as YNode } from 'yaml';

// Nodes are made from templates rather than by the yaml package's constructors, which mark each
// node's kind with an Object.defineProperty call (five a `- name: x` item), a good part of the
// cost of reading a large listing. An object whose prototype is a template node inherits that
// mark, so it is a Scalar, Pair, YAMLMap or YAMLSeq to yaml's own isScalar/isMap/... checks (and
// to instanceof); what it holds (value, items, type, range) is its own.
const SCALAR = new Scalar(null);
const PAIR = new Pair(null);
const MAP = new YAMLMap();
const SEQ = new YAMLSeq();

function newScalar(value: string, type: Scalar.Type, begin: number, end: number): Scalar {
  const s = Object.create(SCALAR) as Scalar;
  s.value = value;
  s.type = type;
  s.range = [begin, end, end];
  return s;
}

function newPair(key: YNode, value: YNode): Pair {
  const p = Object.create(PAIR) as Pair;
  p.key = key;
  p.value = value;
  return p;
}

function newMap(): YAMLMap {
  const m = Object.create(MAP) as YAMLMap;
  m.items = [];
  return m;
}

function newSeq(): YAMLSeq {
  const q = Object.create(SEQ) as YAMLSeq;
  q.items = [];
  return q;
}

/** Gives up on this text. */
const GIVE_UP: unique symbol = Symbol('fast-parse: use the full parser');

// Lines of the document being read (comment and blank lines dropped), with their indentation
// and offsets. Reading is synchronous, so module state is safe.
let lines: string[] = [];
let starts: number[] = [];
let indents: number[] = [];
/** Whether blank or comment lines were dropped just before the line. */
let gapBefore: boolean[] = [];
let at = 0;

const KEY = /^([a-z_]+):(?: +|$)/;
/** Characters a plain scalar of this subset may not start with. */
const PLAIN_FIRST_BAD = new Set(['?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', "'", '"', '%', '@', '`', ' ']);

function scalarNode(text: string, offset: number): YNode {
  const c = text[0]!;
  if (c === "'") {
    if (text.length < 2 || text[text.length - 1] !== "'") throw GIVE_UP;
    const inner = text.slice(1, -1);
    // Inside, quotes come only in pairs (each pair stands for one quote).
    if (inner.replace(/''/g, '').includes("'")) throw GIVE_UP;
    return newScalar(inner.replace(/''/g, "'"), Scalar.QUOTE_SINGLE, offset, offset + text.length) as YNode;
  }
  if (c === '"') {
    if (text.length < 2 || text[text.length - 1] !== '"') throw GIVE_UP;
    const inner = text.slice(1, -1);
    if (inner.includes('"') || inner.includes('\\')) throw GIVE_UP;
    return newScalar(inner, Scalar.QUOTE_DOUBLE, offset, offset + text.length) as YNode;
  }
  if (text === '[]') {
    const q = newSeq();
    q.flow = true;
    q.range = [offset, offset + 2, offset + 2];
    return q as YNode;
  }
  if (text === '{}') {
    const m = newMap();
    m.flow = true;
    m.range = [offset, offset + 2, offset + 2];
    return m as YNode;
  }
  if (PLAIN_FIRST_BAD.has(c)) throw GIVE_UP;
  // `- x` would be a sequence; `-x` is a plain scalar (e.g. -1).
  if (c === '-' && (text.length === 1 || text[1] === ' ')) throw GIVE_UP;
  // A `: ` or a trailing `:` would start a mapping inside the value.
  if (text.includes(': ') || text[text.length - 1] === ':') throw GIVE_UP;
  return newScalar(text, Scalar.PLAIN, offset, offset + text.length) as YNode;
}

/** The block at line `at`, whose first line is indented by `indent`. */
function block(indent: number): YNode {
  const content = lines[at]!.slice(indent);
  if (content === '[]' || content === '{}') {
    // An empty flow collection on a line of its own (e.g. the `{}` of an empty listing).
    const node = scalarNode(content, starts[at]! + indent);
    at++;
    return node;
  }
  if (content === '-' || content.startsWith('- ')) return sequence(indent);
  return mapping(indent, indent, content);
}

/**
 * A block mapping whose keys sit at column `indent`; its first key is at column `col` of line
 * `at` (col > indent's line start when the mapping starts after a `- `).
 */
function mapping(indent: number, col: number, firstContent: string): YNode {
  const map = newMap();
  const begin = starts[at]! + col;
  let content = firstContent;
  let first = true;
  for (;;) {
    const m = KEY.exec(content);
    if (!m) throw GIVE_UP;
    const lineStart = starts[at]!;
    const keyCol = first ? col : indent;
    const key = newScalar(m[1]!, Scalar.PLAIN, lineStart + keyCol, lineStart + keyCol + m[1]!.length);
    const rest = content.slice(m[0].length);
    let value: YNode;
    if (rest !== '') {
      const offset = lineStart + keyCol + m[0].length;
      at++;
      value = scalarNode(continued(rest, indent), offset);
    } else {
      at++;
      if (at >= lines.length) throw GIVE_UP; // an empty value
      const next = indents[at]!;
      if (next > indent) value = block(next);
      else if (next === indent && isItem(lines[at]!, indent)) value = sequence(indent);
      else throw GIVE_UP; // an empty value
    }
    map.items.push(newPair(key as YNode, value));
    first = false;
    if (at >= lines.length) break;
    const next = indents[at]!;
    if (next < indent) break;
    if (next > indent) throw GIVE_UP; // a continuation line or a stray indent
    content = lines[at]!.slice(indent);
    if (isItem(lines[at]!, indent)) break; // a sequence item of an enclosing compact sequence
  }
  map.range = [begin, starts[at] ?? endOffset, starts[at] ?? endOffset];
  return map as YNode;
}

/**
 * A plain value folded over more-indented lines (as Go's yaml.v2 writes values past 80 columns):
 * the lines joined by single spaces. Quoted values over several lines, continuation lines
 * after a blank or comment line (which would add a line break or end the value), and lines that
 * could read as something else give up.
 */
function continued(first: string, indent: number): string {
  if (at >= lines.length || indents[at]! <= indent) return first;
  const c = first[0]!;
  if (c === "'" || c === '"') return continuedQuoted(first, indent, c);
  if (c === '[' || c === '{') throw GIVE_UP;
  let text = first;
  while (at < lines.length && indents[at]! > indent) {
    if (gapBefore[at]) throw GIVE_UP;
    const part = lines[at]!.slice(indents[at]!);
    if (part === '-' || part.startsWith('- ') || part.includes(': ') || part[part.length - 1] === ':') throw GIVE_UP;
    text += ' ' + part;
    at++;
  }
  return text;
}

/** Where the quoted scalar starting `text` ends (the index after its closing quote), or -1. */
function quotedEnd(text: string, q: string): number {
  for (let i = 1; i < text.length; i++) {
    if (text[i] !== q) continue;
    if (q === "'" && text[i + 1] === "'") {
      i++;
      continue;
    }
    return i + 1;
  }
  return -1;
}

/** A quoted value folded over more-indented lines: joined by single spaces. */
function continuedQuoted(first: string, indent: number, q: string): string {
  let text = first;
  for (;;) {
    const end = quotedEnd(text, q);
    if (end === text.length) return text;
    if (end !== -1 || at >= lines.length || indents[at]! <= indent || gapBefore[at]) throw GIVE_UP;
    text += ' ' + lines[at]!.slice(indents[at]!);
    at++;
  }
}

function isItem(line: string, indent: number): boolean {
  return line.charCodeAt(indent) === 0x2d && (line.length === indent + 1 || line.charCodeAt(indent + 1) === 0x20);
}

/** A block sequence whose dashes sit at column `indent`, from line `at`. */
function sequence(indent: number): YNode {
  const seq = newSeq();
  const begin = starts[at]! + indent;
  for (;;) {
    const line = lines[at]!;
    if (!isItem(line, indent)) throw GIVE_UP;
    let col = indent + 1;
    while (line.charCodeAt(col) === 0x20) col++;
    if (col >= line.length) throw GIVE_UP; // `-` with the item on the next lines
    const content = line.slice(col);
    if (isItem(line, col)) throw GIVE_UP; // a nested `- - x`
    if (KEY.test(content)) {
      seq.items.push(mapping(col, col, content));
    } else {
      seq.items.push(scalarNode(content, starts[at]! + col));
      at++;
    }
    if (at >= lines.length) break;
    const next = indents[at]!;
    if (next < indent) break;
    if (next > indent) throw GIVE_UP;
    if (!isItem(lines[at]!, indent)) break; // the next key of the mapping holding this sequence
  }
  seq.range = [begin, starts[at] ?? endOffset, starts[at] ?? endOffset];
  return seq as YNode;
}

let endOffset = 0;

/** Only printable ASCII and line feeds. */
const OUTSIDE_SUBSET = /[^\n\x20-\x7e]/;

/**
 * The document's root node (null for a document of only blank and comment lines) and its line
 * positions, or undefined when the text is outside the subset described above.
 */
export function fastParse(text: string): { root: YNode | null; lineCounter: LineCounter } | undefined {
  if (OUTSIDE_SUBSET.test(text)) return undefined;
  const lineCounter = new LineCounter();
  lines = [];
  starts = [];
  indents = [];
  gapBefore = [];
  at = 0;
  endOffset = text.length;
  let off = 0;
  let gap = false;
  try {
    while (off <= text.length) {
      let nl = text.indexOf('\n', off);
      if (nl < 0) nl = text.length;
      lineCounter.addNewLine(off);
      let i = off;
      while (i < nl && text.charCodeAt(i) === 0x20) i++;
      // Blank lines and whole-line comments carry nothing; a `#` anywhere else gives up.
      if (i < nl && text.charCodeAt(i) !== 0x23) {
        let end = nl;
        while (text.charCodeAt(end - 1) === 0x20) end--;
        const line = text.slice(off, end);
        if (line.includes('#')) throw GIVE_UP;
        lines.push(line);
        starts.push(off);
        indents.push(i - off);
        gapBefore.push(gap);
        gap = false;
      } else gap = true;
      off = nl + 1;
    }
    if (lines.length === 0) return { root: null, lineCounter };
    if (indents[0] !== 0 && lines.some((_, k) => indents[k]! < indents[0]!)) throw GIVE_UP;
    const root = block(indents[0]!);
    if (at !== lines.length) throw GIVE_UP; // something after the root block
    return { root, lineCounter };
  } catch (err) {
    if (err === GIVE_UP) return undefined;
    throw err;
  } finally {
    lines = [];
    starts = [];
    indents = [];
    gapBefore = [];
  }
}
