import { Args } from '@oclif/core';
import { GazctlCommand, UsageError } from '../cli/base.js';
import { COMPLETION_SHELLS, completionScript, completionTree, type CompletionShell } from '../cli/completion.js';

export default class Completion extends GazctlCommand {
  static override summary = 'Print a shell completion script for bash, zsh or fish.';
  static override description = `Prints a script that completes gazctl's topics, commands and flags (long and short), and the values of flags that take a fixed set (such as -o table|yaml|json), in the given shell. The script is generated from the commands of this gazctl, so load it again after an upgrade.

bash: load it from ~/.bashrc with "source <(gazctl completion bash)", or save it as ~/.local/share/bash-completion/completions/gazctl (loaded on demand where the bash-completion package is installed).
zsh: save it as _gazctl in a directory of $fpath before compinit runs (e.g. ~/.zfunc, with "fpath=(~/.zfunc $fpath)" before "autoload -Uz compinit && compinit" in ~/.zshrc), or load it after compinit with "source <(gazctl completion zsh)".
fish: save it as ~/.config/fish/completions/gazctl.fish; fish loads it when gazctl is first completed.

Needs no broker, and takes no journals or shards options.`;
  static override examples = [
    { description: 'bash: complete gazctl in every new shell', command: "echo 'source <(<%= config.bin %> completion bash)' >> ~/.bashrc" },
    { description: 'bash: install for the user (bash-completion loads it on demand)', command: 'mkdir -p ~/.local/share/bash-completion/completions && <%= config.bin %> completion bash > ~/.local/share/bash-completion/completions/<%= config.bin %>' },
    { description: 'zsh: install into a directory of $fpath, then start a new shell', command: 'mkdir -p ~/.zfunc && <%= config.bin %> completion zsh > ~/.zfunc/_<%= config.bin %>' },
    { description: 'zsh: load into the running shell (after compinit)', command: 'source <(<%= config.bin %> completion zsh)' },
    { description: 'fish: install for the user', command: '<%= config.bin %> completion fish > ~/.config/fish/completions/<%= config.bin %>.fish' },
  ];
  static override args = {
    SHELL: Args.string({ required: true, options: [...COMPLETION_SHELLS], description: 'The shell: bash, zsh or fish.' }),
  };

  async run(): Promise<void> {
    const { args } = await this.parse(Completion);
    const shell = args.SHELL as CompletionShell;
    if (!COMPLETION_SHELLS.includes(shell)) throw new UsageError(`unknown shell ${JSON.stringify(shell)} (expected ${COMPLETION_SHELLS.join(', ')})`);
    // The commands as oclif lists them: from oclif.manifest.json, which the bundle reads too.
    const tree = completionTree(this.config.bin, this.config.commands, this.config.topics);
    process.stdout.write(completionScript(shell, tree));
  }
}
