"""Shell completion scripts for bash, zsh and fish that also work under git's own completion.

Each script asks the ``git-hermit`` executable for candidates (``complete_var`` set in its
environment, with ``COMP_WORDS``/``COMP_CWORD``); ``git_hermit.completer`` answers — bash:
``type,value`` lines; zsh: ``type``, ``value``, ``help`` lines; fish: ``type<TAB>value<TAB>help``. git's completions hand a custom command
to ``_git_hermit`` (bash), ``_git-hermit`` (zsh) or the ``git-hermit`` completions (fish).
"""

from __future__ import annotations

_BASH = r'''# git-hermit completion for bash: eval "$(git hermit completion bash)"
# Answers `git-hermit <TAB>` and, through git's completion, `git hermit <TAB>`.
__git_hermit_ask() {   # $1: how many leading words to drop from ${words[@]} (up to the command)
    local drop=$1 IFS=$'\n' line type value
    local response
    response=$(env COMP_WORDS="git-hermit ${words[*]:drop:cword-drop+1}" COMP_CWORD=$((cword - drop + 1)) \
        %(var)s=bash_complete git-hermit 2>/dev/null) || return 0
    COMPREPLY=()
    for line in $response; do
        type=${line%%%%,*} value=${line#*,}
        case $type in
            plain) COMPREPLY+=("$value") ;;
            dir) compopt -o dirnames 2>/dev/null; COMPREPLY=() ;;
            file) compopt -o default 2>/dev/null; COMPREPLY=() ;;
        esac
    done
}
_git_hermit() {        # called by git's completion with words/cword set
    local i
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} == hermit ]]; then __git_hermit_ask $((i + 1)); return; fi
    done
}
_git_hermit_standalone() {
    local words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
    __git_hermit_ask 1
}
complete -o nosort -F _git_hermit_standalone git-hermit 2>/dev/null || complete -F _git_hermit_standalone git-hermit
'''

_ZSH = r'''#compdef git-hermit
# git-hermit completion for zsh: eval "$(git hermit completion zsh)" after compinit.
# Answers `git-hermit <TAB>` and, through zsh's git completion, `git hermit <TAB>`.
_git-hermit() {
    local -a completions described plain
    local type key descr
    # zsh's _git shifts "git" off: words[1] is "hermit"; standalone it is "git-hermit"
    completions=("${(@f)$(env COMP_WORDS="git-hermit ${words[2,-1]}" COMP_CWORD=$((CURRENT - 1)) \
        %(var)s=zsh_complete git-hermit 2>/dev/null)}")
    for type key descr in "${completions[@]}"; do
        if [[ $type == plain ]]; then
            if [[ $descr == _ ]]; then plain+=("$key"); else described+=("${key//:/\\:}:$descr"); fi
        elif [[ $type == dir ]]; then _path_files -/
        elif [[ $type == file ]]; then _path_files -f
        fi
    done
    (( ${#described} )) && _describe -V unsorted described -U
    (( ${#plain} )) && compadd -U -V unsorted -a plain
    return 0
}
compdef _git-hermit git-hermit
'''

_FISH = r'''# git-hermit completion for fish: git hermit completion fish > ~/.config/fish/completions/git-hermit.fish
# Completes `git-hermit <TAB>` and `git hermit <TAB>` (registered on git as well: fish's own
# git completion does not reliably hand custom commands on).
function __git_hermit_ask -a words
    set -l response (env %(var)s=fish_complete COMP_WORDS="$words" COMP_CWORD=(commandline -ct) git-hermit 2>/dev/null)
    for line in $response
        set -l item (string split \t -- $line)
        switch $item[1]
            case dir
                __fish_complete_directories $item[2]
            case file
                __fish_complete_path $item[2]
            case plain
                if test "$item[3]" = _
                    echo $item[2]
                else
                    printf '%%s\t%%s\n' $item[2] $item[3]
                end
        end
    end
end
function __git_hermit_complete
    __git_hermit_ask (commandline -cp)
end
function __git_hermit_complete_under_git
    set -l words (commandline -opc)
    while test (count $words) -gt 0; and test "$words[1]" != hermit
        set -e words[1]
    end
    set -e words[1]
    __git_hermit_ask "git-hermit $words "(commandline -ct)
end
function __git_hermit_is_the_command
    set -l words (commandline -opc)
    test (count $words) -ge 2; and test "$words[2]" = hermit
end
complete --no-files --command git-hermit --arguments "(__git_hermit_complete)"
complete --no-files --command git --condition __git_hermit_is_the_command --arguments "(__git_hermit_complete_under_git)"
'''

_SCRIPTS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


def completion_script(shell: str, *, complete_var: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish)."""
    return _SCRIPTS[shell] % {"var": complete_var}
