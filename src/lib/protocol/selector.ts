// Label selectors: parsing, canonical printing and matching.
import { ValidationError } from './errors.js';
import type { JournalSpec, Label, LabelSelector, LabelSet } from './gen/broker/protocol.js';
import type { ShardSpec } from './gen/consumer/protocol.js';
import {
  META_LABEL_ID,
  META_LABEL_NAME,
  META_LABEL_PREFIX,
  compareLabels,
  compareStrings,
  label,
  labelSet,
  validateLabelSet,
  validationDetail,
} from './labels.js';

const PREFIX_SUFFIX = ':prefix';
const TOKEN_CHAR = /^[\p{L}\p{N}\-_+/.]$/u;
const VALUE_CHAR = /^[\p{L}\p{N}\-_+/.=%]$/u;

interface Failure {
  at: number;
  expected: string;
}

interface Term {
  end: number;
  exclude: boolean;
  labels: Label[];
}

/** A failure inside an `in (...)` body: reported as is, without trying other forms. */
class BodyError {
  constructor(readonly at: number, readonly expected: string) {}
}

const EXPECT_NAME = 'a label name (2 or more letters, numbers or "-_+/.")';
const EXPECT_OPERATOR = 'an operator ("=", "==", "!=", "in", "notin", "not in")';
const EXPECT_END = '"," or end of input';

class SelectorParser {
  readonly chars: string[];
  constructor(readonly text: string) {
    this.chars = [...text];
  }

  private at(p: number): string | undefined {
    return this.chars[p];
  }

  private sp(p: number): number {
    return this.chars[p] === ' ' ? p + 1 : p;
  }

  private lit(p: number, s: string): boolean {
    const cs = [...s];
    for (let i = 0; i < cs.length; i++) if (this.chars[p + i] !== cs[i]) return false;
    return true;
  }

  private token(p: number): { name: string; prefix: boolean; end: number } | Failure {
    let q = p;
    while (q < this.chars.length && TOKEN_CHAR.test(this.chars[q]!)) q++;
    if (q - p < 2) return { at: p, expected: EXPECT_NAME };
    const name = this.chars.slice(p, q).join('');
    if (this.lit(q, PREFIX_SUFFIX)) return { name, prefix: true, end: q + PREFIX_SUFFIX.length };
    return { name, prefix: false, end: q };
  }

  private value(p: number): { value: string; end: number } {
    let q = p;
    while (q < this.chars.length && VALUE_CHAR.test(this.chars[q]!)) q++;
    return { value: this.chars.slice(p, q).join(''), end: q };
  }

  /** END = one optional space, then "," or the end of input. */
  private end(p: number): number | Failure {
    const q = this.sp(p);
    if (q === this.chars.length) return q;
    if (this.chars[q] === ',') return q + 1;
    return { at: q, expected: EXPECT_END };
  }

  // Form 1 and 2: TOKEN SP ("=" | "==" | "!=") SP VALUE END.
  private comparison(pos: number): Term | Failure {
    const t = this.token(this.sp(pos));
    if ('at' in t) return t;
    let p = this.sp(t.end);
    let exclude = false;
    if (this.at(p) === '=') {
      p++;
      if (this.at(p) === '=') p++;
    } else if (this.at(p) === '!' && this.at(p + 1) === '=') {
      exclude = true;
      p += 2;
    } else {
      return { at: p, expected: EXPECT_OPERATOR };
    }
    const v = this.value(this.sp(p));
    const e = this.end(v.end);
    if (typeof e !== 'number') return e;
    return { end: e, exclude, labels: [label(t.name, v.value, t.prefix)] };
  }

  // Forms 3 and 4: TOKEN " in" SP "(" BODY ")" END, TOKEN " not" SP "in" SP "(" BODY ")" END.
  private setMembership(pos: number): Term | Failure {
    const t = this.token(this.sp(pos));
    if ('at' in t) return t;
    let p = t.end;
    if (this.at(p) !== ' ') return { at: p, expected: EXPECT_OPERATOR };
    p++;
    let exclude = false;
    if (this.lit(p, 'in')) {
      p += 2;
    } else if (this.lit(p, 'not')) {
      exclude = true;
      p = this.sp(p + 3);
      if (!this.lit(p, 'in')) return { at: p, expected: '"in"' };
      p += 2;
    } else {
      return { at: p, expected: EXPECT_OPERATOR };
    }
    p = this.sp(p);
    if (this.at(p) !== '(') return { at: p, expected: '"("' };
    const bodyStart = p + 1;
    let close = bodyStart;
    while (close < this.chars.length && this.chars[close] !== ')') close++;
    if (close === this.chars.length) return { at: close, expected: '")"' };
    if (close === bodyStart) return { at: close, expected: 'a list of values' };
    const e = this.end(close + 1);
    if (typeof e !== 'number') return e;
    // BODY: repeated SP VALUE SP ("," | end of body).
    const labels: Label[] = [];
    let b = bodyStart;
    while (b < close) {
      const v = this.value(this.sp(b));
      labels.push(label(t.name, v.value, t.prefix));
      b = this.sp(v.end);
      if (b === close) break;
      if (this.chars[b] !== ',') throw new BodyError(b, '"," or ")" in the value list');
      b++;
    }
    return { end: e, exclude, labels };
  }

  // Form 5: TOKEN END.
  private exists(pos: number): Term | Failure {
    const t = this.token(this.sp(pos));
    if ('at' in t) return t;
    const e = this.end(t.end);
    if (typeof e !== 'number') return e;
    return { end: e, exclude: false, labels: [label(t.name, '', t.prefix)] };
  }

  // Form 6: "!" TOKEN END.
  private notExists(pos: number): Term | Failure {
    const p = this.sp(pos);
    if (this.at(p) !== '!') return { at: p, expected: '"!"' };
    const t = this.token(p + 1);
    if ('at' in t) return t;
    const e = this.end(t.end);
    if (typeof e !== 'number') return e;
    return { end: e, exclude: true, labels: [label(t.name, '', t.prefix)] };
  }

  fail(at: number, expected: string): never {
    const found = at < this.chars.length ? ` (found ${JSON.stringify(this.chars[at])})` : ' (found end of input)';
    throw new ValidationError(
      `invalid selector ${JSON.stringify(this.text)}: expected ${expected} at column ${at + 1}${found}`,
    );
  }

  parse(): LabelSelector {
    const include: Label[] = [];
    const exclude: Label[] = [];
    let pos = 0;
    const forms = [this.comparison, this.setMembership, this.exists, this.notExists];
    while (pos < this.chars.length) {
      const failures: Failure[] = [];
      let term: Term | undefined;
      for (const form of forms) {
        let r: Term | Failure;
        try {
          r = form.call(this, pos);
        } catch (e) {
          if (e instanceof BodyError) this.fail(e.at, e.expected);
          throw e;
        }
        if ('at' in r) failures.push(r);
        else {
          term = r;
          break;
        }
      }
      if (!term) {
        const furthest = Math.max(...failures.map((f) => f.at));
        const expected = [...new Set(failures.filter((f) => f.at === furthest).map((f) => f.expected))];
        this.fail(furthest, joinAlternatives(expected));
      }
      (term.exclude ? exclude : include).push(...term.labels);
      pos = term.end;
    }
    include.sort(compareLabels);
    exclude.sort(compareLabels);
    const sel: LabelSelector = { include: { labels: include }, exclude: { labels: exclude } };
    try {
      validateLabelSelector(sel);
    } catch (e) {
      if (e instanceof ValidationError) {
        throw new ValidationError(`invalid selector ${JSON.stringify(this.text)}: ${validationDetail(e)}`);
      }
      throw e;
    }
    return sel;
  }
}

function joinAlternatives(xs: string[]): string {
  if (xs.length <= 1) return xs[0] ?? 'a selector term';
  const last = xs[xs.length - 1]!;
  return xs.slice(0, -1).join(', ') + (last.includes(' or ') ? ', ' : ' or ') + last;
}

/** Validates both label sets of a selector (prefix labels allowed). */
export function validateLabelSelector(sel: LabelSelector): void {
  for (const [what, set] of [['include', sel.include], ['exclude', sel.exclude]] as const) {
    try {
      validateLabelSet(set, { allowPrefix: true });
    } catch (e) {
      if (e instanceof ValidationError) throw new ValidationError(validationDetail(e), what);
      throw e;
    }
  }
}

/**
 * Parses a label selector. An empty string is the empty selector, which matches
 * everything. Throws ValidationError naming the text and the column of the problem.
 */
export function parseLabelSelector(text: string): LabelSelector {
  return new SelectorParser(text).parse();
}

/** An empty selector (matches every label set). */
export function emptySelector(): LabelSelector {
  return { include: { labels: [] }, exclude: { labels: [] } };
}

function formatTerms(labels: Label[], exclude: boolean): string[] {
  const groups = new Map<string, string[]>();
  for (const l of labels) {
    const key = l.prefix ? l.name + PREFIX_SUFFIX : l.name;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = []));
    g.push(l.value);
  }
  const keys = [...groups.keys()].sort(compareStrings);
  return keys.map((k) => {
    const values = groups.get(k)!;
    if (values.length === 1 && values[0] === '') return exclude ? `!${k}` : k;
    if (values.length === 1) return `${k}${exclude ? '!=' : '='}${values[0]}`;
    return `${k} ${exclude ? 'notin' : 'in'} (${values.join(',')})`;
  });
}

/** Canonical text of a selector: include terms, then exclude terms, comma-separated. */
export function formatLabelSelector(sel: LabelSelector | undefined): string {
  if (!sel) return '';
  return [
    ...formatTerms(sel.include?.labels ?? [], false),
    ...formatTerms(sel.exclude?.labels ?? [], true),
  ].join(',');
}

function labelMatches(sel: Label, l: Label): boolean {
  if (sel.name !== l.name) return false;
  if (sel.value === '') return true;
  return sel.prefix ? l.value.startsWith(sel.value) : l.value === sel.value;
}

/**
 * Whether `set` satisfies the selector: no exclude label matches, and for every
 * distinct include name at least one of its values matches.
 */
export function matchesSelector(sel: LabelSelector | undefined, set: LabelSet | undefined): boolean {
  const labels = set?.labels ?? [];
  for (const ex of sel?.exclude?.labels ?? []) {
    if (labels.some((l) => labelMatches(ex, l))) return false;
  }
  const byName = new Map<string, Label[]>();
  for (const inc of sel?.include?.labels ?? []) {
    let g = byName.get(inc.name);
    if (!g) byName.set(inc.name, (g = []));
    g.push(inc);
  }
  for (const group of byName.values()) {
    if (!group.some((inc) => labels.some((l) => labelMatches(inc, l)))) return false;
  }
  return true;
}

/** The labels a journal is matched on: its spec labels plus `name=<journal>`. */
export function journalMatchLabels(spec: JournalSpec): LabelSet {
  return labelSet(...(spec.labels?.labels ?? []), label(META_LABEL_NAME, spec.name));
}

/** The labels a shard is matched on: its spec labels plus `id=<shard id>`. */
export function shardMatchLabels(spec: ShardSpec): LabelSet {
  return labelSet(...(spec.labels?.labels ?? []), label(META_LABEL_ID, spec.id));
}

function rewriteSet(set: LabelSet | undefined, what: string): LabelSet {
  const out: Label[] = [];
  for (const l of set?.labels ?? []) {
    if (l.name !== META_LABEL_PREFIX) {
      out.push({ ...l });
      continue;
    }
    if (!l.value.endsWith('/')) {
      throw new ValidationError(
        `label "prefix" value ${JSON.stringify(l.value)} must end in "/"`,
        `selector ${what}`,
      );
    }
    out.push(label(META_LABEL_NAME, l.value, true));
  }
  return { labels: out.sort(compareLabels) };
}

/**
 * Rewrites journal-selector `prefix=<p/>` labels into `name` labels with prefix=true, as brokers
 * do. Every `prefix` value must end in `/`.
 */
export function rewritePrefixLabels(sel: LabelSelector): LabelSelector {
  return { include: rewriteSet(sel.include, 'include'), exclude: rewriteSet(sel.exclude, 'exclude') };
}

/** Whether a journal selector (with `name` / `prefix` meta-labels) matches the journal spec. */
export function selectorMatchesJournal(sel: LabelSelector | undefined, spec: JournalSpec): boolean {
  if (!sel) return true;
  return matchesSelector(rewritePrefixLabels(sel), journalMatchLabels(spec));
}

/** Whether a shard selector (with the `id` meta-label) matches the shard spec. */
export function selectorMatchesShard(sel: LabelSelector | undefined, spec: ShardSpec): boolean {
  if (!sel) return true;
  return matchesSelector(sel, shardMatchLabels(spec));
}
