# bash completion for routectl
_routectl() {
	local cur prev words cword
	_init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
	local commands="query set clear default input devices watch wait dump help"
	local globals="--json --server --snapshot --timeout --quiet --help --version"
	case $prev in
	--server | -s | --timeout | --device) return ;;
	--snapshot) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac
	local cmd="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--server | -s | --snapshot | --timeout | --device) ((i++)) ;;
		-*) ;;
		*) cmd=${words[i]}; break ;;
		esac
	done
	if [[ $cur == -* ]]; then
		case $cmd in
		set) COMPREPLY=($(compgen -W "$globals --force --device" -- "$cur")) ;;
		watch) COMPREPLY=($(compgen -W "$globals --apply --mute-on-fallback" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "$globals" -- "$cur")) ;;
		esac
		return
	fi
	case $cmd in
	"") COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	query) [ "$prev" = query ] && COMPREPLY=($(compgen -W "route target override default external bluetooth headset receiver speaker engaged" -- "$cur")) ;;
	set) [ "$prev" = set ] && COMPREPLY=($(compgen -W "speaker earpiece receiver bluetooth headset" -- "$cur")) ;;
	default) [ "$prev" = default ] && COMPREPLY=($(compgen -W "speaker earpiece" -- "$cur")) ;;
	input) [ "$prev" = input ] && COMPREPLY=($(compgen -W "list set clear" -- "$cur")) ;;
	wait) [ "$prev" = wait ] && COMPREPLY=($(compgen -W "speaker receiver bluetooth headset unknown" -- "$cur")) ;;
	help) [ "$prev" = help ] && COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	esac
}
complete -F _routectl routectl
