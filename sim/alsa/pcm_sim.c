/* alsa-lib PCM plugin: a simulated card's playback or capture device that consumes or produces
 * silence at the real rate (shared/SIMULATED-DEVICES.md §1). The stock `null` PCM is always
 * ready and makes PulseAudio spin; this one moves its hardware pointer with the clock and wakes
 * pollers through a timerfd when avail_min frames are ready.
 *
 * Configuration: pcm.NAME { type routectl_sim card CARD device DEV kind hw|front|hdmi dir "DIR" }
 * The open succeeds only for a device the card lists in DIR/cardN/pcms
 * ("playback|capture KIND DEV" lines), so the servers' profile probing finds what the card has. */
#define _GNU_SOURCE
#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <limits.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

struct sim_pcm {
	snd_pcm_ioplug_t io;
	char name[64];
	int timer_fd;
	snd_pcm_uframes_t hw;		/* hardware pointer, modulo the boundary */
	snd_pcm_uframes_t avail_min;
	unsigned long long start_ns;	/* clock at start */
	unsigned long long done;	/* frames of clock time accounted for since start */
	int running;
};

static unsigned long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Frames the application has queued (playback) or not yet read (capture). */
static snd_pcm_uframes_t filled(struct sim_pcm *p)
{
	/* Both pointers run modulo the boundary, which on 64-bit is never reached in practice. */
	if (p->io.stream == SND_PCM_STREAM_PLAYBACK)
		return (p->io.appl_ptr - p->hw);
	return (p->hw - p->io.appl_ptr);
}

/* Advance the hardware pointer by the clock. Playback stops at the application pointer (an
 * empty buffer plays silence instead of an xrun); capture drops what overflows the buffer. */
static void advance(struct sim_pcm *p)
{
	if (!p->running)
		return;
	unsigned long long total = (now_ns() - p->start_ns) * p->io.rate / 1000000000ULL;
	snd_pcm_uframes_t step = total - p->done;
	p->done = total;
	if (p->io.stream == SND_PCM_STREAM_PLAYBACK) {
		snd_pcm_uframes_t queued = filled(p);
		p->hw += step < queued ? step : queued;
	} else {
		p->hw += step;
		if (filled(p) > p->io.buffer_size)
			p->hw = p->io.appl_ptr + p->io.buffer_size;
	}
}

static snd_pcm_uframes_t avail(struct sim_pcm *p)
{
	snd_pcm_uframes_t f = filled(p);
	return p->io.stream == SND_PCM_STREAM_PLAYBACK ? p->io.buffer_size - f : f;
}

/* Arm the timerfd for the moment avail reaches avail_min (now, if it already has). */
static void arm(struct sim_pcm *p)
{
	struct itimerspec its = { 0 };
	snd_pcm_uframes_t a = avail(p);
	unsigned long long ns = 1;	/* 0 would disarm */
	if (!p->running && p->io.stream == SND_PCM_STREAM_CAPTURE)
		ns = 0;			/* a stopped capture never becomes ready */
	else if (p->running && a < p->avail_min)
		/* rounded up, plus a frame: the pointer counts whole frames */
		ns = ((p->avail_min - a + 1) * 1000000000ULL + p->io.rate - 1) / p->io.rate;
	its.it_value.tv_sec = ns / 1000000000ULL;
	its.it_value.tv_nsec = ns % 1000000000ULL;
	timerfd_settime(p->timer_fd, 0, &its, NULL);
}

static int sim_start(snd_pcm_ioplug_t *io)
{
	struct sim_pcm *p = io->private_data;
	p->start_ns = now_ns();
	p->done = 0;
	p->running = 1;
	arm(p);
	return 0;
}

static int sim_stop(snd_pcm_ioplug_t *io)
{
	struct sim_pcm *p = io->private_data;
	p->running = 0;
	arm(p);
	return 0;
}

static int sim_prepare(snd_pcm_ioplug_t *io)
{
	struct sim_pcm *p = io->private_data;
	p->hw = 0;
	p->running = 0;
	arm(p);
	return 0;
}

static snd_pcm_sframes_t sim_pointer(snd_pcm_ioplug_t *io)
{
	struct sim_pcm *p = io->private_data;
	advance(p);
	return p->hw;
}

static snd_pcm_sframes_t sim_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
				      snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
	/* Playback data goes nowhere; capture is silence. */
	if (io->stream == SND_PCM_STREAM_CAPTURE)
		snd_pcm_areas_silence(areas, offset, io->channels, size, io->format);
	return size;
}

static int sim_sw_params(snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params)
{
	struct sim_pcm *p = io->private_data;
	snd_pcm_sw_params_get_avail_min(params, &p->avail_min);
	if (p->avail_min < 1)
		p->avail_min = 1;
	return 0;
}

static int sim_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds,
			    unsigned short *revents)
{
	struct sim_pcm *p = io->private_data;
	unsigned long long expirations;
	(void)pfd;
	(void)nfds;
	if (read(p->timer_fd, &expirations, sizeof(expirations)) < 0)
		expirations = 0;	/* not expired yet: EAGAIN */
	advance(p);
	*revents = 0;
	if (avail(p) >= p->avail_min && (p->running || io->stream == SND_PCM_STREAM_PLAYBACK))
		*revents = io->stream == SND_PCM_STREAM_PLAYBACK ? POLLOUT : POLLIN;
	arm(p);
	return 0;
}

static int sim_delay(snd_pcm_ioplug_t *io, snd_pcm_sframes_t *delayp)
{
	struct sim_pcm *p = io->private_data;
	advance(p);
	*delayp = filled(p);
	return 0;
}

static int sim_close(snd_pcm_ioplug_t *io)
{
	struct sim_pcm *p = io->private_data;
	close(p->timer_fd);
	free(p);
	return 0;
}

static const snd_pcm_ioplug_callback_t sim_callbacks = {
	.start = sim_start,
	.stop = sim_stop,
	.pointer = sim_pointer,
	.transfer = sim_transfer,
	.close = sim_close,
	.prepare = sim_prepare,
	.sw_params = sim_sw_params,
	.poll_revents = sim_poll_revents,
	.delay = sim_delay,
};

/* The hardware's capabilities: stereo only (so the standard profile set finds analog-stereo
 * and not mono or surround, as on a real laptop codec), the common rates and formats. */
static int set_constraints(snd_pcm_ioplug_t *io)
{
	static const unsigned int access[] = {
		SND_PCM_ACCESS_MMAP_INTERLEAVED, SND_PCM_ACCESS_RW_INTERLEAVED,
	};
	static const unsigned int formats[] = {
		SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S32_LE,
	};
	static const unsigned int rates[] = { 44100, 48000 };
	int err;
	if ((err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_ACCESS, 2, access)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_FORMAT, 2, formats)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_RATE, 2, rates)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_CHANNELS, 2, 2)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, 64, 1 << 20)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_BUFFER_BYTES, 128, 4 << 20)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIODS, 2, 1024)) < 0)
		return err;
	return 0;
}

/* Whether DIR/cardN/pcms lists "STREAM KIND DEV". */
static int card_has_pcm(const char *dir, int card, snd_pcm_stream_t stream, const char *kind,
			long dev)
{
	char path[PATH_MAX], line[128], want[96];
	int found = 0;
	snprintf(path, sizeof(path), "%s/card%d/pcms", dir, card);
	snprintf(want, sizeof(want), "%s %s %ld",
		 stream == SND_PCM_STREAM_PLAYBACK ? "playback" : "capture", kind, dev);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		found = strcmp(line, want) == 0;
	}
	fclose(f);
	return found;
}

SND_PCM_PLUGIN_DEFINE_FUNC(routectl_sim)
{
	snd_config_iterator_t i, next;
	const char *card = "0", *kind = "hw", *dir = getenv("ROUTECTL_SIM_DIR");
	char cardbuf[16];
	long dev = 0;
	int err, n;
	(void)root;

	snd_config_for_each(i, next, conf) {
		snd_config_t *c = snd_config_iterator_entry(i);
		const char *key;
		if (snd_config_get_id(c, &key) < 0)
			continue;
		if (!strcmp(key, "comment") || !strcmp(key, "type") || !strcmp(key, "hint"))
			continue;
		if (!strcmp(key, "card")) {
			if (sim_config_card(c, cardbuf, sizeof(cardbuf), &card) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "device")) {
			if (snd_config_get_integer(c, &dev) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "kind")) {
			if (snd_config_get_string(c, &kind) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "dir")) {
			if (snd_config_get_string(c, &dir) < 0)
				return -EINVAL;
		} else {
			SNDERR("routectl_sim: unknown field %s", key);
			return -EINVAL;
		}
	}
	if (!dir)
		return -ENODEV;
	n = sim_card_index(dir, card);
	if (n < 0)
		return n;
	if (!card_has_pcm(dir, n, stream, kind, dev))
		return -ENOENT;

	struct sim_pcm *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->timer_fd < 0) {
		free(p);
		return -errno;
	}
	p->avail_min = 1;
	/* The name carries card and device: the preload shim reads them back from
	 * snd_pcm_info (ioplug reports card -1, and ACP/PulseAudio need the card for its mixer and
	 * the device for HDMI jack names like "HDMI/DP,pcm=3 Jack"). */
	long hwdev = dev;
	if (!strcmp(kind, "hdmi"))
		hwdev = dev + 3;	/* as HDA: hdmi:N,0 is hw:N,3 */
	snprintf(p->name, sizeof(p->name), "routectl-sim:%d,%ld", n, hwdev);
	p->io.version = SND_PCM_IOPLUG_VERSION;
	p->io.name = p->name;
	p->io.callback = &sim_callbacks;
	p->io.private_data = p;
	p->io.poll_fd = p->timer_fd;
	p->io.poll_events = POLLIN;
	p->io.mmap_rw = 0;
	/* Report the pointer modulo the boundary: with a full buffer consumed at once a pointer
	 * modulo the buffer size would look like no progress. */
	p->io.flags = SND_PCM_IOPLUG_FLAG_BOUNDARY_WA | SND_PCM_IOPLUG_FLAG_MONOTONIC;
	if ((err = snd_pcm_ioplug_create(&p->io, p->name, stream, mode)) < 0) {
		close(p->timer_fd);
		free(p);
		return err;
	}
	if ((err = set_constraints(&p->io)) < 0) {
		snd_pcm_ioplug_delete(&p->io);
		return err;
	}
	*pcmp = p->io.pcm;
	return 0;
}

SND_PCM_PLUGIN_SYMBOL(routectl_sim);
