// The import rules of docs/architecture.md, checked by dependency-cruiser
// (`npx depcruise src`, and test/unit/layering.test.ts in every test run). Type-only imports
// count for the layer rules (a layer should not even know another's types) but not for cycles,
// which are about the order modules run in.

/** Library folders (under src/lib/) that each library folder may import, besides itself and protocol. */
const LIB_ALLOWED = {
  client: ['codecs', 'message', 'stores', 'keyspace'],
  fragment: ['stores'],
  journalspace: ['goyaml'],
  shardspace: ['goyaml'],
  recoverylog: ['client'],
};
const LIB_FOLDERS = [
  'client', 'codecs', 'config', 'fragment', 'goyaml', 'journalspace', 'keyspace', 'message',
  'protocol', 'recoverylog', 'shardspace', 'stores',
];

const libRules = LIB_FOLDERS.filter((f) => f !== 'protocol').map((from) => {
  const allowed = new Set([from, 'protocol', ...(LIB_ALLOWED[from] ?? [])]);
  const others = LIB_FOLDERS.filter((f) => !allowed.has(f));
  return {
    name: `lib-${from}-imports`,
    comment: `src/lib/${from} may import only ${[...allowed].join(', ')} among the library folders (and the library's root modules)`,
    severity: 'error',
    from: { path: `^src/lib/${from}/` },
    to: { path: `^src/lib/(${others.join('|')})/` },
  };
});

module.exports = {
  forbidden: [
    {
      name: 'no-runtime-cycles',
      comment: 'modules must not import each other in a cycle at run time',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'lib-imports-down-only',
      comment: 'nothing in src/lib imports the CLI, the commands, the core or the test harness',
      severity: 'error',
      from: { path: '^src/lib/' },
      to: { path: '^src/(cli|commands|core|testing)/' },
    },
    {
      name: 'core-not-cli',
      comment: 'the core never imports the CLI, a command or the test harness',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/(cli|commands|testing)/' },
    },
    {
      name: 'cli-not-commands',
      comment: 'commands use the CLI layer, never the other way round',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/commands/' },
    },
    {
      name: 'testing-on-lib',
      comment: 'the test harness builds on the library, not on the CLI or the commands',
      severity: 'error',
      from: { path: '^src/testing/' },
      to: { path: '^src/(cli|commands)/' },
    },
    {
      name: 'protocol-at-the-bottom',
      comment: 'src/lib/protocol imports no other library folder',
      severity: 'error',
      from: { path: '^src/lib/protocol/' },
      to: { path: '^src/lib/(?!protocol/)[^/]+/' },
    },
    {
      name: 'no-library-root-from-inside',
      comment: 'library modules import what they use directly, not the package root (src/lib/index.ts)',
      severity: 'error',
      from: { path: '^src/lib/.+/' },
      to: { path: '^src/lib/index\\.ts$' },
    },
    ...libRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/lib/protocol/gen/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.cts', '.js', '.cjs'] },
  },
};
