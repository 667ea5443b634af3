#!/bin/sh
# Build the simulator's alsa-lib plugins and preload shim into OUT (default: <repo>/.build/sim).
# Rebuilds only what is older than its sources. Needs gcc and libasound2-dev.
set -eu
src=$(cd "$(dirname "$0")" && pwd)
out=${1:-$src/../.build/sim}
mkdir -p "$out"
cc=${CC:-gcc}
flags="-O2 -g -Wall -Wextra -fPIC -DPIC -shared"  # PIC: alsa-lib's plugin symbol macros need it
build() { # OUTPUT SOURCE LIBS...
	target=$1 source=$2; shift 2
	if [ ! -e "$out/$target" ] || [ -n "$(find "$src/$source" "$src/alsa/sim.h" -newer "$out/$target")" ]; then
		# shellcheck disable=SC2086
		$cc $flags -o "$out/$target.tmp" "$src/$source" "$@"
		mv "$out/$target.tmp" "$out/$target"
	fi
}
build libasound_module_ctl_routectl_sim.so alsa/ctl_sim.c -lasound
build libasound_module_pcm_routectl_sim.so alsa/pcm_sim.c -lasound
build routectl-sim-preload.so shim/preload.c -ldl -lpthread
