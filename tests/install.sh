#!/usr/bin/env bash
# make install DESTDIR=… puts the binary, the man page, the user unit and the completions in place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
. "$here/lib.sh"
dest=$(mktemp -d /tmp/routectl-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
make -C "$root" --no-print-directory install DESTDIR="$dest" PREFIX=/usr >/dev/null
echo "== make install DESTDIR=$dest PREFIX=/usr"
for f in usr/bin/routectl usr/share/man/man1/routectl.1 usr/lib/systemd/user/routectl.service \
	usr/share/dbus-1/services/io.github.routectl.service \
	usr/share/bash-completion/completions/routectl usr/share/zsh/site-functions/_routectl \
	usr/share/fish/vendor_completions.d/routectl.fish; do
	expect_eq "installed: $f" yes "$([ -f "$dest/$f" ] && echo yes || echo no)"
done
expect_eq "the binary runs" "$("$root/.build/release/routectl" --version)" "$("$dest/usr/bin/routectl" --version)"
# The start-up choices of the Makefile (DESIGN.md §7): a runtime that renamed what
# Sources/CStartup/argv.c stands in for would bring back its /proc/self/maps scan without a word.
symbols=$(nm "$dest/usr/bin/routectl" 2>/dev/null || true)
expect_eq "start-up: the Swift runtime's argv scan is not linked (CStartup stands in for it)" no \
	"$(grep -q 'GLOBAL__sub_I_CommandLine' <<<"$symbols" && echo yes || echo no)"
# The start-up order names functions of this code: a renamed or newly specialised one drops out of
# the layout without a word from the linker (--no-warn-symbol-ordering). Not checked: the bodies LLVM
# merged (names ending in Tm), which an incremental build can make where a clean one does not; one
# missing costs nothing.
expect_eq "start-up: every function scripts/startup.order names exists (else: scripts/startup-order.sh)" "" \
	"$(nm --defined-only "$dest/usr/bin/routectl" | awk '{ print $3 }' | sort -u |
		comm -13 - <(grep -v 'Tm$' "$root/scripts/startup.order" | sort -u) | head -3)"
expect_eq "start-up: argv comes from CStartup" yes "$(grep -q ' T _swift_stdlib_getUnsafeArgvArgc$' <<<"$symbols" && echo yes || echo no)"
expect_eq "start-up: libgcc_s is not loaded" "" "$(ldd "$dest/usr/bin/routectl" | grep -o 'libgcc_s[^ ]*' || true)"
expect_eq "start-up: no RUNPATH, the libraries are the system's" "" \
	"$(readelf -d "$dest/usr/bin/routectl" | grep -E 'RUNPATH|RPATH' || true)"
# Sources/CStartup/backtracer.c: the runtime's search for its backtracer's helper only when asked for.
# Each run starts without the runtime's own variables, whatever the calling environment has.
bare() { env -u SWIFT_BACKTRACE -u SWIFT_ROOT "$@"; }
traced() { bare strace -f -o "$dest/trace" -e trace=%file,rt_sigaction "$@" >/dev/null 2>&1; }
# The runtime's search stats its candidates; backtracer.c's one look is an access().
searched() { grep -cE 'stat[a-z0-9]*\(.*(swift-backtrace|libexec/swift)' "$dest/trace" || true; }
# With backtraces on, the runtime installs its crash handler.
handler() { grep -qE 'rt_sigaction\(SIGSEGV, \{sa_handler=0x' "$dest/trace" && echo on || echo off; }
traced "$dest/usr/bin/routectl" --version
expect_eq "start-up: the Swift runtime does not search for swift-backtrace" 0 "$(searched)"
expect_eq "start-up: no helper, no crash handler (what the runtime's failed search would end in)" off "$(handler)"
expect_eq "start-up: no library is looked for beside the binary" 0 "$(grep -c "\"$dest/usr/bin/[^\"]*\.so" "$dest/trace" || true)"
traced env SWIFT_BACKTRACE=enable=yes "$dest/usr/bin/routectl" --version
expect_eq "start-up: a user's SWIFT_BACKTRACE=enable=yes is kept (the runtime searches)" yes \
	"$([ "$(searched)" -gt 0 ] && echo yes || echo no)"
# A toolchain under the same prefix: backtraces on with its helper, named by its absolute path, also
# when routectl is run by name from PATH elsewhere (the runtime's own root would be the current
# directory then: argv[0]).
mkdir -p "$dest/usr/libexec/swift/linux" "$dest/elsewhere"
printf '#!/bin/sh\n' >"$dest/usr/libexec/swift/linux/swift-backtrace"
chmod +x "$dest/usr/libexec/swift/linux/swift-backtrace"
traced "$dest/usr/bin/routectl" --version
expect_eq "start-up: a helper under the binary's prefix turns backtraces on" on "$(handler)"
(cd "$dest/elsewhere" && traced env PATH="$dest/usr/bin:$PATH" routectl --version)
expect_eq "start-up: run by name, the helper under the prefix still turns backtraces on" on "$(handler)"
expect_eq "start-up: run by name, nothing is searched for (not in the current directory either)" 0 "$(searched)"
rm -r "$dest/usr/libexec"
# SWIFT_ROOT is the runtime's: it searches there.
mkdir -p "$dest/toolchain/libexec/swift/linux"
printf '#!/bin/sh\n' >"$dest/toolchain/libexec/swift/linux/swift-backtrace"
chmod +x "$dest/toolchain/libexec/swift/linux/swift-backtrace"
traced env SWIFT_ROOT="$dest/toolchain" "$dest/usr/bin/routectl" --version
expect_eq "start-up: with SWIFT_ROOT the runtime finds the helper there" on "$(handler)"
rm -r "$dest/toolchain" "$dest/elsewhere"
expect_eq "the binary is position-independent (PIE)" DYN "$(readelf -h "$dest/usr/bin/routectl" | awk '/Type:/ {print $2}')"
expect_eq "the unit runs watch --apply --dbus from PREFIX" "ExecStart=/usr/bin/routectl watch --apply --dbus" \
	"$(grep '^ExecStart=' "$dest/usr/lib/systemd/user/routectl.service")"
expect_eq "the unit owns routectl's bus name" "BusName=io.github.routectl" "$(grep '^BusName=' "$dest/usr/lib/systemd/user/routectl.service")"
expect_eq "D-Bus activation starts the unit" "SystemdService=routectl.service" \
	"$(grep '^SystemdService=' "$dest/usr/share/dbus-1/services/io.github.routectl.service")"
if command -v systemd-analyze >/dev/null; then
	# verify resolves ExecStart on this machine's paths; point it at the installed binary.
	sed "s|/usr/bin/routectl|$dest/usr/bin/routectl|" "$dest/usr/lib/systemd/user/routectl.service" >"$dest/routectl.service"
	run_rc systemd-analyze verify --user "$dest/routectl.service"
	expect_eq "systemd-analyze verify: no complaint" "" "$(printf '%s' "$err" | grep routectl.service || true)"
fi
complete_words() {
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _routectl; echo "${COMPREPLY[*]}"' _ \
		"$dest/usr/share/bash-completion/completions/routectl" "$@"
}
expect_eq "bash completes commands" "set" "$(complete_words routectl se)"
expect_eq "bash completes targets" "speaker" "$(complete_words routectl set sp)"
expect_eq "bash completes fields" "external engaged" "$(complete_words routectl query e)"
expect_eq "bash completes watch options" "--apply" "$(complete_words routectl watch --ap)"
expect_eq "bash completes the words after a first word (input mute)" "on off toggle" "$(complete_words routectl input mute "")"
expect_eq "bash completes a command after --timeout=5 (bash splits it at '=')" "set" "$(complete_words routectl --timeout = 5 se)"
expect_eq "bash completes the words after a first word (completions ids)" "outputs inputs" "$(complete_words routectl completions ids "")"
expect_eq "bash completes the kinds priority set takes, at every place" "bluetooth headset|bluetooth headset" \
	"$(complete_words routectl priority set "")|$(complete_words routectl priority set x "")"
expect_eq "bash completes nothing after input set's one id" "" "$(complete_words routectl input set x "")"
bin="$dest/usr/bin/routectl"
for pair in bash:usr/share/bash-completion/completions/routectl zsh:usr/share/zsh/site-functions/_routectl \
	fish:usr/share/fish/vendor_completions.d/routectl.fish; do
	expect_eq "the installed ${pair%%:*} completion is what 'routectl completions ${pair%%:*}' writes from the command table" \
		"$("$bin" completions "${pair%%:*}")" "$(cat "$dest/${pair#*:}")"
done
# fish itself, on the installed script: what it offers for the command line so far (no server: no ids).
complete_fish() {
	PATH="$(dirname "$bin"):$PATH" fish --no-config -c \
		"source '$dest/usr/share/fish/vendor_completions.d/routectl.fish'; complete -C '$1'" | cut -f1 | sort | tr '\n' ' ' | sed 's/ $//'
}
expect_eq "fish completes commands" "set" "$(complete_fish 'routectl se')"
expect_eq "fish completes the words after a first word (input mute)" "off on toggle" "$(complete_fish 'routectl input mute ')"
expect_eq "fish: nothing after input mute's one word" "" "$(complete_fish 'routectl input mute on ')"
expect_eq "fish: priority set takes kinds at every place, not set's targets" "bluetooth headset|bluetooth headset" \
	"$(complete_fish 'routectl priority set ')|$(complete_fish 'routectl priority set x ')"
expect_eq "fish: a command's words past a global option and its value" "clear list mute set" "$(complete_fish 'routectl --timeout 3 input ')"
expect_eq "fish: no file names for --timeout's seconds" "" "$(complete_fish 'routectl --timeout ')"
expect_eq "fish completes watch options" "--apply" "$(complete_fish 'routectl watch --ap')"
expect_eq "fish: a flag already given is not offered again" "|" "$(complete_fish 'routectl watch --apply --ap')|$(complete_fish 'routectl --json -q --js')"
for cmd in $("$bin" --help | sed -n '/^COMMANDS:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
	expect_match "bash completes the command '$cmd' from --help" "(^| )$cmd( |$)" "$(complete_words routectl "")"
done
expect_eq "man page renders without warnings" "" "$(MANWIDTH=80 man --warnings -l "$dest/usr/share/man/man1/routectl.1" 2>&1 >/dev/null)"
# An alternating macro (.BR a ); b) runs its arguments together: "apply);also".
expect_eq "man page: no words run together by an alternating macro" "" \
	"$(MANWIDTH=1000 man -l "$dest/usr/share/man/man1/routectl.1" 2>/dev/null | grep -E '[a-z][;,)]+[a-z]' || true)"
summary
