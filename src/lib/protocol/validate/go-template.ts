// Go text/template checking, for fragment.path_postfix_template: lexes actions, parses pipelines
// and control structure as text/template's parser does, rejects unknown functions and variables,
// and checks field names evaluated on the template's root data.
import { CompressionCodec, type Fragment, type JournalSpec, type LabelSet } from '../gen/broker/protocol.js';
import { fail, q } from './common.js';

/** A Go text/template source (as used by fragment.path_postfix_template). */
export function validateGoTemplate(src: string): void {
  const p = checkGoTemplate(src);
  if (p) fail(p, `template ${q(src)}`);
}

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
  // Text without an action is a template as it stands (the usual empty template included).
  if (!src.includes('{{')) return undefined;
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
