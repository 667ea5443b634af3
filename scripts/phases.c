/* Stamps for scripts/phases.py: preloaded into a client (routectl or pactl), it notes the monotonic
 * time of its own initialization (all libraries loaded and relocated), of connect(), of every
 * message sent to the server, and of the exit, and appends them to $PHASES_OUT as one line
 * ("i123 c456 s789 ... x999", nanoseconds). Nothing else changes: each call goes on to the C
 * library's own function. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

static long long stamps[64];
static char kinds[64];
static int count;
static int written;

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void mark(char kind) {
	if (count < 64) {
		stamps[count] = now();
		kinds[count++] = kind;
	}
}

static void dump(void) {
	const char *path = getenv("PHASES_OUT");
	FILE *out;
	if (written || !path || !(out = fopen(path, "a")))
		return;
	written = 1;
	for (int i = 0; i < count; i++)
		fprintf(out, "%c%lld ", kinds[i], stamps[i]);
	fprintf(out, "x%lld\n", now());
	fclose(out);
}

__attribute__((constructor)) static void loaded(void) { mark('i'); }
/* pactl leaves through exit(), which runs this; routectl through _exit(), below. */
__attribute__((destructor)) static void leaving(void) { dump(); }

#define NEXT(name) static __typeof__(name) *next_##name; if (!next_##name) next_##name = dlsym(RTLD_NEXT, #name)

int connect(int fd, const struct sockaddr *address, socklen_t length) {
	NEXT(connect);
	mark('c');
	return next_connect(fd, address, length);
}

ssize_t send(int fd, const void *buffer, size_t length, int flags) {
	NEXT(send);
	mark('s');
	return next_send(fd, buffer, length, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *message, int flags) {
	NEXT(sendmsg);
	mark('s');
	return next_sendmsg(fd, message, flags);
}

void _exit(int status) {
	NEXT(_exit);
	dump();
	next__exit(status);
	__builtin_unreachable();
}
