# fish completion for routectl
set -l commands query set clear default input devices watch wait dump help
complete -c routectl -f
complete -c routectl -l json -d 'Print one JSON object'
complete -c routectl -s s -l server -r -d 'Server address'
complete -c routectl -l snapshot -r -F -d 'Read-only command against a dump'
complete -c routectl -l timeout -r -d 'Seconds to wait for the server'
complete -c routectl -s q -l quiet -d 'No notes on stderr'
complete -c routectl -s h -l help -d 'Show help'
complete -c routectl -l version -d 'Show versions'
complete -c routectl -n "not __fish_seen_subcommand_from $commands" -a "$commands"
complete -c routectl -n "__fish_seen_subcommand_from query" -a "route target override default external bluetooth headset receiver speaker engaged"
complete -c routectl -n "__fish_seen_subcommand_from set" -a "speaker earpiece receiver bluetooth headset"
complete -c routectl -n "__fish_seen_subcommand_from set" -l force -d 'Switch even from an external device'
complete -c routectl -n "__fish_seen_subcommand_from set" -l device -r -d 'Output to use'
complete -c routectl -n "__fish_seen_subcommand_from default" -a "speaker earpiece"
complete -c routectl -n "__fish_seen_subcommand_from input" -a "list set clear"
complete -c routectl -n "__fish_seen_subcommand_from watch" -l apply -d 'Enforce the rules'
complete -c routectl -n "__fish_seen_subcommand_from watch" -l mute-on-fallback -d 'Mute the speaker on fallback'
complete -c routectl -n "__fish_seen_subcommand_from wait" -a "speaker receiver bluetooth headset unknown"
complete -c routectl -n "__fish_seen_subcommand_from help" -a "$commands"
