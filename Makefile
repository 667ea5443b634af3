# routectl — build, test, demo, bench, install. `make test` is what CI runs (.ci/run).
PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The Debian packages the build, the tests and the demo need.
# gcc and libasound2-dev build the card simulator's alsa-lib plugins (sim/); alsa-ucm-conf is the UCM
# core the phone cards' private tree includes; the BlueZ stand-in (sim/bluez) runs on the system
# python3 with python3-dbus and python3-gi, under the servers' own bluez5 modules. libsystemd-dev is
# sd-bus for the D-Bus service; its tests drive it on a private dbus-daemon with busctl (systemd),
# gdbus (libglib2.0-bin) and callaudiocli (libcallaudio-tools), and hold the drop-in to the interface
# XML callaudiod ships; make bench runs callaudiod (callaudiocli -m 1) against routectl call start.
# strace: tests/install.sh checks what the binary looks for at start-up.
APT_PACKAGES := libpulse-dev pulseaudio pulseaudio-utils pipewire pipewire-bin pipewire-pulse wireplumber dbus python3 \
	gcc libasound2-dev alsa-ucm-conf python3-dbus python3-gi pulseaudio-module-bluetooth libspa-0.2-bluetooth \
	libsystemd-dev systemd libcallaudio-tools callaudiod libglib2.0-bin strace fish

# Start-up is most of a query's time, so the release binary links the Swift runtime statically and,
# where gcc has it, libstdc++ too: libstdc++.so's ~4300 symbol relocations cost ~1 ms per run.
# SwiftPM always passes -lstdc++, so a linker script named libstdc++.so points it at the archive.
STDCXX_A := $(shell g++ -print-file-name=libstdc++.a 2>/dev/null)
SHIM_DIR := $(CURDIR)/.build/static-libstdcxx
# -static-libgcc: the unwinder the static C++ runtime needs comes from libgcc.a, so libgcc_s.so is not
# loaded at all (pactl does not load it either; ~0.15 ms of a `query`). The binary stays PIE: -no-pie
# saved ~0.2 ms more, but `watch --apply --dbus` runs all session long on D-Bus calls and Bluetooth
# device names, and its image should not sit at a fixed address.
# --disable-local-rpath: SwiftPM's RUNPATH of $ORIGIN had the loader look for each of the binary's
# libraries in its own directory first (~15 failed opens a run); they are the system's.
RELEASE_FLAGS := -c release --static-swift-stdlib --disable-local-rpath -Xswiftc -Xclang-linker -Xswiftc -static-libgcc
ifneq ($(wildcard $(STDCXX_A)),)
RELEASE_FLAGS += -Xlinker -L$(SHIM_DIR)
endif
# A concrete generic type (an array of Port, a [String: String]) gets its metadata from a direct
# accessor, not by demangling its name at run time: the first demangling of each of the ~30 types a
# query uses searched the runtime's type records, 0.33M of a query's 6.1M instructions.
RELEASE_FLAGS += -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors
# lld, shipped with the Swift toolchain, lays out the functions the one-shot commands run side by
# side (scripts/startup.order, written by scripts/startup-order.sh), so a query faults in fewer pages
# of text: each function in its own section (-function-sections), or the order can only move whole
# files. lld also packs the PIE's ~16,500 relative relocations
# into a 3 KB table (DT_RELR, which glibc reads from 2.36 on) instead of the 397 KB one the loader
# would read at every start; the binary then needs glibc 2.36 to run. PACK_RELOCS=auto (the default)
# packs them when the building machine's glibc reads them, PACK_RELOCS=no never (a binary for an
# older glibc). Without lld beside swift (a wrapper or a toolchain manager's proxy hides it), the
# default linker and layout, and `make build` says so.
LLD := $(wildcard $(dir $(realpath $(shell command -v $(SWIFT))))ld.lld)
ifneq ($(LLD),)
RELEASE_FLAGS += -Xswiftc -Xfrontend -Xswiftc -function-sections -Xswiftc -use-ld=lld \
	-Xlinker --symbol-ordering-file=$(CURDIR)/scripts/startup.order -Xlinker --no-warn-symbol-ordering
PACK_RELOCS ?= auto
ifeq ($(filter $(PACK_RELOCS),auto yes no),)
$(error PACK_RELOCS is auto, yes or no, not '$(PACK_RELOCS)')
endif
ifeq ($(PACK_RELOCS),auto)
PACK_RELOCS := $(if $(filter 1,$(shell getconf GNU_LIBC_VERSION 2>/dev/null | \
	awk '{ split($$2, v, "."); print (v[1] > 2 || v[2] >= 36) }')),yes,no)
endif
ifeq ($(PACK_RELOCS),yes)
RELEASE_FLAGS += -Xlinker -z -Xlinker pack-relative-relocs
endif
endif
# swiftc keeps an object whose IR has not changed, so a new code generation flag (-function-sections)
# would reach only the files that changed: when the flags differ from the last build's, the release
# build starts clean.
FLAGS_STAMP := .build/release-flags
BIN := .build/release/routectl

.PHONY: all deps build sim test unit e2e demo bench install uninstall clean

all: build

deps:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	else echo "make deps: all packages present"; fi

$(SHIM_DIR)/libstdc++.so:
	@mkdir -p $(SHIM_DIR)
	@echo 'INPUT($(STDCXX_A))' >$@

build: deps sim $(if $(wildcard $(STDCXX_A)),$(SHIM_DIR)/libstdc++.so)
	@# SwiftPM does not relink for a new order file; a missing binary it does.
	@if [ scripts/startup.order -nt $(BIN) ]; then rm -f $(BIN); fi
	@[ -n "$(LLD)" ] || echo "make build: no ld.lld beside $(SWIFT); linking with the default linker, without the start-up order"
	@if [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" != '$(RELEASE_FLAGS)' ]; then \
		[ ! -f $(FLAGS_STAMP) ] || echo "make build: the build flags changed; building from clean"; \
		rm -rf .build/*/release; mkdir -p .build && echo '$(RELEASE_FLAGS)' >$(FLAGS_STAMP); fi
	$(SWIFT) build $(RELEASE_FLAGS)

# The card simulator's plugins and preload shim, into .build/sim (scripts/server.sh also builds them).
sim: deps
	sim/build.sh .build/sim

unit: deps
	$(SWIFT) test

# Each suite runs once more when it fails, saying so (tests/run-suite.sh): a failure that recurs fails.
E2E := for server in pulseaudio pipewire; do \
		for suite in e2e e2e-control e2e-state e2e-watch e2e-cards e2e-pulse e2e-calls e2e-desktop e2e-dbus; do \
			tests/run-suite.sh $$suite $$server $(BIN) || exit 1; done; done; \
	for server in pulseaudio pipewire; do tests/run-suite.sh e2e-bluetooth $$server $(BIN) || exit 1; done

e2e: build
	@$(E2E)

test: build
	$(SWIFT) test
	@$(E2E)
	tests/install.sh

demo: build
	scripts/demo.sh $(BIN)

bench: build
	python3 scripts/bench.py $(BIN)

SHARE := $(DESTDIR)$(PREFIX)/share
UNITDIR := $(DESTDIR)$(PREFIX)/lib/systemd/user
DBUSDIR := $(SHARE)/dbus-1/services
INSTALLED := $(DESTDIR)$(PREFIX)/bin/routectl $(SHARE)/man/man1/routectl.1 $(UNITDIR)/routectl.service \
	$(DBUSDIR)/io.github.routectl.service \
	$(SHARE)/bash-completion/completions/routectl $(SHARE)/zsh/site-functions/_routectl \
	$(SHARE)/fish/vendor_completions.d/routectl.fish

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE)/man/man1 $(UNITDIR) $(DBUSDIR) $(SHARE)/bash-completion/completions \
		$(SHARE)/zsh/site-functions $(SHARE)/fish/vendor_completions.d
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/routectl
	install -m 0644 man/routectl.1 $(SHARE)/man/man1/routectl.1
	sed 's|@BINDIR@|$(PREFIX)/bin|' systemd/routectl.service.in >$(UNITDIR)/routectl.service
	chmod 0644 $(UNITDIR)/routectl.service
	sed 's|@BINDIR@|$(PREFIX)/bin|' systemd/io.github.routectl.service.in >$(DBUSDIR)/io.github.routectl.service
	chmod 0644 $(DBUSDIR)/io.github.routectl.service
	install -m 0644 completions/routectl.bash $(SHARE)/bash-completion/completions/routectl
	install -m 0644 completions/_routectl $(SHARE)/zsh/site-functions/_routectl
	install -m 0644 completions/routectl.fish $(SHARE)/fish/vendor_completions.d/routectl.fish

uninstall:
	rm -f $(INSTALLED)

clean:
	rm -rf .build
