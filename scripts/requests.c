/* For scripts/phases.py: how long the server takes to answer a set of requests, sent together as
 * routectl and pactl send theirs, from one connection already warm (no start-up, no handshake, no
 * page faults: the client's callbacks only count the replies). Prints one line per set:
 * "NAME MEDIAN_US", the median of ROUNDS rounds after 50 untimed ones.
 *
 *   requests ROUNDS      (the server from PULSE_SERVER, as any libpulse client) */
#include <pulse/pulseaudio.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int pending;

static void server_reply(pa_context *c, const pa_server_info *i, void *u) { pending--; }
static void sink_reply(pa_context *c, const pa_sink_info *i, int eol, void *u) { if (eol) pending--; }
static void source_reply(pa_context *c, const pa_source_info *i, int eol, void *u) { if (eol) pending--; }
static void card_reply(pa_context *c, const pa_card_info *i, int eol, void *u) { if (eol) pending--; }
static void input_reply(pa_context *c, const pa_sink_input_info *i, int eol, void *u) { if (eol) pending--; }

static void send_request(pa_context *c, char what) {
	pa_operation *o = NULL;
	switch (what) {
	case 'S': o = pa_context_get_server_info(c, server_reply, NULL); break;
	case 'k': o = pa_context_get_sink_info_list(c, sink_reply, NULL); break;
	case 'd': o = pa_context_get_sink_info_by_name(c, "@DEFAULT_SINK@", sink_reply, NULL); break;
	case 'm': o = pa_context_get_source_info_by_name(c, "@DEFAULT_SOURCE@", source_reply, NULL); break;
	case 'c': o = pa_context_get_card_info_list(c, card_reply, NULL); break;
	case 'i': o = pa_context_get_sink_input_info_list(c, input_reply, NULL); break;
	}
	if (!o) {
		fprintf(stderr, "requests: %s\n", pa_strerror(pa_context_errno(c)));
		exit(1);
	}
	pa_operation_unref(o);
	pending++;
}

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	/* The sets: pactl get-default-sink's, pactl -f json list sinks's, routectl query route's (no
	 * override on disk), and the full status's (query, --json query). */
	static const struct { const char *name, *requests; } sets[] = {
		{"pactl get-default-sink", "S"},
		{"pactl -f json list sinks", "k"},
		{"routectl query route", "Sdc"},
		{"routectl query (full status)", "Skmci"},
	};
	int rounds = argc > 1 ? atoi(argv[1]) : 1000;
	if (rounds < 1)
		rounds = 1;
	double *times = calloc(rounds, sizeof *times);
	pa_mainloop *loop = pa_mainloop_new();
	pa_context *c = pa_context_new(pa_mainloop_get_api(loop), "routectl-requests");
	if (!times || !c || pa_context_connect(c, NULL, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) {
		fprintf(stderr, "requests: cannot connect\n");
		return 1;
	}
	for (pa_context_state_t s; (s = pa_context_get_state(c)) != PA_CONTEXT_READY;) {
		if (!PA_CONTEXT_IS_GOOD(s)) {
			fprintf(stderr, "requests: %s\n", pa_strerror(pa_context_errno(c)));
			return 1;
		}
		pa_mainloop_iterate(loop, 1, NULL);
	}
	for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
		for (int r = -50; r < rounds; r++) {
			double start = now_us();
			for (const char *w = sets[k].requests; *w; w++)
				send_request(c, *w);
			while (pending > 0)
				if (pa_mainloop_iterate(loop, 1, NULL) < 0)
					return 1;
			if (r >= 0)
				times[r] = now_us() - start;
		}
		qsort(times, rounds, sizeof *times, by_value);
		printf("%s\t%.1f\n", sets[k].name, times[rounds / 2]);
	}
	return 0;
}
