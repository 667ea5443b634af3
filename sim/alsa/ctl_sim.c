/* alsa-lib control plugin: a simulated sound card's mixer and jack controls (DESIGN.md §6,
 * shared/SIMULATED-DEVICES.md §1).
 *
 * The card is described by DIR/cardN/info and DIR/cardN/controls; each control's value is the
 * file DIR/cardN/values/NAME ('/' in NAME written as '_'), space-separated integers, one per
 * channel. Writing a value file is the hardware event: an inotify watch on values/ turns it into
 * a normal control event for every client (PulseAudio, ACP in WirePlumber, amixer).
 *
 * controls: one control a line, '#' comments:
 *   IFACE TYPE COUNT MIN MAX DBMIN DBSTEP INIT NAME...
 *   IFACE mixer|card; TYPE int|bool|jack (a read-only bool); DBMIN/DBSTEP in 0.01 dB or '-'.
 *
 * Configuration: ctl.NAME { type routectl_sim card CARD dir "DIR" } */
#define _GNU_SOURCE
#include <alsa/asoundlib.h>
#include <alsa/control_external.h>
#include <fcntl.h>
#include <limits.h>
#include <sound/tlv.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "sim.h"

#define MAX_CONTROLS 64
#define MAX_CHANNELS 8

struct control {
	snd_ctl_elem_iface_t iface;
	int type;		/* SND_CTL_ELEM_TYPE_INTEGER or _BOOLEAN */
	int readonly;		/* jacks are read-only, as in the kernel */
	unsigned int count;
	long min, max, init;
	int has_db;
	int db_min, db_step;	/* 0.01 dB */
	char name[44];		/* the kernel's SNDRV_CTL_ELEM_ID_NAME_MAXLEN */
	char file[PATH_MAX];
};

struct sim_ctl {
	snd_ctl_ext_t ext;
	char dir[PATH_MAX];	/* DIR/cardN */
	int ncontrols;
	struct control controls[MAX_CONTROLS];
	int subscribed;
	/* Controls whose value file changed and whose event is not yet read, as a bitmap. */
	unsigned long long pending;
};

/* Parse one value file into vals; missing channels repeat the last value. */
static int read_values(const struct control *c, long *vals)
{
	char buf[256];
	unsigned int i = 0;
	int fd = open(c->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = 0;
	char *p = buf, *end;
	for (; i < c->count; i++) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		vals[i] = v < c->min ? c->min : v > c->max ? c->max : v;
		p = end;
	}
	if (i == 0)
		vals[i++] = c->init;
	for (; i < c->count; i++)
		vals[i] = vals[i - 1];
	return 0;
}

/* Write a value file atomically (rename) so a concurrent reader never sees half a value. */
static int write_values(const struct control *c, const long *vals)
{
	char tmp[PATH_MAX + 32], buf[256];
	int len = 0;
	for (unsigned int i = 0; i < c->count; i++)
		len += snprintf(buf + len, sizeof(buf) - len, "%s%ld", i ? " " : "", vals[i]);
	len += snprintf(buf + len, sizeof(buf) - len, "\n");
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", c->file, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int ok = write(fd, buf, len) == len;
	close(fd);
	if (!ok || rename(tmp, c->file) < 0) {
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

static int parse_controls(struct sim_ctl *sim)
{
	char path[PATH_MAX + 16], line[512];
	snprintf(path, sizeof(path), "%s/controls", sim->dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f) && sim->ncontrols < MAX_CONTROLS) {
		char iface[16], type[16], dbmin[16], dbstep[16];
		int off = 0;
		struct control *c = &sim->controls[sim->ncontrols];
		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%15s %15s %u %ld %ld %15s %15s %ld %n", iface, type, &c->count,
			   &c->min, &c->max, dbmin, dbstep, &c->init, &off) < 8 || !off || !line[off])
			continue;
		snprintf(c->name, sizeof(c->name), "%s", line + off);
		c->iface = strcmp(iface, "card") == 0 ? SND_CTL_ELEM_IFACE_CARD : SND_CTL_ELEM_IFACE_MIXER;
		c->type = strcmp(type, "int") == 0 ? SND_CTL_ELEM_TYPE_INTEGER : SND_CTL_ELEM_TYPE_BOOLEAN;
		c->readonly = strcmp(type, "jack") == 0;
		if (c->count < 1 || c->count > MAX_CHANNELS)
			c->count = 1;
		c->has_db = strcmp(dbmin, "-") != 0;
		c->db_min = atoi(dbmin);
		c->db_step = atoi(dbstep);
		/* File name: the control name with '/' (not allowed in a file name) as '_'. */
		int n = snprintf(c->file, sizeof(c->file), "%s/values/", sim->dir);
		for (const char *s = c->name; *s && n < (int)sizeof(c->file) - 1; s++)
			c->file[n++] = *s == '/' ? '_' : *s;
		c->file[n] = 0;
		sim->ncontrols++;
	}
	fclose(f);
	return 0;
}

/* Give every control without a value file its initial value (first open of a fresh card). */
static void init_values(struct sim_ctl *sim)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/values", sim->dir);
	mkdir(path, 0755);
	for (int i = 0; i < sim->ncontrols; i++) {
		struct control *c = &sim->controls[i];
		long vals[MAX_CHANNELS];
		if (access(c->file, F_OK) == 0)
			continue;
		for (unsigned int k = 0; k < c->count; k++)
			vals[k] = c->init;
		write_values(c, vals);
	}
}

static void sim_close(snd_ctl_ext_t *ext)
{
	struct sim_ctl *sim = ext->private_data;
	if (ext->poll_fd >= 0)
		close(ext->poll_fd);
	free(sim);
}

static int sim_elem_count(snd_ctl_ext_t *ext)
{
	return ((struct sim_ctl *)ext->private_data)->ncontrols;
}

static int sim_elem_list(snd_ctl_ext_t *ext, unsigned int offset, snd_ctl_elem_id_t *id)
{
	struct sim_ctl *sim = ext->private_data;
	if (offset >= (unsigned int)sim->ncontrols)
		return -EINVAL;
	snd_ctl_elem_id_set_interface(id, sim->controls[offset].iface);
	snd_ctl_elem_id_set_name(id, sim->controls[offset].name);
	return 0;
}

static snd_ctl_ext_key_t sim_find_elem(snd_ctl_ext_t *ext, const snd_ctl_elem_id_t *id)
{
	struct sim_ctl *sim = ext->private_data;
	unsigned int numid = snd_ctl_elem_id_get_numid(id);
	/* ctl_ext numbers elements offset + 1. */
	if (numid > 0 && numid <= (unsigned int)sim->ncontrols)
		return numid - 1;
	if (snd_ctl_elem_id_get_index(id) != 0)
		return SND_CTL_EXT_KEY_NOT_FOUND;
	for (int i = 0; i < sim->ncontrols; i++)
		if (sim->controls[i].iface == snd_ctl_elem_id_get_interface(id) &&
		    strcmp(sim->controls[i].name, snd_ctl_elem_id_get_name(id)) == 0)
			return i;
	return SND_CTL_EXT_KEY_NOT_FOUND;
}

static int sim_get_attribute(snd_ctl_ext_t *ext, snd_ctl_ext_key_t key, int *type,
			     unsigned int *acc, unsigned int *count)
{
	struct control *c = &((struct sim_ctl *)ext->private_data)->controls[key];
	*type = c->type;
	*count = c->count;
	*acc = c->readonly ? SND_CTL_EXT_ACCESS_READ : SND_CTL_EXT_ACCESS_READWRITE;
	/* The dB scale is what makes the servers use hardware volume instead of software. */
	if (c->has_db)
		*acc |= SND_CTL_EXT_ACCESS_TLV_READ | SND_CTL_EXT_ACCESS_TLV_CALLBACK;
	return 0;
}

static int sim_get_integer_info(snd_ctl_ext_t *ext, snd_ctl_ext_key_t key, long *imin,
				long *imax, long *istep)
{
	struct control *c = &((struct sim_ctl *)ext->private_data)->controls[key];
	*imin = c->min;
	*imax = c->max;
	*istep = 1;
	return 0;
}

static int sim_read_integer(snd_ctl_ext_t *ext, snd_ctl_ext_key_t key, long *value)
{
	return read_values(&((struct sim_ctl *)ext->private_data)->controls[key], value);
}

static int sim_write_integer(snd_ctl_ext_t *ext, snd_ctl_ext_key_t key, long *value)
{
	struct control *c = &((struct sim_ctl *)ext->private_data)->controls[key];
	long old[MAX_CHANNELS];
	int err;
	if (c->readonly)
		return -EPERM;
	if (read_values(c, old) == 0 && memcmp(old, value, c->count * sizeof(long)) == 0)
		return 0;	/* unchanged, as the kernel reports it */
	err = write_values(c, value);
	return err < 0 ? err : 1;
}

static int sim_tlv(snd_ctl_ext_t *ext, snd_ctl_ext_key_t key, int op_flag, unsigned int numid,
		   unsigned int *tlv, unsigned int tlv_size)
{
	struct control *c = &((struct sim_ctl *)ext->private_data)->controls[key];
	(void)numid;
	if (op_flag != 0 || !c->has_db)
		return -ENXIO;	/* read-only scale */
	if (tlv_size < 4 * sizeof(unsigned int))
		return -ENOMEM;
	tlv[0] = SNDRV_CTL_TLVT_DB_SCALE;
	tlv[1] = 2 * sizeof(unsigned int);
	tlv[2] = (unsigned int)c->db_min;
	/* The lowest step mutes, as on HDA codecs. */
	tlv[3] = (unsigned int)c->db_step | SNDRV_CTL_TLVD_DB_SCALE_MUTE;
	return 0;
}

static void sim_subscribe_events(snd_ctl_ext_t *ext, int subscribe)
{
	((struct sim_ctl *)ext->private_data)->subscribed = subscribe;
}

/* Move the inotify events that arrived into the pending bitmap. */
static void drain_inotify(struct sim_ctl *sim)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;
	while ((n = read(sim->ext.poll_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			for (int i = 0; ev->len && i < sim->ncontrols; i++) {
				const char *base = strrchr(sim->controls[i].file, '/') + 1;
				if (strcmp(base, ev->name) == 0)
					sim->pending |= 1ULL << i;
			}
			p += sizeof(*ev) + ev->len;
		}
	}
}

static int sim_read_event(snd_ctl_ext_t *ext, snd_ctl_elem_id_t *id, unsigned int *event_mask)
{
	struct sim_ctl *sim = ext->private_data;
	drain_inotify(sim);
	if (!sim->subscribed || !sim->pending) {
		sim->pending = 0;
		return -EAGAIN;
	}
	int i = __builtin_ctzll(sim->pending);
	sim->pending &= ~(1ULL << i);
	snd_ctl_elem_id_set_numid(id, i + 1);
	snd_ctl_elem_id_set_interface(id, sim->controls[i].iface);
	snd_ctl_elem_id_set_name(id, sim->controls[i].name);
	*event_mask = SND_CTL_EVENT_MASK_VALUE;
	return 1;
}

static int sim_poll_revents(snd_ctl_ext_t *ext, struct pollfd *pfds, unsigned int nfds,
			    unsigned short *revents)
{
	struct sim_ctl *sim = ext->private_data;
	(void)pfds;
	(void)nfds;
	/* Readable only while an event is really pending, so nobody spins on stray inotify noise
	 * (our own temporary files). */
	drain_inotify(sim);
	*revents = sim->pending && sim->subscribed ? POLLIN : 0;
	return 0;
}

static const snd_ctl_ext_callback_t sim_callbacks = {
	.close = sim_close,
	.elem_count = sim_elem_count,
	.elem_list = sim_elem_list,
	.find_elem = sim_find_elem,
	.get_attribute = sim_get_attribute,
	.get_integer_info = sim_get_integer_info,
	.read_integer = sim_read_integer,
	.write_integer = sim_write_integer,
	.subscribe_events = sim_subscribe_events,
	.read_event = sim_read_event,
	.poll_revents = sim_poll_revents,
};

SND_CTL_PLUGIN_DEFINE_FUNC(routectl_sim)
{
	snd_config_iterator_t i, next;
	const char *card = "0", *dir = getenv("ROUTECTL_SIM_DIR");
	char cardbuf[16];
	int err, n;
	(void)root;

	snd_config_for_each(i, next, conf) {
		snd_config_t *n = snd_config_iterator_entry(i);
		const char *key;
		if (snd_config_get_id(n, &key) < 0)
			continue;
		if (!strcmp(key, "comment") || !strcmp(key, "type") || !strcmp(key, "hint"))
			continue;
		if (!strcmp(key, "card")) {
			if (sim_config_card(n, cardbuf, sizeof(cardbuf), &card) < 0)
				return -EINVAL;
			continue;
		}
		if (!strcmp(key, "dir")) {
			if (snd_config_get_string(n, &dir) < 0)
				return -EINVAL;
			continue;
		}
		SNDERR("routectl_sim: unknown field %s", key);
		return -EINVAL;
	}
	if (!dir)
		return -ENODEV;
	n = sim_card_index(dir, card);
	if (n < 0)
		return n;

	struct sim_ctl *sim = calloc(1, sizeof(*sim));
	if (!sim)
		return -ENOMEM;
	snprintf(sim->dir, sizeof(sim->dir), "%s/card%d", dir, n);
	sim->ext.version = SND_CTL_EXT_VERSION;
	sim->ext.card_idx = n;
	sim_info_get(dir, n, "id", sim->ext.id, sizeof(sim->ext.id));
	sim_info_get(dir, n, "driver", sim->ext.driver, sizeof(sim->ext.driver));
	sim_info_get(dir, n, "name", sim->ext.name, sizeof(sim->ext.name));
	sim_info_get(dir, n, "longname", sim->ext.longname, sizeof(sim->ext.longname));
	sim_info_get(dir, n, "mixername", sim->ext.mixername, sizeof(sim->ext.mixername));
	sim->ext.callback = &sim_callbacks;
	sim->ext.private_data = sim;
	sim->ext.tlv.c = sim_tlv;
	sim->ext.poll_fd = -1;
	if ((err = parse_controls(sim)) < 0)
		goto fail;
	init_values(sim);
	sim->ext.poll_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	char values[PATH_MAX + 16];
	snprintf(values, sizeof(values), "%s/values", sim->dir);
	if (sim->ext.poll_fd < 0 ||
	    inotify_add_watch(sim->ext.poll_fd, values, IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = snd_ctl_ext_create(&sim->ext, name, mode)) < 0)
		goto fail;
	*handlep = sim->ext.handle;
	return 0;
fail:
	if (sim->ext.poll_fd >= 0)
		close(sim->ext.poll_fd);
	free(sim);
	return err;
}

SND_CTL_PLUGIN_SYMBOL(routectl_sim);
