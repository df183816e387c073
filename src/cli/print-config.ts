// `gazctl print-config`: the effective configuration of every command, as gazctl.ini text.
//
// The layout is upstream's, so that the output can be kept as a gazctl.ini: a section per option
// group and per sub-command ([attach-uuids]; [journals], [journals.Logging], [journals.Broker], a
// section per journals sub-command; the same for shards with [shards.Consumer] before
// [shards.Broker]); per option a `; <description>` comment, then `Field = value`, commented out
// (`; Field = default`) when the value is the built-in default, then a blank line. Sections
// without options are left out, as are options that gazctl.ini cannot hold.
//
// Two things are ours (docs/divergences.md): a value that is not the default, and every service
// endpoint, gets a comment saying where it came from (the command line, which gazctl.ini
// section, which environment variable, the default), since "which broker is this talking to, and why" is the first question when a
// deployment misbehaves; and the values of auth keys and tokens are masked, where upstream prints
// them in clear into a terminal or a ticket.
import { formatGoDuration } from '../lib/protocol/duration.js';
import { resolveWithOrigin, type OptionOrigin, type OptionSet, type OptionSpec, type Sources } from './options.js';

/** One section of the output: its name and the options it lists, with how to resolve them. */
export interface ConfigSection {
  name: string;
  options: OptionSpec<unknown>[];
  /** The sources the options resolve from (the group and section they are looked up under). */
  sources: Sources;
}

/** ini fields whose values are never printed. */
const SECRET_FIELDS = new Set(['AuthKeys', 'AuthToken']);

/** A value as Go's INI writer shows it: printable text as it is, other text quoted. */
function goText(s: string): string {
  return /^[\x20-\x7e]*$/.test(s) ? s : JSON.stringify(s);
}

/** The text of a resolved value; `raw` is the text a command line, gazctl.ini or variable gave. */
function valueTexts(value: unknown, raw: string | undefined): string[] {
  if (Array.isArray(value)) return value.map((v) => goText(String(v)));
  if (typeof value === 'bigint') return [formatGoDuration(value)];
  if (typeof value === 'boolean' || typeof value === 'number') return [String(value)];
  if (typeof value === 'string') return [goText(value)];
  if (value === undefined) return [''];
  // A parsed value (a label selector): shown as it was written.
  return [goText(raw ?? '')];
}

function defaultTexts(s: OptionSpec<unknown>): string[] {
  if ('missing' in s.fallback) return [''];
  const v = s.fallback.value;
  if (Array.isArray(v)) return [''];
  if (v !== null && typeof v === 'object') return ['']; // the empty selector
  return valueTexts(v, undefined);
}

function describeOrigin(o: OptionOrigin): string {
  switch (o.from) {
    case 'command line':
      return 'the command line';
    case 'context':
      return `context ${o.name} (${o.path})`;
    case 'gazctl.ini':
      return `${o.path} [${o.section}]`;
    case 'environment':
      return `$${o.variable}`;
    case 'default':
      return 'the default';
  }
}

/** `Field = value`, or `Field =` for an empty value (as Go's INI writer). */
function line(field: string, text: string): string {
  return text === '' ? `${field} =` : `${field} = ${text}`;
}

/** Renders `sections` as gazctl.ini text. Throws a UsageError for a value that does not parse. */
export function renderConfig(sections: ConfigSection[]): string {
  let out = '';
  for (const sec of sections) {
    const options = sec.options.filter((s) => s.ini !== null);
    if (options.length === 0) continue;
    out += `[${sec.name}]\n`;
    for (const s of options) {
      const field = s.ini!.field;
      out += `; ${s.description}\n`;
      const defaults = defaultTexts(s);
      const { value, origin, text } = resolveWithOrigin(s, sec.sources);
      const texts = origin.from === 'default' ? defaults : valueTexts(value, text);
      if (texts.length === defaults.length && texts.every((t, i) => t === defaults[i])) {
        // Upstream's convention: a value equal to the default is shown commented out. An
        // endpoint says so in words too: "which broker, and why" has an answer on every line.
        if (s.endpoint) out += `; (from ${describeOrigin(origin)})\n`;
        out += `; ${line(field, defaults[0]!)}\n\n`;
        continue;
      }
      out += `; (from ${describeOrigin(origin)})\n`;
      const masked = SECRET_FIELDS.has(field);
      for (const t of texts) out += `${line(field, masked && t !== '' ? '<masked>' : t)}\n`;
      out += '\n';
    }
  }
  return out;
}

/** Splits a group's options into its sections: the group's own, then each sub-section in `order`. */
export function groupSections(group: string, set: OptionSet, order: string[], sources: Sources): ConfigSection[] {
  const by = new Map<string, OptionSpec<unknown>[]>();
  for (const s of Object.values(set)) {
    const sub = s.ini?.section ?? '';
    by.set(sub, [...(by.get(sub) ?? []), s]);
  }
  return ['', ...order].map((sub) => ({ name: sub === '' ? group : `${group}.${sub}`, options: by.get(sub) ?? [], sources }));
}
