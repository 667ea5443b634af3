/* LD_PRELOAD shim for the private sound servers only (pulseaudio, pipewire, wireplumber), never
 * for clients (shared/SIMULATED-DEVICES.md §1). It closes the two gaps between alsa-lib plugins
 * and real hardware that the servers' card code trips over:
 *  1. plugin PCMs report card -1 (and device 0) from snd_pcm_info, so ACP and PulseAudio find no
 *     mixer, hence no ports: give back the card and device the simulator's PCM plugin put in its
 *     name ("routectl-sim:CARD,DEV").
 *  2. alsa-lib's card enumeration (snd_card_load, snd_card_get_index/name/longname, used by
 *     module-alsa-card device_id=N and ACP) opens /dev/snd/controlCN and asks it CARD_INFO: fake
 *     that device node for simulated cards only.
 *  3. nothing in a server may reach the machine's real cards: every other /dev/snd/ path fails
 *     with ENOENT (alsa.conf's cards.* definitions open the kernel `hw` type directly).
 *  4. Bluetooth HFP/HSP (only with ROUTECTL_SIM_SCO=1, set by server.sh for BLUETOOTH=1): the
 *     kernel has no AF_BLUETOOTH, so there is no SCO socket for the servers' native HFP backends.
 *     socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_SCO) returns one end of an AF_UNIX
 *     SOCK_SEQPACKET pair instead; bind/listen/connect/setsockopt at the SCO and Bluetooth levels
 *     succeed, getsockopt answers the MTU (48 bytes, CVSD) and voice setting. Once connected, a
 *     thread plays the headset: it sends a packet of silence every 3 ms (16-bit 8 kHz mono, the
 *     pace servers write back at) and drains what the server sends, until the server closes its
 *     end. A socket that only listens never becomes readable (no headset ever calls in).
 * The simulated cards live in $ROUTECTL_SIM_DIR (DIR/cardN/info). Every other path and fd is
 * passed through untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sound/asound.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "../alsa/sim.h"

/* From alsa-lib's pcm.h, which cannot be included together with the kernel's sound/asound.h. */
typedef struct _snd_pcm_info snd_pcm_info_t;

#define MAX_FAKE_FDS 64

/* fds we opened in place of /dev/snd/controlCN, and the card each stands for. */
static struct { int fd, card; } fake_fds[MAX_FAKE_FDS];
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *sim_dir(void)
{
	return getenv("ROUTECTL_SIM_DIR");
}

/* The card N when path is /dev/snd/controlCN of a simulated card, else -1. */
static int fake_control_card(const char *path)
{
	int card;
	char tail;
	const char *dir;
	if (!path || strncmp(path, "/dev/snd/controlC", 17) != 0 || !(dir = sim_dir()) ||
	    sscanf(path, "/dev/snd/controlC%d%c", &card, &tail) != 1)
		return -1;
	return card >= 0 && card < SIM_MAX_CARDS && sim_card_exists(dir, card) ? card : -1;
}

static int fake_lookup(int fd)
{
	int card = -1;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < MAX_FAKE_FDS; i++)
		if (fake_fds[i].fd == fd + 1) {	/* stored +1 so 0 means free */
			card = fake_fds[i].card;
			break;
		}
	pthread_mutex_unlock(&fake_lock);
	return card;
}

/* A placeholder fd (/dev/null) standing for the control device of card. */
static int fake_open(int card, int flags)
{
	static int (*real_open)(const char *, int, ...);
	if (!real_open)
		real_open = dlsym(RTLD_NEXT, "open");
	int fd = real_open("/dev/null", (flags & O_CLOEXEC) | O_RDWR);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < MAX_FAKE_FDS; i++)
		if (!fake_fds[i].fd) {
			fake_fds[i].fd = fd + 1;
			fake_fds[i].card = card;
			break;
		}
	pthread_mutex_unlock(&fake_lock);
	return fd;
}

/* Whether path is a real ALSA device node, which the servers must never open. */
static int real_snd_node(const char *path)
{
	return path && strncmp(path, "/dev/snd/", 9) == 0;
}

/* The open() and open64() interceptions: a simulated card's control node is faked, a real /dev/snd
 * node is refused, everything else goes to the C library's own function of that name. */
static int sim_open(int (**real)(const char *, int, ...), const char *name, const char *path, int flags, mode_t mode)
{
	int card = fake_control_card(path);
	if (card >= 0)
		return fake_open(card, flags);
	if (real_snd_node(path)) {
		errno = ENOENT;
		return -1;
	}
	if (!*real)
		*real = dlsym(RTLD_NEXT, name);
	return (*real)(path, flags, mode);
}

/* open(): alsa-lib's snd_open_device() opens /dev/snd/controlCN with it. */
int open(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	va_list ap;
	mode_t mode = 0;
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	return sim_open(&real, "open", path, flags, mode);
}

/* open64(): the same entry for code built with large-file names. */
int open64(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	va_list ap;
	mode_t mode = 0;
	va_start(ap, flags);
	if (flags & (O_CREAT | O_TMPFILE))
		mode = va_arg(ap, mode_t);
	va_end(ap);
	return sim_open(&real, "open64", path, flags, mode);
}

/* __open_2() and __open64_2(): what open() compiles to under _FORTIFY_SOURCE when the flags are
 * not constant, as in alsa-lib's snd_ctl_hw_open (Debian builds with it). */
int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

int __open64_2(const char *path, int flags)
{
	return open64(path, flags);
}

/* --- SCO sockets (4.) --- */

/* From the kernel's bluetooth headers, which the build machine need not have. */
#define SIM_AF_BLUETOOTH 31
#define SIM_BTPROTO_SCO 2
#define SIM_SOL_SCO 17
#define SIM_SCO_OPTIONS 1
#define SIM_SCO_CONNINFO 2
#define SIM_SOL_BLUETOOTH 274
#define SIM_BT_VOICE 11
#define SIM_BT_SNDMTU 12
#define SIM_BT_RCVMTU 13
#define SIM_BT_VOICE_CVSD_16BIT 0x0060
#define SIM_SCO_MTU 48

/* Our SCO stand-ins: the server's fd (+1, 0 = free), the headset's end, whether connected. */
static struct { int fd, peer, connected; } sco_fds[MAX_FAKE_FDS];

static int sco_enabled(void)
{
	const char *v = getenv("ROUTECTL_SIM_SCO");
	return v && strcmp(v, "1") == 0;
}

static int sco_find(int fd)
{
	for (int i = 0; i < MAX_FAKE_FDS; i++)
		if (sco_fds[i].fd == fd + 1)
			return i;
	return -1;
}

static int is_sco(int fd)
{
	pthread_mutex_lock(&fake_lock);
	int i = sco_find(fd);
	pthread_mutex_unlock(&fake_lock);
	return i >= 0;
}

static int (*real_close_fn(void))(int)
{
	static int (*real)(int);
	if (!real)
		real = dlsym(RTLD_NEXT, "close");
	return real;
}

/* The headset's side of a connected SCO link: silence in at the air pace, anything out drained. */
static void *sco_headset(void *arg)
{
	int peer = (int)(intptr_t)arg;
	char buf[1024] = { 0 }, silence[SIM_SCO_MTU] = { 0 };
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct itimerspec its = { { 0, 3000000 }, { 0, 3000000 } };
	if (tfd >= 0)
		timerfd_settime(tfd, 0, &its, NULL);
	for (;;) {
		struct pollfd p[2] = { { peer, POLLIN, 0 }, { tfd, POLLIN, 0 } };
		if (poll(p, tfd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents & POLLIN) {
			ssize_t n = recv(peer, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0)
				break;
		}
		if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL))
			break;
		if (p[1].revents & POLLIN) {
			uint64_t ticks;
			if (read(tfd, &ticks, sizeof(ticks)) > 0)
				while (ticks--)
					if (send(peer, silence, sizeof(silence), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
						break;
		}
	}
	if (tfd >= 0)
		real_close_fn()(tfd);
	real_close_fn()(peer);
	return NULL;
}

int socket(int domain, int type, int protocol)
{
	static int (*real)(int, int, int);
	if (!real)
		real = dlsym(RTLD_NEXT, "socket");
	if (domain != SIM_AF_BLUETOOTH || (type & 0xf) != SOCK_SEQPACKET || protocol != SIM_BTPROTO_SCO ||
	    !sco_enabled())
		return real(domain, type, protocol);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | (type & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0, sv) < 0)
		return -1;
	fcntl(sv[1], F_SETFD, FD_CLOEXEC);
	pthread_mutex_lock(&fake_lock);
	int i = sco_find(-1);	/* a free slot */
	if (i >= 0) {
		sco_fds[i].fd = sv[0] + 1;
		sco_fds[i].peer = sv[1];
		sco_fds[i].connected = 0;
	}
	pthread_mutex_unlock(&fake_lock);
	if (i < 0) {
		real_close_fn()(sv[0]);
		real_close_fn()(sv[1]);
		errno = EMFILE;
		return -1;
	}
	return sv[0];
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	if (is_sco(fd))
		return 0;
	if (!real)
		real = dlsym(RTLD_NEXT, "bind");
	return real(fd, addr, len);
}

int listen(int fd, int backlog)
{
	static int (*real)(int, int);
	if (is_sco(fd))
		return 0;
	if (!real)
		real = dlsym(RTLD_NEXT, "listen");
	return real(fd, backlog);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	pthread_mutex_lock(&fake_lock);
	int i = sco_find(fd), start = 0, peer = -1;
	if (i >= 0 && !sco_fds[i].connected) {
		sco_fds[i].connected = start = 1;
		peer = sco_fds[i].peer;
	}
	pthread_mutex_unlock(&fake_lock);
	if (i >= 0) {
		pthread_t t;
		if (start && pthread_create(&t, NULL, sco_headset, (void *)(intptr_t)peer) == 0)
			pthread_detach(t);
		return 0;
	}
	if (!real)
		real = dlsym(RTLD_NEXT, "connect");
	return real(fd, addr, len);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	static int (*real)(int, struct sockaddr *, socklen_t *);
	if (is_sco(fd)) {
		errno = EAGAIN;
		return -1;
	}
	if (!real)
		real = dlsym(RTLD_NEXT, "accept");
	return real(fd, addr, len);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	static int (*real)(int, struct sockaddr *, socklen_t *, int);
	if (is_sco(fd)) {
		errno = EAGAIN;
		return -1;
	}
	if (!real)
		real = dlsym(RTLD_NEXT, "accept4");
	return real(fd, addr, len, flags);
}

static int put_opt(void *val, socklen_t *len, const void *v, socklen_t n)
{
	if (!val || !len) {
		errno = EFAULT;
		return -1;
	}
	if (*len > n)
		*len = n;
	memcpy(val, v, *len);
	return 0;
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	static int (*real)(int, int, int, void *, socklen_t *);
	if ((level == SIM_SOL_SCO || level == SIM_SOL_BLUETOOTH) && is_sco(fd)) {
		uint16_t mtu = SIM_SCO_MTU, voice = SIM_BT_VOICE_CVSD_16BIT;
		uint8_t conninfo[5] = { 0 };
		uint32_t zero = 0;
		if (level == SIM_SOL_SCO && name == SIM_SCO_OPTIONS)
			return put_opt(val, len, &mtu, sizeof(mtu));
		if (level == SIM_SOL_SCO && name == SIM_SCO_CONNINFO)
			return put_opt(val, len, conninfo, sizeof(conninfo));
		if (level == SIM_SOL_BLUETOOTH && (name == SIM_BT_SNDMTU || name == SIM_BT_RCVMTU))
			return put_opt(val, len, &mtu, sizeof(mtu));
		if (level == SIM_SOL_BLUETOOTH && name == SIM_BT_VOICE)
			return put_opt(val, len, &voice, sizeof(voice));
		return put_opt(val, len, &zero, sizeof(zero));
	}
	if (!real)
		real = dlsym(RTLD_NEXT, "getsockopt");
	return real(fd, level, name, val, len);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	static int (*real)(int, int, int, const void *, socklen_t);
	if ((level == SIM_SOL_SCO || level == SIM_SOL_BLUETOOTH) && is_sco(fd))
		return 0;
	if (!real)
		real = dlsym(RTLD_NEXT, "setsockopt");
	return real(fd, level, name, val, len);
}

/* close(): forget a placeholder fd so the number can be reused for a real file; a SCO stand-in's
 * headset end goes with it (the headset thread closes it itself once connected). */
int close(int fd)
{
	int peer = -1;
	pthread_mutex_lock(&fake_lock);
	for (int i = 0; i < MAX_FAKE_FDS; i++) {
		if (fake_fds[i].fd == fd + 1)
			fake_fds[i].fd = 0;
		if (sco_fds[i].fd == fd + 1) {
			sco_fds[i].fd = 0;
			if (!sco_fds[i].connected)
				peer = sco_fds[i].peer;
		}
	}
	pthread_mutex_unlock(&fake_lock);
	if (peer >= 0)
		real_close_fn()(peer);
	return real_close_fn()(fd);
}

/* ioctl(): answer the protocol version and CARD_INFO on a placeholder fd from DIR/cardN/info,
 * which is all alsa-lib's card enumeration asks of it. */
int ioctl(int fd, unsigned long request, ...)
{
	static int (*real)(int, unsigned long, ...);
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int card = fake_lookup(fd);
	if (card >= 0) {
		const char *dir = sim_dir();
		if (request == SNDRV_CTL_IOCTL_PVERSION) {
			*(int *)arg = SNDRV_CTL_VERSION;
			return 0;
		}
		if (request == SNDRV_CTL_IOCTL_CARD_INFO) {
			struct snd_ctl_card_info *info = arg;
			memset(info, 0, sizeof(*info));
			info->card = card;
			sim_info_get(dir, card, "id", (char *)info->id, sizeof(info->id));
			sim_info_get(dir, card, "driver", (char *)info->driver, sizeof(info->driver));
			sim_info_get(dir, card, "name", (char *)info->name, sizeof(info->name));
			sim_info_get(dir, card, "longname", (char *)info->longname, sizeof(info->longname));
			sim_info_get(dir, card, "mixername", (char *)info->mixername, sizeof(info->mixername));
			return 0;
		}
		errno = ENOTTY;
		return -1;
	}
	if (!real)
		real = dlsym(RTLD_NEXT, "ioctl");
	return real(fd, request, arg);
}

/* alsa-lib's own function: servers load libasound from a dlopen()ed module, outside the global
 * scope that RTLD_NEXT and RTLD_DEFAULT search, so ask the loaded library itself. */
static void *alsa_sym(const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);
	if (!sym) {
		void *lib = dlopen("libasound.so.2", RTLD_NOW | RTLD_NOLOAD);
		if (lib)
			sym = dlsym(lib, name);
	}
	return sym;
}

/* Card and device the simulator's PCM plugin encoded in the PCM name, or -1. */
static int sim_pcm_field(const snd_pcm_info_t *info, int field)
{
	static const char *(*get_id)(const snd_pcm_info_t *);
	int card, dev;
	if (!get_id)	/* looked up, not linked: the shim must load into any process */
		get_id = alsa_sym("snd_pcm_info_get_id");
	const char *id = get_id ? get_id(info) : NULL;
	if (!id || sscanf(id, "routectl-sim:%d,%d", &card, &dev) != 2)
		return -1;
	return field == 0 ? card : dev;
}

/* snd_pcm_info_get_card(): ioplug PCMs say -1; ACP and PulseAudio then find no mixer. */
int snd_pcm_info_get_card(const snd_pcm_info_t *info)
{
	static int (*real)(const snd_pcm_info_t *);
	if (!real)
		real = alsa_sym("snd_pcm_info_get_card");
	int card = real(info);
	return card >= 0 ? card : sim_pcm_field(info, 0) >= 0 ? sim_pcm_field(info, 0) : card;
}

/* snd_pcm_info_get_device(): ioplug PCMs say 0; HDMI jack names need the real device ("pcm=3"). */
unsigned int snd_pcm_info_get_device(const snd_pcm_info_t *info)
{
	static unsigned int (*real)(const snd_pcm_info_t *);
	if (!real)
		real = alsa_sym("snd_pcm_info_get_device");
	int dev = sim_pcm_field(info, 1);
	return dev >= 0 ? (unsigned int)dev : real(info);
}
