// `gazctl completion bash|zsh|fish`: the scripts, loaded into the real shells, complete topics,
// commands, flags and flag values. scripts/setup.sh installs zsh and fish, so none of these skip.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { completionScript, completionTree, firstSentence } from '../../../src/cli/completion.js';
import { describeResult, runGazctl } from '../../helpers/cli.js';

let dir: string;
const scripts: Record<string, string> = {};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gazctl-completion-'));
  for (const shell of ['bash', 'zsh', 'fish']) {
    const r = await runGazctl(['completion', shell]);
    assert.equal(r.code, 0, describeResult(['completion', shell], r));
    scripts[shell] = r.stdout.toString();
  }
  writeFileSync(join(dir, 'gazctl.bash'), scripts.bash!);
  writeFileSync(join(dir, 'gazctl.fish'), scripts.fish!);
  mkdirSync(join(dir, 'zfunc'));
  writeFileSync(join(dir, 'zfunc', '_gazctl'), scripts.zsh!);
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a shell; a guard against a shell that never returns, not a timing assertion. */
function sh(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, timeout: 60_000, env: { ...process.env, HOME: dir, XDG_CONFIG_HOME: dir, TERM: 'xterm' } });
  assert.equal(r.error, undefined, `${cmd}: ${r.error?.message}`);
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

describe('gazctl completion', () => {
  it('refuses an unknown shell with a usage error', async () => {
    const r = await runGazctl(['completion', 'tcsh']);
    assert.equal(r.code, 2, describeResult(['completion', 'tcsh'], r));
    assert.match(r.stderr, /tcsh/);
    assert.equal(r.stdout.length, 0);
  });

  it('the launcher (bin/gazctl, from the bundle when it is built) prints the same scripts as the tsc output', async () => {
    for (const shell of ['bash', 'zsh', 'fish']) {
      const r = await runGazctl(['completion', shell], { launcher: true });
      assert.equal(r.code, 0, describeResult(['completion', shell], r));
      const plain = await runGazctl(['completion', shell], { env: { GAZCTL_NO_BUNDLE: '1' } });
      assert.equal(plain.code, 0, describeResult(['completion', shell], plain));
      assert.equal(r.stdout.toString(), plain.stdout.toString(), shell);
      assert.equal(r.stdout.toString(), scripts[shell], shell);
    }
  });

  it('bash: COMPREPLY for topics, commands, flags and flag values', () => {
    // Each case: the words on the line (the last one being completed) and the expected COMPREPLY.
    const cases: [string[], string[]][] = [
      [['gazctl', ''], ['attach-uuids', 'completion', 'context', 'health', 'journals', 'print-config', 'shards']],
      [['gazctl', 'j'], ['journals']],
      [['gazctl', 'journals', 'l'], ['list']],
      [['gazctl', 'shards', 'p'], ['prune', 'prune-log']],
      [['gazctl', 'journals', 'list', '-o', ''], ['table', 'yaml', 'json']],
      [['gazctl', 'journals', 'list', '--format', '=', 'y'], ['yaml']],
      [['gazctl', 'journals', 'list', '--format=j'], ['--format=json']],
      [['gazctl', 'journals', 'list', '--log.level', 'w'], ['warn']],
      [['gazctl', 'journals', 'list', '--fo'], ['--format']],
      [['gazctl', 'journals', 'list', '-o', 'json', '--w'], ['--watch']],
      [['gazctl', 'shards', 'prune-log', '--dry'], ['--dry-run']],
      [['gazctl', 'journals', 'flush', '--he'], ['--help']],
      [['gazctl', '--v'], ['--version']],
      [['gazctl', 'shards', '--h'], ['--help']],
      [['gazctl', 'completion', ''], ['bash', 'zsh', 'fish']],
      [['gazctl', 'completion', 'f'], ['fish']],
      // A flag that takes any value, and a second positional argument: left to bash (files).
      [['gazctl', 'journals', 'list', '-l', ''], []],
      [['gazctl', 'completion', 'bash', ''], []],
    ];
    const script = [
      `source ${JSON.stringify(join(dir, 'gazctl.bash'))}`,
      't() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); _gazctl; printf "%s\\n" "${COMPREPLY[*]}"; }',
      ...cases.map(([words]) => `t ${words.map((w) => `'${w}'`).join(' ')}`),
      // Registered for the command name, with file names as the fallback.
      'complete -p gazctl',
    ].join('\n');
    const lines = sh('bash', ['--norc', '--noprofile', '-c', script]).split('\n');
    cases.forEach(([words, want], i) => assert.deepEqual(lines[i]!.split(' ').filter(Boolean), want, `COMPREPLY for ${JSON.stringify(words)}`));
    assert.equal(lines[cases.length], 'complete -o default -F _gazctl gazctl');
  });

  it('fish: complete -C lists commands with their summaries, flags and values', () => {
    const queries: [string, string[]][] = [
      ['gazctl journals l', ['list\tList journals with their routes and settings']],
      ['gazctl ', ['attach-uuids', 'completion', 'context', 'health', 'journals', 'print-config', 'shards']],
      ['gazctl journals list -o ', ['json', 'table', 'yaml']],
      ['gazctl journals list --format=', ['--format=json', '--format=table', '--format=yaml']],
      ['gazctl shards prune-log --sel', ['--selector']],
      ['gazctl completion ', ['bash', 'fish', 'zsh']],
      ['gazctl journals list --broker.add', ['--broker.address']],
      ['gazctl --vers', ['--version']],
    ];
    const script = [`source ${JSON.stringify(join(dir, 'gazctl.fish'))}`, ...queries.flatMap(([q]) => [`complete -C ${JSON.stringify(q)}`, 'echo "<<end>>"'])].join('\n');
    const blocks = sh('fish', ['--no-config', '-c', script]).split('<<end>>\n');
    queries.forEach(([q, want], i) => {
      const got = blocks[i]!.split('\n').filter(Boolean);
      // Only the exact first case checks the description; the others check the words.
      const words = want.some((w) => w.includes('\t')) ? got : got.map((l) => l.split('\t')[0]);
      assert.deepEqual(words, want, `complete -C ${JSON.stringify(q)}`);
    });
  });

  it('zsh: compinit picks the script up from $fpath and defines _gazctl', () => {
    const out = sh('zsh', [
      '-f',
      '-c',
      `fpath=(${JSON.stringify(join(dir, 'zfunc'))} $fpath); autoload -Uz compinit; compinit -u -D; print -r -- $_comps[gazctl]; autoload +X _gazctl; (( $+functions[_gazctl] )) && print defined`,
    ]);
    assert.deepEqual(out.trim().split('\n'), ['_gazctl', 'defined']);
  });

  it('zsh: sourced after compinit, registers _gazctl for gazctl', () => {
    const out = sh('zsh', ['-f', '-c', `autoload -Uz compinit; compinit -u -D; source ${JSON.stringify(join(dir, 'zfunc', '_gazctl'))}; print -r -- $_comps[gazctl]`]);
    assert.equal(out.trim(), '_gazctl');
  });

  it('zsh: Tab in an interactive zsh offers the commands, flags and values', () => {
    // An interactive zsh in a pseudo-terminal (zsh/zpty): for each query the driver types it and
    // presses Tab, bound to a widget that runs complete-word between two markers; compadd is
    // wrapped to print the matches it is given (after zsh's own matching against the word).
    const driver = `
zmodload zsh/zpty || exit 3
zpty z zsh -f -i || exit 3
zpty -w z "PS1=''; RPROMPT=''"
zpty -w z "fpath=(\${(q)1} \\$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'compadd() { if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd "$@"; return; fi; local -a __hits; builtin compadd -A __hits "$@"; local h; for h in $__hits; do print -r -- "<<M>>$h"; done; }'
zpty -w z '_cap_tab() { print -r -- "<<BEGIN>>"; zle complete-word; print -r -- "<<END>>"; }; zle -N _cap_tab; bindkey "^I" _cap_tab; print -r -- "<<READY>>"'
while zpty -r z line; do [[ $line == *'<<READY>>'* && $line != *print* ]] && break; done
shift
for q in "$@"; do
  print -r -- "query:$q"
  zpty -n -w z "$q"$'\\t'
  while zpty -r z line; do
    [[ $line == *'<<END>>'* && $line != *print* ]] && break
    if [[ $line == *'<<M>>'* ]]; then m=\${line##*'<<M>>'}; m=\${m%%$'\\r'*}; print -r -- "\${m%%$'\\n'*}"; fi
  done
  zpty -n -w z $'\\C-u'
done
zpty -d z
`;
    writeFileSync(join(dir, 'drive.zsh'), driver);
    const queries: [string, string[]][] = [
      ['gazctl ', ['attach-uuids', 'completion', 'context', 'health', 'journals', 'print-config', 'shards']],
      ['gazctl journals l', ['list']],
      ['gazctl shards pr', ['prune', 'prune-log']],
      ['gazctl journals list -o ', ['table', 'yaml', 'json']],
      ['gazctl journals list --format=', ['table', 'yaml', 'json']],
      ['gazctl journals list --l', ['--label-columns', '--log.format', '--log.level']],
      ['gazctl journals list -o json --w', ['--watch']],
      ['gazctl shards prune-log --sel', ['--selector']],
      ['gazctl completion ', ['bash', 'zsh', 'fish']],
      ['gazctl --v', ['--version']],
      ['gazctl journals --h', ['--help']],
    ];
    const out = sh('zsh', ['-f', join(dir, 'drive.zsh'), join(dir, 'zfunc'), ...queries.map(([q]) => q)]);
    const got = new Map<string, string[]>();
    let current: string[] = [];
    for (const line of out.split('\n')) {
      if (line.startsWith('query:')) got.set(line.slice('query:'.length), (current = []));
      else if (line !== '') current.push(line);
    }
    // zsh may add a group's matches in its own order (_describe groups them by description).
    for (const [q, want] of queries) assert.deepEqual(got.get(q)?.sort(), [...want].sort(), `zsh completions of ${JSON.stringify(q)}`);
  });
});

describe('completion scripts from a tree', () => {
  const tree = completionTree(
    'gazctl',
    [
      {
        id: 'journals:list',
        aliases: ['journals:ls'],
        summary: "List journals [it's] fine.",
        flags: { format: { name: 'format', char: 'o', description: 'Output format [it\'s] fine.', type: 'option', options: ['table', 'json'] }, secret: { name: 'secret', type: 'boolean', hidden: true }, color: { name: 'color', type: 'boolean', allowNo: true } },
        args: {},
      },
    ],
    [{ name: 'journals', description: 'Journals. More text.' }],
  );

  it('lists topics, commands and aliases, sorted, without hidden flags; --help everywhere, --version at the root', () => {
    assert.deepEqual(
      tree.nodes.map((n) => [n.path, n.children.map((c) => c.name), n.flags.map((f) => f.name)]),
      [
        ['', ['journals'], ['help', 'version']],
        ['journals', ['list', 'ls'], ['help']],
        ['journals list', [], ['color', 'format', 'help', 'no-color']],
        ['journals ls', [], ['color', 'format', 'help', 'no-color']],
      ],
    );
    assert.equal(tree.nodes[1]!.children[1]!.summary, "List journals [it's] fine (alias of journals list)");
  });

  it('quotes descriptions for each shell', () => {
    // A quote and brackets in a summary must not break the scripts: each one parses.
    for (const [shell, args] of [
      ['bash', ['-n']],
      ['zsh', ['-n']],
      ['fish', ['--no-execute']],
    ] as const) {
      const file = join(dir, `quoting.${shell}`);
      writeFileSync(file, completionScript(shell, tree));
      sh(shell, [...args, file]);
    }
    assert.match(completionScript('zsh', tree), /--format=\[Output format \\\[it'\\''s\\\] fine\]/);
  });

  it('firstSentence keeps "e.g." and shortens long text', () => {
    assert.equal(firstSentence('Label selector, e.g. app=x. Another sentence.'), 'Label selector, e.g. app=x');
    assert.equal(firstSentence('a '.repeat(100), 20), 'a a a a a a a a...');
  });
});
