/*
 * cortexfs-plugin-host: the host side of the native plugin ABI v1 of the
 * seed (native-plugin-sdk-lib.rs: cortex_plugin_init, CortexHostApi,
 * CortexPluginApi, CortexBuffer), in its own dynamically linked process.
 *
 * Why a separate process: cortexfs is one static glibc binary, and dlopen
 * from a static binary works for a library that only calls libc but breaks
 * (SIGSEGV) for a Rust cdylib that starts std threads: the static binary
 * carries no dynamic loader state for TLS and thread setup of a loaded
 * libc. This program is linked against the system's libc.so like any
 * dynamic program, so plugins load the way they would into any host; and
 * a plugin that crashes takes only this process down, never cortexfsd.
 * cortexfsd embeds this program, runs it from a sealed memfd, and talks to
 * it over its stdin and stdout.
 *
 * Usage: cortexfs-plugin-host LIBRARY   (LIBRARY may be /proc/self/fd/N)
 *
 * Frames, both directions: op (1 byte), 3 zero bytes, nparts (u32 LE),
 * then nparts times: len (u32 LE) and len bytes. The parts are the ABI's
 * UTF-8 JSON buffers, passed through unparsed.
 *
 *   host -> daemon  'H' [plugin_info, descriptor 0, …, descriptor n-1]
 *                   'F' [code, message]   load failed; the host exits 2
 *                   'R' [result]          a tool_execute result
 *                   'E' [code, message]   one call failed; the host goes on
 *                   'D' []                plugin_drop done; the host exits 0
 *   daemon -> host  'X' [tool_name, input, invocation]
 *                   'Q' []                drop the plugin and exit
 *
 * End of input is a 'Q'. Every buffer the plugin returns is copied and then
 * handed back to the plugin's own buffer_free, exactly once; buffers the
 * host passes in are the host's and are freed by the host after the call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NATIVE_ABI_VERSION 1u
#define MAX_PART (16u << 20)   /* one JSON buffer */
#define MAX_PARTS 8u           /* a request has 3 */
#define MAX_TOOLS 1024u

typedef struct {
	uint8_t *ptr;
	size_t len;
	size_t cap;
} CortexBuffer;

typedef struct {
	uint32_t abi_version;
} CortexHostApi;

typedef struct {
	uint32_t abi_version;
	void *plugin;
	CortexBuffer (*plugin_info)(void *);
	size_t (*tool_count)(void *);
	CortexBuffer (*tool_descriptor)(void *, size_t);
	CortexBuffer (*tool_execute)(void *, CortexBuffer, CortexBuffer, CortexBuffer);
	void (*plugin_drop)(void *);
	void (*buffer_free)(CortexBuffer);
} CortexPluginApi;

typedef int32_t (*init_fn)(const CortexHostApi *, CortexPluginApi *);

static int proto_in = -1, proto_out = -1;

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* read_all returns 0 when n bytes were read, 1 at a clean end of input
 * before the first byte, -1 on error or a short read. */
static int read_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 && got == 0)
			return 1;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void put_u32(uint8_t *b, uint32_t v)
{
	b[0] = v & 0xff;
	b[1] = (v >> 8) & 0xff;
	b[2] = (v >> 16) & 0xff;
	b[3] = (v >> 24) & 0xff;
}

static uint32_t get_u32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

struct part {
	const uint8_t *ptr;
	size_t len;
};

static void send_frame(char op, const struct part *parts, uint32_t n)
{
	uint8_t hdr[8] = {(uint8_t)op, 0, 0, 0};
	put_u32(hdr + 4, n);
	if (write_all(proto_out, hdr, sizeof hdr) < 0)
		_exit(3);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t l[4];
		put_u32(l, (uint32_t)parts[i].len);
		if (write_all(proto_out, l, 4) < 0 || write_all(proto_out, parts[i].ptr, parts[i].len) < 0)
			_exit(3);
	}
}

static void send_error(char op, const char *code, const char *msg)
{
	struct part p[2] = {{(const uint8_t *)code, strlen(code)}, {(const uint8_t *)msg, strlen(msg)}};
	send_frame(op, p, 2);
}

static void fail(const char *code, const char *fmt, const char *arg)
{
	char msg[1024];
	snprintf(msg, sizeof msg, fmt, arg ? arg : "");
	send_error('F', code, msg);
	_exit(2);
}

/* take copies a buffer the plugin returned and hands it back to the
 * plugin's buffer_free. An empty or oversized buffer yields NULL (still
 * freed). */
static uint8_t *take(const CortexPluginApi *api, CortexBuffer b, size_t *len)
{
	uint8_t *out = NULL;
	*len = 0;
	if (b.ptr != NULL && b.len > 0 && b.len <= MAX_PART) {
		out = malloc(b.len);
		if (out == NULL)
			_exit(4);
		memcpy(out, b.ptr, b.len);
		*len = b.len;
	}
	if (b.ptr != NULL)
		api->buffer_free(b);
	return out;
}

/* read_frame reads one request; returns its op, or 'Q' at end of input. */
static char read_frame(uint8_t **parts, size_t *lens, uint32_t *n)
{
	uint8_t hdr[8];
	int r = read_all(proto_in, hdr, sizeof hdr);
	if (r == 1)
		return 'Q';
	if (r < 0)
		_exit(5);
	*n = get_u32(hdr + 4);
	if (*n > MAX_PARTS)
		_exit(5);
	for (uint32_t i = 0; i < *n; i++) {
		uint8_t l[4];
		if (read_all(proto_in, l, 4) != 0)
			_exit(5);
		lens[i] = get_u32(l);
		if (lens[i] > MAX_PART)
			_exit(5);
		parts[i] = malloc(lens[i] ? lens[i] : 1);
		if (parts[i] == NULL)
			_exit(4);
		if (lens[i] > 0 && read_all(proto_in, parts[i], lens[i]) != 0)
			_exit(5);
	}
	return (char)hdr[0];
}

static CortexBuffer borrowed(uint8_t *p, size_t n)
{
	CortexBuffer b = {p, n, n};
	return b;
}

static void serve(CortexPluginApi *api)
{
	for (;;) {
		uint8_t *parts[MAX_PARTS] = {0};
		size_t lens[MAX_PARTS] = {0};
		uint32_t n = 0;
		char op = read_frame(parts, lens, &n);
		if (op == 'X' && n == 3) {
			CortexBuffer res = api->tool_execute(api->plugin, borrowed(parts[0], lens[0]),
							     borrowed(parts[1], lens[1]), borrowed(parts[2], lens[2]));
			size_t rlen = res.len;
			size_t len;
			uint8_t *out = take(api, res, &len);
			if (out == NULL && rlen > MAX_PART) {
				send_error('E', "EMSGSIZE", "tool_execute returned a result larger than 16 MiB");
			} else if (out == NULL) {
				send_error('E', "EPROTO", "tool_execute returned an empty buffer");
			} else {
				struct part p = {out, len};
				send_frame('R', &p, 1);
			}
			free(out);
		}
		for (uint32_t i = 0; i < n; i++)
			free(parts[i]);
		if (op == 'Q')
			return;
		if (op != 'X' || n != 3)
			_exit(5);
	}
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	/* The protocol gets private descriptors; whatever the plugin prints on
	 * stdout lands on stderr and cannot corrupt a frame, and it reads an
	 * empty stdin. */
	proto_in = fcntl(0, F_DUPFD_CLOEXEC, 3);
	proto_out = fcntl(1, F_DUPFD_CLOEXEC, 3);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (proto_in < 0 || proto_out < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0)
		return 6;
	close(devnull);
	if (argc != 2)
		fail("EINVAL", "usage: cortexfs-plugin-host LIBRARY%s", NULL);

	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		fail("EINVAL", "dlopen failed: %s", dlerror());
	init_fn init = (init_fn)dlsym(h, "cortex_plugin_init");
	if (init == NULL)
		fail("EINVAL", "not a native plugin: the library exports no cortex_plugin_init%s", NULL);

	CortexHostApi host = {NATIVE_ABI_VERSION};
	CortexPluginApi api;
	memset(&api, 0, sizeof api);
	int32_t rc = init(&host, &api);
	if (rc == -2)
		fail("ENOTSUP", "the plugin refused native ABI version 1 (cortex_plugin_init returned -2): it was built for another ABI version%s", NULL);
	if (rc != 0) {
		char n[32];
		snprintf(n, sizeof n, "%d", rc);
		fail("EIO", "cortex_plugin_init failed with %s", n);
	}
	if (api.abi_version != NATIVE_ABI_VERSION) {
		/* Its table may have another layout: call nothing in it. */
		char n[32];
		snprintf(n, sizeof n, "%u", api.abi_version);
		fail("ENOTSUP", "the plugin speaks native ABI version %s; this host speaks version 1", n);
	}
	if (!api.plugin_info || !api.tool_count || !api.tool_descriptor || !api.tool_execute || !api.plugin_drop || !api.buffer_free) {
		if (api.plugin_drop)
			api.plugin_drop(api.plugin);
		fail("EPROTO", "the plugin's function table has a null entry%s", NULL);
	}

	size_t count = api.tool_count(api.plugin);
	if (count > MAX_TOOLS) {
		api.plugin_drop(api.plugin);
		fail("EPROTO", "the plugin declares more than 1024 tools%s", NULL);
	}
	struct part *parts = calloc(count + 1, sizeof *parts);
	if (parts == NULL)
		_exit(4);
	size_t len;
	parts[0].ptr = take(&api, api.plugin_info(api.plugin), &len);
	parts[0].len = len;
	for (size_t i = 0; i < count; i++) {
		parts[i + 1].ptr = take(&api, api.tool_descriptor(api.plugin, i), &len);
		parts[i + 1].len = len;
	}
	send_frame('H', parts, (uint32_t)(count + 1));
	for (size_t i = 0; i <= count; i++)
		free((void *)parts[i].ptr);
	free(parts);

	serve(&api);
	api.plugin_drop(api.plugin);
	send_frame('D', NULL, 0);
	return 0;
}
