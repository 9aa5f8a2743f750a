import type { Command } from 'commander';
import { walkCommands } from './command-group.js';

/**
 * Shell completion scripts generated from the command tree (docs/cli.md, "Shell completion"): the words after
 * `cloud` complete to the subcommands of the command typed so far, and a word starting with `-` to its options
 * and the global ones. A command added to the tree is completed without touching this file.
 */
interface Node {
  path: string;
  children: { name: string; description: string }[];
  options: string[];
}

function nodes(program: Command): Node[] {
  const globalOptions = optionFlags(program);
  return [...walkCommands(program)].map(({ command, path }) => ({
    path: path.join(' '),
    children: command.commands.map((c) => ({ name: c.name(), description: c.description() })),
    options: [...new Set([...optionFlags(command), ...globalOptions, '--help'])],
  }));
}

function optionFlags(command: Command): string[] {
  return command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)));
}

/** A word of the tree is `[a-z0-9-]`; anything else would not be safe to put in a script unquoted. */
function checkedWord(word: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9-]*$/.test(word) && !/^--?[A-Za-z0-9][A-Za-z0-9-]*$/.test(word)) {
    throw new Error(`not a completable word: ${word}`);
  }
  return word;
}

const quotedForShell = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

export function bashCompletion(program: Command): string {
  const cases = nodes(program)
    .map(
      (n) =>
        `    ${quotedForShell(n.path)}) children=${quotedForShell(n.children.map((c) => checkedWord(c.name)).join(' '))}; ` +
        `options=${quotedForShell(n.options.map(checkedWord).join(' '))} ;;`,
    )
    .join('\n');
  return `# bash completion for cloud: add to ~/.bashrc
#   source <(cloud completion bash)
__cloud_node() {
  case "$1" in
${cases}
    *) children=''; options='' ;;
  esac
}

_cloud() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path='' children options i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    __cloud_node "$path"
    if [[ " $children " == *" $w "* ]]; then path="\${path:+$path }$w"; fi
  done
  __cloud_node "$path"
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$children" -- "$cur"))
  fi
}
complete -o default -F _cloud cloud
`;
}

export function zshCompletion(program: Command): string {
  const zshDescription = (text: string) => text.replace(/\s+/g, ' ').replace(/:/g, '\\:');
  const cases = nodes(program)
    .map(
      (n) =>
        `    ${quotedForShell(n.path)}) children=(${n.children
          .map((c) => quotedForShell(`${checkedWord(c.name)}:${zshDescription(c.description)}`))
          .join(' ')}); options=(${n.options.map(checkedWord).join(' ')}) ;;`,
    )
    .join('\n');
  return `#compdef cloud
# zsh completion for cloud: add to ~/.zshrc (after compinit)
#   source <(cloud completion zsh)
__cloud_node() {
  case "$1" in
${cases}
    *) children=(); options=() ;;
  esac
}

_cloud() {
  local path_so_far='' w i
  local -a children options names
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == -* ]] && continue
    __cloud_node "$path_so_far"
    names=(\${children%%:*})
    if (( \${names[(Ie)$w]} )); then path_so_far="\${path_so_far:+$path_so_far }$w"; fi
  done
  __cloud_node "$path_so_far"
  if [[ "\${words[CURRENT]}" == -* ]]; then
    compadd -- $options
  elif (( \${#children} )); then
    _describe 'command' children
  else
    _files
  fi
}
compdef _cloud cloud
`;
}
