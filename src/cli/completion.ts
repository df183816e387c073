// Shell completion scripts for bash, zsh and fish, generated from the commands oclif knows (its
// manifest, oclif.manifest.json, which the bundle reads too).
//
// Why our own generator rather than @oclif/plugin-autocomplete: the plugin writes its scripts into
// a cache directory at run time and its setup step sources files from there, which a packaged or
// read-only install does not suit, and it adds a plugin to load at every start. Our commands are a
// small fixed tree (two topics, a score of commands), so each script is printed whole, with the
// tree, every flag (long and short), the values of fixed-choice flags (`-o table|yaml|json`) and of
// positional arguments written into it: nothing is computed or cached when the user presses Tab.
//
// All three scripts find the command being completed the same way: the leading words of the line
// that name a topic or a command (`journals`, `journals list`); the first word that does not
// extend that path ends it. Flags and their values come after the command, as oclif expects.

/** A flag as the completion scripts need it. */
export interface CompletionFlag {
  name: string;
  char?: string;
  /** One line: the first sentence of the flag's description. */
  summary: string;
  /** Whether the flag takes a value (`--format json`), rather than being a switch. */
  takesValue: boolean;
  /** The values a fixed-choice flag accepts. */
  options?: string[];
  /** Whether the flag may be given more than once. */
  multiple: boolean;
}

export interface CompletionArg {
  name: string;
  options?: string[];
}

/** A node of the command tree: a topic (has children), a command (has flags), or both. */
export interface CompletionNode {
  /** The words naming it, e.g. `journals list` (empty for the root). */
  path: string;
  summary: string;
  children: { name: string; summary: string }[];
  isCommand: boolean;
  flags: CompletionFlag[];
  args: CompletionArg[];
  /** Whether the command takes any number of positional arguments. */
  variadic: boolean;
}

export interface CompletionTree {
  bin: string;
  /** Every node, sorted by path, the root first. */
  nodes: CompletionNode[];
}

/** The parts of an oclif command (Command.Loadable, or a manifest entry) the scripts use. */
export interface CommandInfo {
  id: string;
  aliases?: string[];
  hidden?: boolean;
  summary?: string;
  description?: string;
  strict?: boolean;
  flags: Record<string, { name: string; char?: string; description?: string; summary?: string; type: string; options?: readonly string[]; multiple?: boolean; hidden?: boolean; allowNo?: boolean }>;
  args: Record<string, { name: string; options?: readonly string[] }>;
}

export interface TopicInfo {
  name: string;
  description?: string;
  hidden?: boolean;
}

export const COMPLETION_SHELLS = ['bash', 'zsh', 'fish'] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

/** The first sentence of a description, on one line, at most `max` characters. */
export function firstSentence(text: string | undefined, max = 90): string {
  const flat = (text ?? '').replace(/\s+/g, ' ').trim();
  // A sentence ends at . ! or ? before a space, except in "e.g." and "i.e.".
  const end = /[.!?](?=\s|$)/g;
  let s = flat;
  for (let m = end.exec(flat); m; m = end.exec(flat)) {
    if (/\b(e\.g|i\.e)\.$/.test(flat.slice(0, m.index + 1))) continue;
    s = flat.slice(0, m.index);
    break;
  }
  if (s.length > max) s = s.slice(0, max - 3).replace(/\s+\S*$/, '') + '...';
  return s;
}

/** Builds the command tree from oclif's commands and topics (ids use `:` between words). */
export function completionTree(bin: string, commands: readonly CommandInfo[], topics: readonly TopicInfo[]): CompletionTree {
  const nodes = new Map<string, CompletionNode>();
  const node = (path: string): CompletionNode => {
    let n = nodes.get(path);
    if (!n) {
      n = { path, summary: '', children: [], isCommand: false, flags: [], args: [], variadic: false };
      nodes.set(path, n);
    }
    return n;
  };
  node('');
  for (const t of topics) {
    if (t.hidden) continue;
    node(t.name.split(':').join(' ')).summary = firstSentence(t.description);
  }
  for (const c of commands) {
    if (c.hidden) continue;
    for (const id of [c.id, ...(c.aliases ?? [])]) {
      const n = node(id.split(':').join(' '));
      n.isCommand = true;
      n.summary = firstSentence(c.summary ?? c.description) + (id === c.id ? '' : ` (alias of ${c.id.split(':').join(' ')})`);
      n.flags = Object.values(c.flags)
        .filter((f) => !f.hidden)
        .flatMap((f): CompletionFlag[] => {
          const flag: CompletionFlag = {
            name: f.name,
            ...(f.char ? { char: f.char } : {}),
            summary: firstSentence(f.summary ?? f.description),
            takesValue: f.type === 'option',
            ...(f.options?.length ? { options: [...f.options] } : {}),
            multiple: Boolean(f.multiple),
          };
          // A switch declared with allowNo also takes --no-<name>.
          return f.allowNo && f.type === 'boolean' ? [flag, { name: `no-${f.name}`, summary: `Turn off --${f.name}`, takesValue: false, multiple: false }] : [flag];
        });
      // oclif answers --help for every command without declaring it.
      if (!n.flags.some((f) => f.name === 'help')) n.flags.push({ name: 'help', summary: 'Show help for this command', takesValue: false, multiple: false });
      n.flags.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      n.args = Object.values(c.args).map((a) => ({ name: a.name, ...(a.options?.length ? { options: [...a.options] } : {}) }));
      n.variadic = c.strict === false;
    }
  }
  // Every prefix of a path is a node (a command under a topic oclif was not told about).
  for (const path of [...nodes.keys()]) {
    const words = path === '' ? [] : path.split(' ');
    for (let i = words.length - 1; i >= 0; i--) {
      const parent = node(words.slice(0, i).join(' '));
      const name = words[i]!;
      if (!parent.children.some((c) => c.name === name)) parent.children.push({ name, summary: nodes.get(words.slice(0, i + 1).join(' '))!.summary });
    }
  }
  // oclif answers --help for topics too, and --version at the root.
  const help: CompletionFlag = { name: 'help', summary: 'Show help', takesValue: false, multiple: false };
  for (const n of nodes.values()) {
    if (n.isCommand) continue;
    n.flags = n.path === '' ? [help, { name: 'version', summary: 'Show the version', takesValue: false, multiple: false }] : [help];
  }
  const sorted = [...nodes.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const n of sorted) n.children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // A node's children carry the summaries settled above (a topic may be named after its commands).
  for (const n of sorted) for (const c of n.children) c.summary = nodes.get(n.path === '' ? c.name : `${n.path} ${c.name}`)!.summary;
  return { bin, nodes: sorted };
}

export function completionScript(shell: CompletionShell, tree: CompletionTree): string {
  switch (shell) {
    case 'bash':
      return bashScript(tree);
    case 'zsh':
      return zshScript(tree);
    case 'fish':
      return fishScript(tree);
  }
}

/** `text` as one single-quoted POSIX shell word (bash and zsh). */
function sq(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** A shell function name made from the program name. */
function fnName(bin: string): string {
  return `_${bin.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

/** Every spelling of a flag: `--name`, and `-c` when it has a short form. */
function spellings(f: CompletionFlag): string[] {
  return f.char ? [`-${f.char}`, `--${f.name}`] : [`--${f.name}`];
}

function bashScript(tree: CompletionTree): string {
  const fn = fnName(tree.bin);
  const nonRoot = tree.nodes.filter((n) => n.path !== '');
  const out: string[] = [];
  out.push(`# bash completion for ${tree.bin}, generated by \`${tree.bin} completion bash\`.`);
  out.push(`# Load it in this shell with: source <(${tree.bin} completion bash)`);
  out.push('');
  out.push(`# Whether "$1" names a topic or a command.`);
  out.push(`${fn}_node() {`);
  out.push('  case "$1" in');
  out.push(`    ${nonRoot.map((n) => sq(n.path)).join('|')}) return 0 ;;`);
  out.push('  esac');
  out.push('  return 1');
  out.push('}');
  out.push('');
  out.push(`# The words that may follow "$1": sub-commands, or the flags of a command ($2 = flags).`);
  out.push(`${fn}_words() {`);
  out.push('  case "$2|$1" in');
  for (const n of tree.nodes) {
    if (n.children.length) out.push(`    ${sq('|' + n.path)}) ${fn}_reply=${sq(n.children.map((c) => c.name).join(' '))} ;;`);
    const flags = n.flags.flatMap(spellings);
    if (flags.length) out.push(`    ${sq('flags|' + n.path)}) ${fn}_reply=${sq(flags.join(' '))} ;;`);
  }
  out.push(`    *) ${fn}_reply='' ;;`);
  out.push('  esac');
  out.push('}');
  out.push('');
  out.push(`# The values of flag $2 of command $1: status 0 with the choices in ${fn}_reply, 2 for a flag`);
  out.push(`# that takes any value, 1 for a switch or an unknown flag. ($2 = "#N": positional argument N.)`);
  out.push(`${fn}_values() {`);
  out.push(`  ${fn}_reply=''`);
  out.push('  case "$1|$2" in');
  for (const n of tree.nodes) {
    for (const f of n.flags) {
      if (!f.takesValue) continue;
      const pats = spellings(f).map((s) => sq(`${n.path}|${s}`)).join('|');
      out.push(f.options ? `    ${pats}) ${fn}_reply=${sq(f.options.join(' '))} ;;` : `    ${pats}) return 2 ;;`);
    }
    n.args.forEach((a, i) => {
      if (a.options) out.push(`    ${sq(`${n.path}|#${i}`)}) ${fn}_reply=${sq(a.options.join(' '))} ;;`);
    });
  }
  out.push('    *) return 1 ;;');
  out.push('  esac');
  out.push('}');
  out.push('');
  out.push(`${fn}() {`);
  out.push('  local cur=${COMP_WORDS[COMP_CWORD]} cmd="" next flag="" prefix="" i rc npos=0');
  out.push('  COMPREPLY=()');
  out.push('  for (( i = 1; i < COMP_CWORD; i++ )); do');
  out.push('    next=${cmd:+$cmd }${COMP_WORDS[i]}');
  out.push(`    ${fn}_node "$next" || break`);
  out.push('    cmd=$next');
  out.push('  done');
  out.push('  # The flag whose value is being typed: "-o |", "--format |", "--format=|" (bash splits');
  out.push("  # \"--format=\" into three words when COMP_WORDBREAKS has '=', as it has by default).");
  out.push('  if [[ $cur == = ]]; then');
  out.push('    flag=${COMP_WORDS[COMP_CWORD-1]} cur=""');
  out.push('  elif (( COMP_CWORD >= 2 )) && [[ ${COMP_WORDS[COMP_CWORD-1]} == = ]]; then');
  out.push('    flag=${COMP_WORDS[COMP_CWORD-2]}');
  out.push('  elif [[ $cur == --*=* ]]; then');
  out.push('    flag=${cur%%=*} prefix=${cur%%=*}= cur=${cur#*=}');
  out.push('  elif (( COMP_CWORD >= 1 )) && [[ ${COMP_WORDS[COMP_CWORD-1]} == -* ]]; then');
  out.push('    flag=${COMP_WORDS[COMP_CWORD-1]}');
  out.push('  fi');
  out.push('  if [[ -n $flag ]]; then');
  out.push(`    ${fn}_values "$cmd" "$flag"; rc=$?`);
  out.push('    if (( rc == 0 )); then');
  out.push(`      COMPREPLY=( $(compgen -P "$prefix" -W "$${fn}_reply" -- "$cur") )`);
  out.push('      return 0');
  out.push('    fi');
  out.push('    # Any value: leave it to bash (file names, as `complete -o default` asks).');
  out.push('    (( rc == 2 )) && return 0');
  out.push('  fi');
  out.push('  if [[ $cur == -* ]]; then');
  out.push(`    ${fn}_words "$cmd" flags`);
  out.push(`    COMPREPLY=( $(compgen -W "$${fn}_reply" -- "$cur") )`);
  out.push('    return 0');
  out.push('  fi');
  out.push(`  ${fn}_words "$cmd"`);
  out.push(`  if [[ -n $${fn}_reply ]]; then`);
  out.push(`    COMPREPLY=( $(compgen -W "$${fn}_reply" -- "$cur") )`);
  out.push('    return 0');
  out.push('  fi');
  out.push('  # A positional argument with fixed choices; else bash completes file names. Count the');
  out.push("  # positional arguments before this one, passing over flags and their values.");
  out.push('  local w skip=0');
  out.push('  for (( ; i < COMP_CWORD; i++ )); do');
  out.push('    w=${COMP_WORDS[i]}');
  out.push('    if (( skip > 0 )); then skip=$(( skip - 1 )); continue; fi');
  out.push('    case $w in');
  out.push('      --*=*) ;;');
  out.push('      -*)');
  out.push(`        ${fn}_values "$cmd" "$w"`);
  out.push('        if (( $? != 1 )); then');
  out.push('          skip=1');
  out.push('          [[ ${COMP_WORDS[i+1]} == = ]] && skip=2');
  out.push('        fi');
  out.push('        ;;');
  out.push('      *) npos=$(( npos + 1 )) ;;');
  out.push('    esac');
  out.push('  done');
  out.push(`  if ${fn}_values "$cmd" "#$npos"; then`);
  out.push(`    COMPREPLY=( $(compgen -W "$${fn}_reply" -- "$cur") )`);
  out.push('  fi');
  out.push('  return 0');
  out.push('}');
  out.push('');
  out.push(`complete -o default -F ${fn} ${tree.bin}`);
  return out.join('\n') + '\n';
}

/** A description inside the [...] of a zsh _arguments spec. */
function zshBracket(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\[/g, '\\[').replace(/\]/g, '\\]');
}

function zshFlagSpecs(f: CompletionFlag): string[] {
  const all = spellings(f);
  const exclusion = f.multiple ? '*' : all.length > 1 ? `(${all.join(' ')})` : '';
  const desc = `[${zshBracket(f.summary)}]`;
  const value = f.takesValue ? `:${f.name.replace(/:/g, '\\:')}:${f.options ? `(${f.options.join(' ')})` : '_default'}` : '';
  return all.map((s) => {
    // -o+ and --format= take the value in the same word or the next one.
    const form = !f.takesValue ? s : s.startsWith('--') ? `${s}=` : `${s}+`;
    return sq(`${exclusion}${form}${desc}${value}`);
  });
}

function zshScript(tree: CompletionTree): string {
  const fn = fnName(tree.bin);
  const out: string[] = [];
  out.push(`#compdef ${tree.bin}`);
  out.push(`# zsh completion for ${tree.bin}, generated by \`${tree.bin} completion zsh\`.`);
  out.push(`# Install: save it as _${tree.bin} in a directory of $fpath before compinit runs, or after`);
  out.push(`# compinit: source <(${tree.bin} completion zsh)`);
  out.push('');
  out.push(`${fn}() {`);
  // `path` is tied to $PATH in zsh: the command's words go in `cmd`.
  out.push('  local cmd="" next i n=1');
  out.push('  for (( i = 2; i < CURRENT; i++ )); do');
  out.push('    next=${cmd:+$cmd }${words[i]}');
  out.push('    case $next in');
  out.push(`      ${tree.nodes.filter((n) => n.path !== '').map((n) => sq(n.path)).join('|')}) cmd=$next n=$i ;;`);
  out.push('      *) break ;;');
  out.push('    esac');
  out.push('  done');
  out.push('  local -a children specs');
  out.push('  case $cmd in');
  for (const n of tree.nodes) {
    out.push(`    ${sq(n.path)})`);
    if (n.children.length) out.push(`      children=(${n.children.map((c) => sq(`${c.name.replace(/:/g, '\\:')}:${c.summary}`)).join(' ')})`);
    {
      const specs = n.flags.flatMap(zshFlagSpecs);
      n.args.forEach((a) => specs.push(sq(`:${a.name}:${a.options ? `(${a.options.join(' ')})` : '_default'}`)));
      if (n.variadic) specs.push(sq('*:file:_files'));
      out.push(`      specs=(${specs.join(' ')})`);
    }
    out.push('      ;;');
  }
  out.push('  esac');
  out.push('  if (( ${#children} )) && (( CURRENT == n + 1 )) && [[ $PREFIX != -* ]]; then');
  out.push(`    _describe -t commands ${sq(`${tree.bin} command`)} children`);
  out.push('    return');
  out.push('  fi');
  out.push('  (( ${#specs} )) || return 1');
  out.push("  # The command's last word stands in for the program name, as _arguments expects.");
  out.push('  shift $(( n - 1 )) words');
  out.push('  (( CURRENT -= n - 1 ))');
  out.push('  _arguments -s -S : $specs');
  out.push('}');
  out.push('');
  // Autoloaded from $fpath, this file is the body of the function _gazctl: it defines the real
  // one and runs it. Sourced, it registers the function with compdef.
  out.push(`if [[ \${funcstack[1]} == ${fn} ]]; then`);
  out.push(`  ${fn} "$@"`);
  out.push('else');
  out.push(`  compdef ${fn} ${tree.bin}`);
  out.push('fi');
  return out.join('\n') + '\n';
}

/** `text` as one single-quoted fish word. */
function fq(text: string): string {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

function fishScript(tree: CompletionTree): string {
  const fn = fnName(tree.bin);
  const bin = tree.bin;
  const out: string[] = [];
  out.push(`# fish completion for ${bin}, generated by \`${bin} completion fish\`.`);
  out.push(`# Install: ${bin} completion fish > ~/.config/fish/completions/${bin}.fish`);
  out.push('');
  out.push(`set -g ${fn}_nodes ${tree.nodes.filter((n) => n.path !== '').map((n) => fq(n.path)).join(' ')}`);
  out.push('');
  out.push('# The topic or command named by the leading words of the command line.');
  out.push(`function ${fn}_cmd`);
  out.push('    set -l cmd');
  out.push('    for w in (commandline -opc)[2..-1]');
  out.push('        set -l next (string join " " -- $cmd $w)');
  out.push(`        contains -- $next $${fn}_nodes; or break`);
  out.push('        set cmd $next');
  out.push('    end');
  out.push('    echo $cmd');
  out.push('end');
  out.push('');
  out.push(`function ${fn}_at`);
  out.push(`    set -l cmd (${fn}_cmd)`);
  out.push('    test "$cmd" = "$argv[1]"');
  out.push('end');
  out.push('');
  out.push(`complete -c ${bin} -e`);
  for (const n of tree.nodes) {
    const cond = `-n ${fq(`${fn}_at ${fq(n.path)}`)}`;
    out.push('');
    out.push(`# ${n.path === '' ? bin : `${bin} ${n.path}`}`);
    // No file names where no positional argument takes one.
    if (!n.isCommand || (n.args.length === 0 && !n.variadic) || n.args.every((a) => a.options)) out.push(`complete -c ${bin} ${cond} -f`);
    for (const c of n.children) out.push(`complete -c ${bin} ${cond} -a ${fq(c.name)} -d ${fq(c.summary)}`);
    for (const a of n.args) if (a.options) out.push(`complete -c ${bin} ${cond} -a ${fq(a.options.join(' '))} -d ${fq(a.name)}`);
    for (const f of n.flags) {
      const names = `${f.char ? `-s ${f.char} ` : ''}-l ${fq(f.name)}`;
      const value = !f.takesValue ? '' : f.options ? ` -x -a ${fq(f.options.join(' '))}` : ' -r';
      out.push(`complete -c ${bin} ${cond} ${names}${value} -d ${fq(f.summary)}`);
    }
  }
  return out.join('\n') + '\n';
}
