// Evaluates a journal's fragment.path_postfix_template, a Go text/template, into the directory
// path between the journal and a persisted fragment's name (e.g. `date=2024-01-02/`).
//
// The template's data is what upstream brokers pass: `.Spool` (the fragment fields Journal,
// Begin, End, CompressionCodec, BackingStore, ModTime, PathPostfix, plus FirstAppendTime and
// Registers) and the JournalSpec's fields (Name, Replication, Flags, MaxAppendRate, and the spec
// itself as `.JournalSpec`).
//
// Supported here: text; actions holding one pipeline of field chains on `.` or `$`, string and
// number literals, the time methods Format, UTC, Unix, Year, YearDay, Month, Day, Hour, Minute,
// Second, and the functions print, printf (verbs %s %d %v %q %x with width and 0/- flags) and
// urlquery; comments; `{{-`/`-}}` trimming. Templates are first checked as the API checks them
// (checkGoTemplate); control structures (if, range, with, define, template) pass that check but
// are refused here with a PostfixTemplateError naming them.
import { CompressionCodec, type JournalSpec, type LabelSet } from '../../lib/protocol/gen/broker/protocol.js';
import { checkGoTemplate } from '../../lib/protocol/validate/go-template.js';
import { formatGoTime, goTimeString } from './gotime.js';

export class PostfixTemplateError extends Error {}

/** The spool fields a template sees. */
export interface PostfixSpool {
  journal: string;
  begin: bigint;
  end: bigint;
  compressionCodec: CompressionCodec;
  firstAppendTime: Date;
  registers?: LabelSet;
  backingStore?: string;
}

class GoTime {
  constructor(readonly t: Date) {}
  toString(): string {
    return goTimeString(this.t);
  }
}
class GoStringer {
  constructor(readonly s: string) {}
  toString(): string {
    return this.s;
  }
}
type Obj = { [k: string]: Value };
type Value = string | bigint | boolean | GoTime | GoStringer | Obj | Value[] | undefined;

function codecValue(c: CompressionCodec): GoStringer {
  return new GoStringer(CompressionCodec[c] ?? String(c));
}

function labelSetValue(s: LabelSet | undefined): Obj {
  return { Labels: (s?.labels ?? []).map((l) => ({ Name: l.name, Value: l.value, Prefix: l.prefix })) };
}

function specValue(spec: JournalSpec): Obj {
  return {
    Name: spec.name,
    Replication: BigInt(spec.replication),
    LabelSet: labelSetValue(spec.labels),
    Flags: BigInt(spec.flags),
    MaxAppendRate: spec.max_append_rate,
    Fragment: {
      Length: spec.fragment?.length ?? 0n,
      CompressionCodec: codecValue(spec.fragment?.compression_codec ?? CompressionCodec.INVALID),
      Stores: (spec.fragment?.stores ?? []).slice(),
      PathPostfixTemplate: spec.fragment?.path_postfix_template ?? '',
    },
  };
}

function rootValue(spool: PostfixSpool, spec: JournalSpec): Obj {
  const fragment: Obj = {
    Journal: spool.journal,
    Begin: spool.begin,
    End: spool.end,
    CompressionCodec: codecValue(spool.compressionCodec),
    BackingStore: spool.backingStore ?? '',
    ModTime: 0n,
    PathPostfix: '',
  };
  const s: Obj = {
    ...fragment,
    Fragment: fragment,
    FirstAppendTime: new GoTime(spool.firstAppendTime),
    Registers: labelSetValue(spool.registers),
  };
  const sp = specValue(spec);
  // Root fields: the spec's (promoted from the embedded JournalSpec), the Spool, and the spool's
  // own promoted fields where the spec has none of that name.
  return { ...s, ...sp, Fragment: undefined, Spool: s, JournalSpec: sp };
}

function str(v: Value): string {
  if (v === undefined) return '<no value>';
  if (Array.isArray(v)) return '[' + v.map(str).join(' ') + ']';
  if (typeof v === 'object' && !(v instanceof GoTime) && !(v instanceof GoStringer)) {
    return '{' + Object.values(v).map(str).join(' ') + '}';
  }
  return String(v);
}

const TIME_METHODS: Record<string, (t: Date, args: Value[]) => Value> = {
  Format: (t, a) => {
    if (a.length !== 1 || typeof a[0] !== 'string') throw new PostfixTemplateError('Format takes one string layout');
    return formatGoTime(t, a[0]);
  },
  UTC: (t) => new GoTime(t),
  Unix: (t) => BigInt(Math.floor(t.getTime() / 1000)),
  Year: (t) => BigInt(t.getUTCFullYear()),
  YearDay: (t) => BigInt(Math.floor((t.getTime() - Date.UTC(t.getUTCFullYear(), 0, 1)) / 86400000) + 1),
  Month: (t) => new GoStringer(formatGoTime(t, 'January')),
  Day: (t) => BigInt(t.getUTCDate()),
  Hour: (t) => BigInt(t.getUTCHours()),
  Minute: (t) => BigInt(t.getUTCMinutes()),
  Second: (t) => BigInt(t.getUTCSeconds()),
};

function printf(format: string, args: Value[]): string {
  let i = 0;
  return format.replace(/%([-0]*)(\d*)([sdvqxX%])/g, (_m, flags: string, width: string, verb: string) => {
    if (verb === '%') return '%';
    const a = args[i++];
    let s: string;
    if (a === undefined) s = `%!${verb}(MISSING)`;
    else if (verb === 'd') s = typeof a === 'bigint' ? a.toString() : `%!d(${str(a)})`;
    else if (verb === 'x' || verb === 'X') {
      s = typeof a === 'bigint' ? a.toString(16) : Buffer.from(str(a)).toString('hex');
      if (verb === 'X') s = s.toUpperCase();
    } else if (verb === 'q') s = JSON.stringify(str(a));
    else s = str(a);
    const w = Number(width || 0);
    if (s.length < w) s = flags.includes('-') ? s.padEnd(w) : s.padStart(w, flags.includes('0') && !flags.includes('-') ? '0' : ' ');
    return s;
  }) + (i < args.length ? `%!(EXTRA ${args.slice(i).map(str).join(', ')})` : '');
}

// --- lexing of actions (the checker has already accepted the template) ---

type Tok =
  | { k: 'field'; names: string[]; onVar: boolean; chained?: boolean }
  | { k: 'string'; v: string }
  | { k: 'number'; v: bigint }
  | { k: 'bool'; v: boolean }
  | { k: 'ident'; v: string }
  | { k: 'dot' }
  | { k: 'pipe' }
  | { k: 'lparen' }
  | { k: 'rparen' };

function unquote(s: string): string {
  if (s.startsWith('`')) return s.slice(1, -1);
  try {
    return JSON.parse(s) as string;
  } catch {
    throw new PostfixTemplateError(`unsupported string literal ${s}`);
  }
}

function lex(src: string): Tok[] {
  const toks: Tok[] = [];
  const re = /\s+|("(?:[^"\\]|\\.)*"|`[^`]*`)|(\$?(?:\.[\p{L}_][\p{L}\p{N}_]*)+|\$)|(-?[0-9]+)|(\|)|(\()|(\))|(\.)|([\p{L}_][\p{L}\p{N}_]*)|(.)/uy;
  let m: RegExpExecArray | null;
  let lastEnd = -1;
  while ((m = re.exec(src)) !== null && m[0] !== '') {
    const afterParen = toks[toks.length - 1]?.k === 'rparen' && m.index === lastEnd;
    lastEnd = re.lastIndex;
    if (m[1]) toks.push({ k: 'string', v: unquote(m[1]) });
    else if (m[2]) {
      const onVar = m[2].startsWith('$');
      const rest = onVar ? m[2].slice(1) : m[2];
      // `(pipeline).Field` chains the field onto the parenthesized value.
      toks.push({ k: 'field', names: rest ? rest.slice(1).split('.') : [], onVar, chained: afterParen && !onVar });
    } else if (m[3]) toks.push({ k: 'number', v: BigInt(m[3]) });
    else if (m[4]) toks.push({ k: 'pipe' });
    else if (m[5]) toks.push({ k: 'lparen' });
    else if (m[6]) toks.push({ k: 'rparen' });
    else if (m[7]) toks.push({ k: 'dot' });
    else if (m[8]) {
      if (m[8] === 'true' || m[8] === 'false') toks.push({ k: 'bool', v: m[8] === 'true' });
      else toks.push({ k: 'ident', v: m[8] });
    } else if (m[9]) throw new PostfixTemplateError(`unsupported ${JSON.stringify(m[9])} in action`);
    if (re.lastIndex >= src.length) break;
  }
  return toks;
}

const CONTROL = new Set(['if', 'else', 'end', 'range', 'with', 'define', 'template', 'block', 'break', 'continue']);

class Evaluator {
  private i = 0;
  constructor(private readonly toks: Tok[], private readonly root: Obj) {}

  run(): Value {
    const v = this.pipeline();
    if (this.i < this.toks.length) throw new PostfixTemplateError('unexpected token after pipeline');
    return v;
  }

  private pipeline(): Value {
    let v = this.command(undefined, false);
    while (this.toks[this.i]?.k === 'pipe') {
      this.i++;
      v = this.command(v, true);
    }
    return v;
  }

  /** A command: an operand, or a function / method call with arguments; `piped` appends `input`. */
  private command(input: Value, piped: boolean): Value {
    const head = this.toks[this.i];
    if (!head) throw new PostfixTemplateError('missing command');
    if (head.k === 'ident') {
      this.i++;
      const args = this.args();
      if (piped) args.push(input);
      switch (head.v) {
        case 'print':
          return args.map(str).join('');
        case 'printf': {
          const [f, ...rest] = args;
          if (typeof f !== 'string') throw new PostfixTemplateError('printf needs a format string');
          return printf(f, rest);
        }
        case 'urlquery':
          return encodeURIComponent(args.map(str).join('')).replace(/%20/g, '+');
        default:
          throw new PostfixTemplateError(`function ${head.v} is not supported in path postfix templates`);
      }
    }
    if (head.k === 'field') {
      this.i++;
      const args = this.args();
      if (piped) args.push(input);
      return this.resolve(head.names, head.onVar, args);
    }
    if (piped) throw new PostfixTemplateError('a pipeline stage must be a function or method');
    const v = this.operand(true);
    if (this.i < this.toks.length && this.toks[this.i]!.k !== 'pipe' && this.toks[this.i]!.k !== 'rparen') {
      throw new PostfixTemplateError("can't give arguments to a non-function");
    }
    return v;
  }

  private args(): Value[] {
    const out: Value[] = [];
    while (this.i < this.toks.length && this.toks[this.i]!.k !== 'pipe' && this.toks[this.i]!.k !== 'rparen') out.push(this.operand());
    return out;
  }

  /** One operand; with `withArgs`, a `(pipeline).Method` takes the arguments that follow. */
  private operand(withArgs = false): Value {
    const t = this.toks[this.i++]!;
    switch (t.k) {
      case 'string':
      case 'number':
      case 'bool':
        return t.v;
      case 'dot':
        return this.root;
      case 'field':
        return this.resolve(t.names, t.onVar, []);
      case 'lparen': {
        const v = this.pipeline();
        if (this.toks[this.i++]?.k !== 'rparen') throw new PostfixTemplateError('unclosed left paren');
        const chain = this.toks[this.i];
        if (chain?.k === 'field' && chain.chained) {
          this.i++;
          return this.resolve(chain.names, false, withArgs ? this.args() : [], v);
        }
        return v;
      }
      case 'ident':
        throw new PostfixTemplateError(`function ${t.v} as an argument needs parentheses`);
      default:
        throw new PostfixTemplateError('unexpected token in operand');
    }
  }

  /** Walks a field chain from the root; the last name may be a method taking `args`. */
  private resolve(names: string[], _onVar: boolean, args: Value[], from: Value = this.root): Value {
    let v: Value = from;
    for (let n = 0; n < names.length; n++) {
      const name = names[n]!;
      const last = n === names.length - 1;
      if (v instanceof GoTime) {
        const m = TIME_METHODS[name];
        if (!m) throw new PostfixTemplateError(`can't evaluate field ${name} of type time.Time`);
        v = m(v.t, last ? args : []);
        if (last) return v;
        continue;
      }
      if (v === undefined || typeof v !== 'object' || Array.isArray(v) || v instanceof GoStringer) {
        throw new PostfixTemplateError(`can't evaluate field ${name} of ${str(v)}`);
      }
      if (!Object.prototype.hasOwnProperty.call(v, name) || v[name] === undefined) {
        throw new PostfixTemplateError(`can't evaluate field ${name}`);
      }
      v = v[name];
    }
    if (args.length) throw new PostfixTemplateError(`${names.join('.') || '.'} is not a method but has arguments`);
    return v;
  }
}

/**
 * The path postfix `template` gives for a spool of journal `spec`. Throws PostfixTemplateError
 * for a template outside the supported subset or one that fails to evaluate.
 */
export function evaluatePostfixTemplate(template: string, spool: PostfixSpool, spec: JournalSpec): string {
  if (template === '') return '';
  const problem = checkGoTemplate(template);
  if (problem) throw new PostfixTemplateError(`path postfix template: ${problem}`);
  const root = rootValue(spool, spec);
  let out = '';
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{{', i);
    if (open === -1) {
      out += template.slice(i);
      break;
    }
    let text = template.slice(i, open);
    let p = open + 2;
    if (template[p] === '-' && /\s/.test(template[p + 1] ?? '')) {
      text = text.replace(/\s+$/, '');
      p += 2;
    }
    out += text;
    const close = template.indexOf('}}', p);
    let body = template.slice(p, close);
    let next = close + 2;
    let trimAfter = false;
    if (/\s-$/.test(body)) {
      body = body.slice(0, -2);
      trimAfter = true;
    }
    i = next;
    if (trimAfter) {
      while (i < template.length && /\s/.test(template[i]!)) i++;
      next = i;
    }
    const inner = body.trim();
    if (inner.startsWith('/*')) continue;
    const word = /^[a-z]+/.exec(inner)?.[0];
    if (word && CONTROL.has(word)) {
      throw new PostfixTemplateError(`path postfix template: {{${word}}} is not supported by this broker`);
    }
    const v = new Evaluator(lex(inner), root).run();
    out += str(v);
  }
  return out;
}
