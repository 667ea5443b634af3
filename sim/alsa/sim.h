/* Shared helpers for the routectl ALSA simulator (control plugin, PCM plugin, preload shim).
 * A simulated card N lives in DIR/cardN/: `info` (key=value lines), `controls`, `pcms`, and
 * `values/` (one file per control; writing one is the hardware event). */
#ifndef ROUTECTL_SIM_H
#define ROUTECTL_SIM_H

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SIM_MAX_CARDS 32

/* Read one key of DIR/cardN/info into buf; returns 0, or -ENOENT when absent. */
static inline int sim_info_get(const char *dir, int card, const char *key, char *buf, size_t size)
{
	char path[4096], line[512];
	size_t klen = strlen(key);
	int ret = -ENOENT;
	snprintf(path, sizeof(path), "%s/card%d/info", dir, card);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
			size_t len = strlen(line + klen + 1);
			if (len >= size)
				len = size - 1;
			memcpy(buf, line + klen + 1, len);
			buf[len] = 0;
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* Whether card N is simulated (its directory exists). */
static inline int sim_card_exists(const char *dir, int card)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/card%d/info", dir, card);
	return stat(path, &st) == 0;
}

/* Card number for an ALSA CARD argument: a number, or a card id as in `hw:Phone` (UCM's
 * ${CardId}). Returns -ENODEV for a card that is not simulated. */
static inline int sim_card_index(const char *dir, const char *card)
{
	char id[64];
	const char *p;
	if (!card || !*card)
		return -ENODEV;
	for (p = card; isdigit((unsigned char)*p); p++)
		;
	if (!*p) {
		int n = atoi(card);
		return n < SIM_MAX_CARDS && sim_card_exists(dir, n) ? n : -ENODEV;
	}
	for (int n = 0; n < SIM_MAX_CARDS; n++)
		if (sim_info_get(dir, n, "id", id, sizeof(id)) == 0 && strcmp(id, card) == 0)
			return n;
	return -ENODEV;
}

#ifdef __ALSA_CONF_H
/* A plugin's `card` argument: a string, or an integer once @args are expanded. Points *card at the
 * string (buf holds the digits of an integer); 0, or -EINVAL. */
static inline int sim_config_card(snd_config_t *n, char *buf, size_t size, const char **card)
{
	long number;
	if (snd_config_get_integer(n, &number) == 0) {
		snprintf(buf, size, "%ld", number);
		*card = buf;
		return 0;
	}
	return snd_config_get_string(n, card) < 0 ? -EINVAL : 0;
}
#endif

#endif
