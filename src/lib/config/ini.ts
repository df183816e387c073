// A parser for gazctl.ini, the configuration file upstream gazctl reads. Format: `[section]`
// headers, `key = value` lines, `;` or `#` comments, values trimmed, optionally Go-quoted.
// Section and key lookups are case-insensitive for sections and exact-then-insensitive for keys.
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../protocol/errors.js';

export interface IniFile {
  path: string;
  /** Lower-cased section name → key → value. Keys before any header live in section "". */
  sections: Map<string, Map<string, string>>;
}

export function parseIni(text: string, path = 'gazctl.ini'): IniFile {
  const sections = new Map<string, Map<string, string>>();
  let current = new Map<string, string>();
  sections.set('', current);
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith(';') || line.startsWith('#')) return;
    if (line.startsWith('[')) {
      if (!line.endsWith(']') || line.length < 3) {
        throw new ValidationError(`malformed section header ${JSON.stringify(line)}`, `${path}:${i + 1}`);
      }
      const name = line.slice(1, -1).trim().toLowerCase();
      current = sections.get(name) ?? new Map();
      sections.set(name, current);
      return;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) {
      throw new ValidationError(`expected "key = value", got ${JSON.stringify(line)}`, `${path}:${i + 1}`);
    }
    const key = line.slice(0, eq).trim();
    let value = line.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) {
      try {
        value = JSON.parse(value) as string;
      } catch {
        throw new ValidationError(`malformed quoted value ${value}`, `${path}:${i + 1}`);
      }
    }
    current.set(key, value);
  });
  return { path, sections };
}

/** Finds gazctl.ini using upstream's search order; the first file that exists wins. */
export function findIniFile(cwd = process.cwd(), env = process.env): string | undefined {
  const candidates = [join(cwd, 'gazctl.ini')];
  candidates.push(env.HOME ? join(env.HOME, '.config/gazette/gazctl.ini') : '.config/gazette/gazctl.ini');
  if (env.UserProfile) candidates.push(join(env.UserProfile, '.config/gazette/gazctl.ini'));
  return candidates.find((p) => existsSync(p));
}

export function loadIni(path: string | undefined): IniFile | undefined {
  if (!path) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ValidationError(`cannot read configuration file: ${(err as Error).message}`, path);
  }
  return parseIni(text, path);
}

/**
 * Looks a value up in the given sections (in order), matching any of `keys` (the Go field
 * name first, then the long flag name, then the short name): exact case first, then
 * case-insensitively.
 */
export function iniLookup(ini: IniFile | undefined, sections: string[], keys: string[]): string | undefined {
  if (!ini) return undefined;
  for (const s of sections) {
    const sec = ini.sections.get(s.toLowerCase());
    if (!sec) continue;
    for (const k of keys) {
      if (sec.has(k)) return sec.get(k);
    }
    for (const k of keys) {
      for (const [have, v] of sec) if (have.toLowerCase() === k.toLowerCase()) return v;
    }
  }
  return undefined;
}
