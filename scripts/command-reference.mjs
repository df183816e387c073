// Writes docs/commands.md, the command reference, from the commands themselves: their summary,
// usage, arguments, flags (description, default, choices, environment variable), aliases,
// description and examples, as `gazctl <command> --help` shows them.
//
// Usage: node scripts/command-reference.mjs           (after `npx tsc`: it reads dist/src/commands)
//        node scripts/command-reference.mjs --check   (exit 1 when docs/commands.md is out of date)
//
// The commands are loaded from the compiled classes, not from oclif.manifest.json, so a tsc-only
// rebuild is enough and a stale manifest cannot leak in. The output depends only on the commands:
// commands, flags and shared flag groups are sorted by name, and nothing of the machine, the
// time or the terminal width goes in. test/unit/command-reference.test.ts fails when the checked-in
// file differs from what this script writes.
import { Plugin } from '@oclif/core';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const REFERENCE_PATH = join(ROOT, 'docs', 'commands.md');
export const REGENERATE = 'npx tsc -p tsconfig.json && node scripts/command-reference.mjs';

/** Titles of the help groups that our group flags (src/cli/base.ts) are shown under. */
const GROUP_TITLES = { GLOBAL: 'Global flags', BROKER: 'Broker flags', CONSUMER: 'Consumer flags', ETCD: 'etcd flags' };

const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const words = (id) => id.split(':').join(' ');
/** GitHub's anchor for a heading. */
const anchor = (heading) => heading.toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');

/** Help text templates: only `<%= config.bin %>` is used in our commands. */
function render(text, bin) {
  const out = String(text ?? '').replace(/<%=\s*config\.bin\s*%>/g, bin);
  if (out.includes('<%')) throw new Error(`a help template other than <%= config.bin %>: ${out}`);
  return out;
}

/** Plain text as Markdown that shows it as written. */
function prose(text) {
  return text
    .replace(/\\/g, '\\\\')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/([*_`[\]])/g, '\\$1');
}

const LIST_ITEM = /^\s*([-*+]|\d+\.) /;

/**
 * A paragraph of a description. Its lines are separate lines in --help (the descriptions are
 * not wrapped in the source), so each keeps its own line here too: a backslash at its end, except
 * around list items, which Markdown puts on lines of their own.
 */
function paragraph(text) {
  const lines = text.trim().split('\n').map((l) => prose(l.trimEnd()));
  return lines.map((l, i) => (i < lines.length - 1 && !LIST_ITEM.test(l) && !LIST_ITEM.test(lines[i + 1]) ? `${l}\\` : l)).join('\n');
}

/** Text inside a table cell: one line, pipes escaped. */
function cell(text) {
  return prose(text.replace(/\s+/g, ' ').trim()).replace(/\|/g, '\\|');
}

function flagSpelling(f) {
  const value = f.type === 'option' ? (f.options ? '=<option>' : '=<value>') : '';
  return `${f.char ? `-${f.char}, ` : ''}--${f.name}${value}${f.multiple ? ' (repeatable)' : ''}`;
}

function flagDescription(f, bin) {
  const parts = [cell(render(f.summary ?? f.description ?? '', bin))];
  if (f.options) parts.push(`One of: ${f.options.map((o) => `\`${o}\``).join(', ')}.`);
  if (f.default !== undefined && f.default !== false && typeof f.default !== 'function') parts.push(`Default: \`${Array.isArray(f.default) ? f.default.join(',') : f.default}\`.`);
  if (f.env) parts.push(`Environment: \`${f.env}\`.`);
  if (f.allowNo) parts.push(`Negate with \`--no-${f.name}\`.`);
  return parts.join(' ');
}

function flagTable(flags, bin) {
  const rows = flags.map((f) => `| \`${flagSpelling(f)}\` | ${flagDescription(f, bin)} |`);
  return ['| Flag | Description |', '| --- | --- |', ...rows].join('\n');
}

function usage(cmd, bin, ownFlags, groups) {
  const args = Object.values(cmd.args ?? {}).map((a) => {
    const name = a.name.toUpperCase();
    const v = cmd.strict === false ? `${name}...` : name;
    return a.required ? v : `[${v}]`;
  });
  const parts = [bin, words(cmd.id), ...args];
  if (ownFlags.length || groups.length) parts.push('[FLAGS]');
  return parts.join(' ');
}

/** Loads the commands from the compiled classes (see the file comment). */
async function loadCommands(root) {
  const plugin = new Plugin({ root, isRoot: true, ignoreManifest: true });
  await plugin.load();
  const bin = plugin.pjson.oclif.bin ?? plugin.pjson.name;
  const commands = plugin.commands.filter((c) => !c.hidden).sort((a, b) => byName(a.id, b.id));
  const topics = Object.entries(plugin.pjson.oclif.topics ?? {})
    .map(([name, t]) => ({ name, description: t.description ?? '' }))
    .sort((a, b) => byName(a.name, b.name));
  return { bin, commands, topics };
}

/** The reference, as Markdown. */
export async function commandReference(root = ROOT) {
  const { bin, commands, topics } = await loadCommands(root);

  // Flags of a help group are the option groups every command of a topic shares: shown once.
  const groups = new Map();
  for (const c of commands) {
    for (const f of Object.values(c.flags)) {
      if (!f.helpGroup || f.hidden) continue;
      const key = f.helpGroup;
      if (!GROUP_TITLES[key]) throw new Error(`${c.id}: --${f.name} is in help group ${key}, which the reference has no section for`);
      if (!groups.has(key)) groups.set(key, new Map());
      const seen = groups.get(key).get(f.name);
      const text = JSON.stringify(f);
      if (seen !== undefined && seen.text !== text) throw new Error(`--${f.name} differs between commands (${seen.id} and ${c.id}): the reference shows group flags once`);
      if (seen === undefined) groups.get(key).set(f.name, { id: c.id, text, flag: f });
    }
  }
  const groupOrder = Object.keys(GROUP_TITLES).filter((k) => groups.has(k));

  const out = [];
  out.push(`# ${bin} command reference`);
  out.push('');
  out.push(`<!-- Generated from the commands by scripts/command-reference.mjs; do not edit. After changing a command's help, run: ${REGENERATE} -->`);
  out.push('');
  out.push(`Every ${bin} command, with the help that \`${bin} <command> --help\` prints. Flags may also come from gazctl.ini or environment variables; see the README. Exit status: 0 success, 1 failure, 2 a usage error (bad flag, flag value or argument), 141 when stdout is closed by its reader.`);
  out.push('');
  out.push('## Commands');
  out.push('');
  for (const t of topics) {
    out.push(`- \`${bin} ${words(t.name)}\`: ${cell(t.description)}`);
    for (const c of commands.filter((c) => c.id.startsWith(`${t.name}:`))) out.push(`  - [${bin} ${words(c.id)}](#${anchor(`${bin} ${words(c.id)}`)}): ${cell(render(c.summary ?? '', bin))}`);
  }
  for (const c of commands.filter((c) => !topics.some((t) => c.id.startsWith(`${t.name}:`)))) {
    out.push(`- [${bin} ${words(c.id)}](#${anchor(`${bin} ${words(c.id)}`)}): ${cell(render(c.summary ?? '', bin))}`);
  }
  out.push('');

  if (groupOrder.length) {
    out.push('## Shared flags');
    out.push('');
    out.push('The option groups of the `journals` and `shards` commands: each command below says which it takes.');
    for (const key of groupOrder) {
      out.push('');
      out.push(`### ${GROUP_TITLES[key]}`);
      out.push('');
      const flags = [...groups.get(key).values()].map((g) => g.flag).sort((a, b) => byName(a.name, b.name));
      out.push(flagTable(flags, bin));
    }
    out.push('');
  }

  for (const c of commands) {
    const title = `${bin} ${words(c.id)}`;
    const all = Object.values(c.flags).filter((f) => !f.hidden);
    const own = all.filter((f) => !f.helpGroup).sort((a, b) => byName(a.name, b.name));
    const used = groupOrder.filter((k) => all.some((f) => f.helpGroup === k));
    out.push(`## ${title}`);
    out.push('');
    if (c.summary) {
      out.push(cell(render(c.summary, bin)));
      out.push('');
    }
    out.push('```');
    out.push(usage(c, bin, own, used));
    out.push('```');
    out.push('');
    if (c.aliases?.length) {
      out.push(`Alias: ${c.aliases.map((a) => `\`${bin} ${words(a)}\``).join(', ')}.`);
      out.push('');
    }
    const args = Object.values(c.args ?? {});
    if (args.length) {
      out.push('| Argument | Description |');
      out.push('| --- | --- |');
      for (const a of args) {
        const extra = a.options ? ` One of: ${a.options.map((o) => `\`${o}\``).join(', ')}.` : '';
        out.push(`| \`${a.name.toUpperCase()}\`${a.required ? '' : ' (optional)'} | ${cell(render(a.description ?? '', bin))}${extra} |`);
      }
      out.push('');
    }
    if (own.length) {
      out.push(flagTable(own, bin));
      out.push('');
    }
    if (used.length) {
      out.push(`Also takes the ${used.map((k) => `[${GROUP_TITLES[k].toLowerCase()}](#${anchor(GROUP_TITLES[k])})`).join(', ')}.`);
      out.push('');
    }
    if (c.description) {
      for (const para of render(c.description, bin).trim().split(/\n\s*\n/)) {
        out.push(paragraph(para));
        out.push('');
      }
    }
    const examples = (c.examples ?? []).map((e) => (typeof e === 'string' ? { command: e } : e));
    if (examples.length) {
      out.push('Examples:');
      out.push('');
      out.push('```sh');
      examples.forEach((e, i) => {
        if (i > 0) out.push('');
        if (e.description) out.push(`# ${render(e.description, bin).replace(/\s+/g, ' ')}`);
        out.push(render(e.command, bin));
      });
      out.push('```');
      out.push('');
    }
  }
  return out.join('\n').replace(/\n+$/, '\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const text = await commandReference();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(REFERENCE_PATH, 'utf8');
    } catch {}
    if (current !== text) {
      console.error(`docs/commands.md is out of date: run ${REGENERATE}`);
      process.exit(1);
    }
  } else {
    writeFileSync(REFERENCE_PATH, text);
    console.log(`wrote docs/commands.md (${text.length} characters)`);
  }
}
